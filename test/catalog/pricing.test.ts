// The shared price helpers, as a person reads their result in `plan`: the billed length, the basis
// sentence and the range the budget is checked against.
import { describe, expect, it } from 'vitest';
import { CATALOG, DEFAULT_PRICES } from '../../src/catalog/index.js';
import {
  billedSeconds,
  exact,
  fromDuration,
  fromLength,
  range,
  tokens,
  usableHint,
} from '../../src/catalog/pricing.js';
import { vary } from './cases.js';

const voiceCover = (hint: number | undefined) =>
  CATALOG['voice-cover'].estimate(vary('voice-cover'), {}, DEFAULT_PRICES, hint);

describe('a media_seconds hint', () => {
  // Nothing known prices the song at its longest (360 s): the budget stays safe.
  const unknown = { tokens: 7.2, min: 0.1, max: 7.2 };

  it.each<[string, number, { tokens: number; min: number; max: number }]>([
    ['0', 0, unknown],
    ['negative', -3, unknown],
    ['NaN', Number.NaN, unknown],
    ['Infinity', Number.POSITIVE_INFINITY, unknown],
    ['60 s', 60, { tokens: 1.2, min: 1.2, max: 1.2 }],
    ['a fraction of a second', 0.2, { tokens: 0.02, min: 0.02, max: 0.02 }],
  ])('of %s prices a voice cover at %j', (_name, hint, expected) => {
    const e = voiceCover(hint);
    expect({ tokens: e.tokens, min: e.min, max: e.max }).toEqual(expected);
  });

  it.each([
    [undefined, undefined],
    [0, undefined],
    [-1, undefined],
    [Number.NaN, undefined],
    [Number.POSITIVE_INFINITY, undefined],
    [0.5, 0.5],
    [90, 90],
  ])('%s is used as %s', (hint, used) => {
    expect(usableHint(hint)).toBe(used);
  });
});

describe('billed seconds', () => {
  it.each([
    [30, 30],
    [30.0000000001, 30],
    [30.2, 31],
    [0.4, 1],
    [0, 0],
  ])('%d s bills %d s', (seconds, billed) => {
    expect(billedSeconds(seconds)).toBe(billed);
  });

  it.each<[number, 'measured' | 'media_seconds', { seconds: number; text: string }]>([
    [90.2, 'measured', { seconds: 91, text: '91 s (90.2 s measured, rounded up)' }],
    [7.5, 'media_seconds', { seconds: 8, text: '8 s (7.5 s media_seconds, rounded up)' }],
    [60, 'measured', { seconds: 60, text: '60 s (measured)' }],
    [60.0000000001, 'media_seconds', { seconds: 60, text: '60 s (media_seconds)' }],
  ])('%d s %s reads %j', (raw, source, expected) => {
    expect(fromLength(raw, source)).toEqual(expected);
  });

  it('bills a duration the user set as written', () => {
    expect(fromDuration(10)).toEqual({ seconds: 10, text: '10 s' });
  });
});

describe('token amounts in a basis', () => {
  it.each([
    [1, '1 token'],
    [1.0000001, '1 token'],
    [2, '2 tokens'],
    [0.2, '0.2 tokens'],
    [0.1 + 0.2, '0.3 tokens'],
  ])('%d reads %s', (n, text) => {
    expect(tokens(n)).toBe(text);
  });

  it('says "1 token" in an estimate the user reads', () => {
    const e = CATALOG['ai-talking-avatar-video'].estimate(
      vary('ai-talking-avatar-video', { duration: 30 }),
      {},
      DEFAULT_PRICES,
    );
    expect(e.basis).toBe('30 s × 1 token (540p)');
  });
});

describe('estimates', () => {
  it('an exact price has no range, its float noise removed', () => {
    expect(exact(0.1 + 0.2, 'b')).toEqual({
      tokens: 0.3,
      min: 0.3,
      max: 0.3,
      basis: 'b',
      assumedPrice: false,
    });
    expect(exact(2, 'b', true).assumedPrice).toBe(true);
  });

  it('a range counts its maximum, so that budgets stay safe', () => {
    expect(range(0.1, 7.2, 'b')).toEqual({
      tokens: 7.2,
      min: 0.1,
      max: 7.2,
      basis: 'b',
      assumedPrice: false,
    });
    expect(range(1, 2, 'b', true).assumedPrice).toBe(true);
  });

  it('a range whose ends are equal once rounded is exact', () => {
    expect(range(0.3, 0.1 + 0.2, 'b', true)).toEqual({
      tokens: 0.3,
      min: 0.3,
      max: 0.3,
      basis: 'b',
      assumedPrice: true,
    });
    expect(range(1.0000001, 1, 'b')).toEqual({ tokens: 1, min: 1, max: 1, basis: 'b', assumedPrice: false });
  });
});
