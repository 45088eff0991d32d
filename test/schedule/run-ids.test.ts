import { describe, expect, it } from 'vitest';
import { CronSchedule } from '../../src/schedule/next.js';
import { sharedRunProblem } from '../../src/schedule/run-ids.js';

function schedule(expression: string, timezone = 'Europe/Berlin'): CronSchedule {
  const parsed = CronSchedule.parse(expression, timezone);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.schedule;
}

// A week before the autumn change in Berlin (25 October 2026): a daily 02:30 fires once on that day.
const FROM = new Date('2026-10-18T12:00:00Z');

describe('the firings of a schedule each get a run of their own', () => {
  it.each([
    ['{{datetime}}, every second', '{{name}}-{{datetime}}', '* * * * * *'],
    ['{{date}}, daily across the autumn change', '{{name}}-{{date}}', '30 2 * * *'],
    ['{{date}}, weekly', 'weekly-{{date}}', '0 6 * * 1'],
    ['{{date}} with vars', '{{vars.shop}}-{{date}}', '0 0 * * *'],
  ])('%s', (_, run, expression) => {
    expect(sharedRunProblem({ run, runId: 'nightly-x' }, schedule(expression), FROM)).toBeUndefined();
  });

  it.each([
    [
      'no run: template',
      { runId: 'nightly' },
      '30 2 * * *',
      'run: missing, so every firing is run nightly: the first firing finishes it and each later one finds it done and sends nothing; add e.g. `run: "{{name}}-{{date}}"` (`{{datetime}}` when it fires more than once a day) to the manifest',
    ],
    [
      'a template without the time',
      { run: '{{name}}-{{vars.shop}}', runId: 'nightly-berlin' },
      '30 2 * * *',
      'run: "{{name}}-{{vars.shop}}" names every firing\'s run nightly-berlin: the first firing finishes it and each later one finds it done and sends nothing; add {{date}} or {{datetime}} to it, e.g. `run: "{{name}}-{{date}}"` (`{{datetime}}` when it fires more than once a day)',
    ],
    [
      '{{date}} fired hourly',
      { run: '{{name}}-{{date}}', runId: 'nightly-2026-10-18' },
      '0 * * * *',
      'run: "{{name}}-{{date}}" names the firings due 2026-10-18T15:00:00+02:00 and 2026-10-18T16:00:00+02:00 alike ({{date}} is 2026-10-18 for both): the second would find the first\'s run done and send nothing; use {{datetime}} instead of {{date}}',
    ],
    [
      '{{date}} fired twice on some days only (Mondays at 01:00 and 23:00)',
      { run: '{{name}}-{{date}}', runId: 'nightly-2026-10-18' },
      '0 1,23 * * 1',
      'run: "{{name}}-{{date}}" names the firings due 2026-10-19T01:00:00+02:00 and 2026-10-19T23:00:00+02:00 alike ({{date}} is 2026-10-19 for both): the second would find the first\'s run done and send nothing; use {{datetime}} instead of {{date}}',
    ],
  ])('refused: %s', (_, manifest, expression, line) => {
    expect(sharedRunProblem(manifest, schedule(expression), FROM)).toBe(line);
  });
});
