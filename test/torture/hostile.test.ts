// The torture's hostile inputs inside `npm test` (the same cases as `npm run torture`): each one against
// the real CLI in a child process of its own.
import { describe, expect, it } from 'vitest';
import { hostileTorture } from './hostile.js';

describe('torture: hostile inputs', () => {
  it('refuses each quickly with a clear message or keeps it literal, writing nothing outside the output folder', async () => {
    const { cases, guarantees } = await hostileTorture();
    expect(guarantees.filter((g) => !g.ok)).toEqual([]);
    expect(cases.map((c) => c.name)).toContain('10,000-deep nesting');
  }, 90_000);
});
