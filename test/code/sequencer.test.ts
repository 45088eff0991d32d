// The order test files start in when vitest has no timings of its own (a fresh clone, as on CI): the
// known slow files first, slowest first, so no minute-long file starts last.
import { describe, expect, it } from 'vitest';
import type { TestSpecification, Vitest } from 'vitest/node';
import { REPO } from '../helpers/child.js';
import { missingSlowFiles, SLOW_FILES, SlowFirstSequencer } from '../helpers/sequencer.js';

const project = { name: '', config: { isolate: true, sequence: { groupOrder: 0 } } };

function sequencer(timed: Set<string>): SlowFirstSequencer {
  const ctx = {
    config: { root: REPO.replace(/\/$/, '') },
    cache: {
      getFileTestResults: (key: string) => (timed.has(key) ? { duration: 1, failed: false } : undefined),
      getFileStats: () => undefined,
    },
  };
  return new SlowFirstSequencer(ctx as unknown as Vitest);
}

const spec = (file: string) => ({ project, moduleId: `${REPO}${file}` }) as unknown as TestSpecification;
const names = (specs: TestSpecification[]) => specs.map((s) => s.moduleId.slice(REPO.length));

describe('the sequencer of the suite', () => {
  it('lists only files that exist', () => {
    expect(missingSlowFiles(REPO)).toEqual([]);
  });

  it('starts the slow files first, slowest first, when vitest has no timings', async () => {
    const files = [
      'test/util/numbers.test.ts',
      SLOW_FILES[2] ?? '',
      'test/cli/pipe.test.ts',
      SLOW_FILES[0] ?? '',
    ];
    const sorted = await sequencer(new Set()).sort(files.map(spec));
    expect(names(sorted)).toEqual([
      SLOW_FILES[0],
      SLOW_FILES[2],
      'test/util/numbers.test.ts',
      'test/cli/pipe.test.ts',
    ]);
  });

  it("keeps vitest's own order (longest measured first) once every file has been timed", async () => {
    const files = ['test/util/numbers.test.ts', SLOW_FILES[0] ?? ''];
    const sorted = await sequencer(new Set(files.map((f) => `:${f}`))).sort(files.map(spec));
    expect(names(sorted)).toEqual(files);
  });
});
