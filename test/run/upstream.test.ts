// Which upstream records may be passed on without asking the service again, and how the
// references of a stored request are filled in.
import { describe, expect, it } from 'vitest';
import type { JobRecord } from '../../src/api/schemas.js';
import { fillReferences, parseReference, referencesIn } from '../../src/manifest/after.js';
import { UpstreamRecords } from '../../src/run/runner/upstream-records.js';

const T0 = Date.parse('2026-11-25T00:00:00Z');
const record = (expires?: string, itemExpires?: string): JobRecord => ({
  img_uuid: 'u-1',
  status: 'success',
  json: [
    {
      type: 'image',
      value: 'https://cdn.example/1.png?sig=a',
      ...(itemExpires ? { link_expired_at: itemExpires } : {}),
    },
  ],
  ...(expires ? { link_expired_at: expires } : {}),
});

describe('UpstreamRecords', () => {
  it('keeps a record only while its links outlive the time asked for', () => {
    const records = new UpstreamRecords();
    records.remember('u-1', record('2026-11-25T02:00:00Z'), T0);
    expect(records.fresh('u-1', T0 + 30 * 60_000)).toBeDefined();
    expect(records.fresh('u-1', T0 + 2 * 60 * 60_000)).toBeUndefined();
    expect(records.fresh('u-2', T0)).toBeUndefined();
  });

  it('reads the earliest expiry, on the job or on any item, as a date or epoch seconds', () => {
    const records = new UpstreamRecords();
    records.remember('u-1', record('2026-11-25T12:00:00Z', '2026-11-25T00:10:00Z'), T0);
    expect(records.fresh('u-1', T0 + 30 * 60_000)).toBeUndefined();
    const epoch = new UpstreamRecords();
    epoch.remember('u-1', record(String((T0 + 3_600_000) / 1000)), T0);
    expect(epoch.fresh('u-1', T0 + 30 * 60_000)).toBeDefined();
    expect(epoch.fresh('u-1', T0 + 61 * 60_000)).toBeUndefined();
  });

  it('trusts links without a stated expiry for an hour after they worked', () => {
    const records = new UpstreamRecords();
    records.remember('u-1', record(), T0);
    expect(records.fresh('u-1', T0 + 59 * 60_000)).toBeDefined();
    expect(records.fresh('u-1', T0 + 61 * 60_000)).toBeUndefined();
  });
});

describe('references', () => {
  it('are found in any string of a request and filled in, keeping the type of a lone one', () => {
    const body = {
      model: 'song-replace-section',
      task_id: '{{after.img_uuid}}',
      infill_end_s: '{{ after.songs.1.audio_duration }}',
      title: '{{after.songs.1.title}} (bridge)',
      tags: ['{{after.sheet.name}}', 'literal {{brand}}'],
    };
    expect([...referencesIn(body)].sort()).toEqual([
      'after.img_uuid',
      'after.sheet.name',
      'after.songs.1.audio_duration',
      'after.songs.1.title',
    ]);
    const values: Record<string, unknown> = {
      'after.img_uuid': 'job-1',
      'after.songs.1.audio_duration': 61.5,
      'after.songs.1.title': 'Mornings',
      'after.sheet.name': 'Aria',
    };
    expect(fillReferences(body, (path) => values[path])).toEqual({
      model: 'song-replace-section',
      task_id: 'job-1',
      infill_end_s: 61.5,
      title: 'Mornings (bridge)',
      tags: ['Aria', 'literal {{brand}}'],
    });
  });

  it('put a sheet field that is an object into text as JSON, and into a lone place as the object itself', () => {
    const looks = { hair: 'red', eyes: 2 };
    const body = { prompt: 'A portrait: {{after.sheet.looks}}', extra: '{{after.sheet.looks}}' };
    expect(fillReferences(body, () => looks)).toEqual({
      prompt: 'A portrait: {"hair":"red","eyes":2}',
      extra: looks,
    });
  });

  it('parse by the form of after: a lone upstream, or names', () => {
    expect(parseReference(['after', 'files', '2'], undefined)).toEqual({
      ok: true,
      reference: { name: '', output: { kind: 'file', n: 2 }, path: 'after.files.2' },
    });
    expect(parseReference(['after', 'still', 'image'], ['still', 'voice'])).toMatchObject({
      ok: true,
      reference: { name: 'still', output: { kind: 'image' } },
    });
    expect(parseReference(['after', 'songs', '0', 'title'], undefined).ok).toBe(false);
    expect(parseReference(['after', 'image'], ['still'])).toMatchObject({ ok: false });
  });
});
