import { describe, expect, it } from 'vitest';
import { DEFAULT_PRICES } from '../../src/catalog/index.js';
import { foldProblems, formatProblem } from '../../src/manifest/problems.js';
import type { ManifestProblem, SourcePos, TaskSpec } from '../../src/manifest/types.js';
import type { ProbeResult } from '../../src/media/types.js';
import { checkTasks, mediaNeeds, planTotals, priceTasks } from '../../src/plan/plan.js';

const at = (line: number, col = 1): SourcePos => ({ file: 'm.yaml', line, col });

function spec(id: string, model: string, input: Record<string, unknown>, mediaSeconds?: number): TaskSpec {
  return {
    id,
    model,
    input,
    pos: at(1),
    locate: (path) => (path === 'video_url' ? at(7, 18) : at(5)),
    ...(mediaSeconds === undefined ? {} : { mediaSeconds }),
  };
}

const V = 'https://m.example/v.mp4';
const A = 'https://m.example/a.mp3';

function plan(specs: TaskSpec[], measured?: Record<string, ProbeResult>) {
  const checked = checkTasks(specs);
  expect(checked.problems).toEqual([]);
  return priceTasks(checked.tasks, measured ? new Map(Object.entries(measured)) : undefined, DEFAULT_PRICES);
}

describe('priceTasks', () => {
  const avatar = spec('talk', 'ai-talking-avatar-video', { video_url: V, audio_url: A });

  it.each([
    ['over the limit', 350_000_000, 'the file is 350 MB; the limit is 300 MB'],
    ['a byte over the limit', 300_000_001, 'the file is 300,000,001 bytes; the limit is 300 MB'],
  ])('refuses a video %s, located at its field', (_, bytes, message) => {
    const result = plan([avatar], {
      [V]: { ok: true, seconds: 12, bytes, container: 'mp4' },
      [A]: { ok: true, seconds: 8.1, container: 'mp3' },
    });
    expect(result.tasks).toEqual([]);
    expect(result.problems).toEqual([{ pos: at(7, 18), taskId: 'talk', path: 'input.video_url', message }]);
  });

  it('accepts a file exactly at the limit', () => {
    const result = plan([avatar], {
      [V]: { ok: true, seconds: 12, bytes: 300_000_000, container: 'mp4' },
      [A]: { ok: true, seconds: 8.1, container: 'mp3' },
    });
    expect(result.problems).toEqual([]);
    expect(result.tasks[0]?.estimate.tokens).toBe(9);
  });

  it('keeps why a length could not be measured, per field', () => {
    const result = plan([avatar], { [V]: { ok: false, reason: 'cannot measure it: not found (HTTP 404)' } });
    expect(result.tasks[0]?.mediaNotes).toEqual([
      'video_url: cannot measure it: not found (HTTP 404)',
      'audio_url: not measured',
    ]);
  });

  it('asks to measure each link once, whatever the number of tasks', () => {
    const { tasks } = checkTasks([
      avatar,
      spec('again', 'ai-talking-avatar-video', { video_url: V, audio_url: A }),
    ]);
    expect(mediaNeeds(tasks)).toEqual([
      { location: V, kind: 'video' },
      { location: A, kind: 'audio' },
    ]);
  });

  it('adds tasks up per model without float noise', () => {
    const images = Array.from({ length: 7 }, (_, i) => spec(`i${i}`, 'flat-image', { prompt: 'x' }));
    const totals = planTotals(plan(images).tasks);
    // 7 x 0.2 is 1.4000000000000001 in floating point
    expect(totals).toMatchObject({ tasks: 7, tokens: 1.4, min: 1.4, max: 1.4, usd: 0.028 });
  });
});

describe('foldProblems', () => {
  const problem = (task: string, message: string, pos = at(7, 32)): ManifestProblem => ({
    pos,
    taskId: task,
    path: 'input.ratio',
    message,
  });

  it.each([
    [1, 'm.yaml:7:32  task t0  input.ratio: must be one of 1:1, got "0"'],
    [2, 'm.yaml:7:32  2 tasks (t0, t1)  input.ratio: must be one of 1:1, got "0"'],
    [3, 'm.yaml:7:32  3 tasks (t0, t1, t2)  input.ratio: must be one of 1:1, got "0"'],
    [4, 'm.yaml:7:32  4 tasks (t0, t1, t2, …)  input.ratio: must be one of 1:1, got "0"'],
    [1000, 'm.yaml:7:32  1,000 tasks (t0, t1, t2, …)  input.ratio: must be one of 1:1, got "0"'],
  ])('of %i tasks breaking one rule at one place (values apart), makes one line', (n, line) => {
    const many = Array.from({ length: n }, (_, i) => problem(`t${i}`, `must be one of 1:1, got "${i}"`));
    const out = foldProblems(many);
    expect(out.map(formatProblem)).toEqual([line]);
    // Folding again (a later stage of the same check) only adds up.
    expect(foldProblems([...out, ...out])[0]?.tasks?.count).toBe(2 * n);
  });

  it('keeps different rules and different places apart', () => {
    const out = foldProblems([
      ...Array.from({ length: 6 }, (_, i) => problem(`a${i}`, 'must be one of 1:1, got "x"')),
      ...Array.from({ length: 6 }, (_, i) => problem(`b${i}`, 'is required')),
      ...Array.from({ length: 6 }, (_, i) => problem(`c${i}`, 'must be one of 1:1, got "x"', at(9, 3))),
    ]);
    expect(out.map((p) => [p.tasks?.count, p.tasks?.first])).toEqual([
      [6, ['a0', 'a1', 'a2']],
      [6, ['b0', 'b1', 'b2']],
      [6, ['c0', 'c1', 'c2']],
    ]);
  });
});
