import { describe, expect, it } from 'vitest';
import { loaded, loadText, manifest } from './helpers.js';

const TASK = '  - id: t\n    model: flat-image\n    input: { day: "{{date}}" }\n';

describe('settings', () => {
  it.each<[string, string, string, string]>([
    ['', '', 'demo', '2024-03-10'],
    ['', 'run: "{{name}}-{{date}}"', 'demo-2024-03-10', '2024-03-10'],
    ['', 'run: "{{name}}_{{datetime}}"', 'demo_2024-03-10T013045', '2024-03-10'],
    ['timezone: America/Los_Angeles', 'run: "{{name}}-{{datetime}}"', 'demo-2024-03-09T173045', '2024-03-09'],
    ['timezone: Asia/Tokyo', 'run: "{{date}}-{{brand}}"', '2024-03-10-Acme', '2024-03-10'],
    ['timezone: UTC', 'run: "{{year}}"', '2024', '2024-03-10'],
  ])('%s %s gives run id %s', async (zone, run, runId, day) => {
    const head = `${zone}\n${run}\nvars: { brand: Acme, year: 2024 }\n`;
    const { settings, tasks } = await loaded(manifest(TASK, head));
    expect(settings.runId).toBe(runId);
    expect(tasks[0]?.input.day).toBe(day);
    expect(tasks[0]?.id).toBe('t');
  });

  it('fills defaults and resolves output against the working folder', async () => {
    const { settings } = await loaded(manifest(TASK));
    expect(settings).toEqual({
      version: 1,
      name: 'demo',
      runId: 'demo',
      concurrency: 4,
      order: 'longest',
      output: '/work/out',
      retries: 0,
      review: false,
    });
  });

  it('keeps every setting the manifest gives', async () => {
    const head = `run: "{{name}}-{{date}}"
schedule: "0 3 * * *"
timezone: Europe/Paris
concurrency: 8
order: manifest
retries: 2
budget: 250.5
budget_per_period: 5000
output: ../results
callback_url: https://example.org/hook
listen: "0.0.0.0:8788"
`;
    const { settings } = await loaded(manifest(TASK, head));
    expect(settings).toEqual({
      version: 1,
      name: 'demo',
      run: '{{name}}-{{date}}',
      runId: 'demo-2024-03-10',
      schedule: '0 3 * * *',
      timezone: 'Europe/Paris',
      concurrency: 8,
      order: 'manifest',
      budget: 250.5,
      budgetPerPeriod: 5000,
      retries: 2,
      review: false,
      output: '/results',
      callbackUrl: 'https://example.org/hook',
      listen: '0.0.0.0:8788',
    });
  });

  it('uses the injected clock only', async () => {
    const result = await loadText(
      manifest(TASK, 'run: "{{name}}-{{datetime}}"\n'),
      {},
      { now: new Date('1999-12-31T23:59:59Z') },
    );
    expect(result.ok && result.manifest.settings.runId).toBe('demo-1999-12-31T235959');
  });
});
