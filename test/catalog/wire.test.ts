import { describe, expect, it } from 'vitest';
import { CATALOG, ENDPOINTS, fromWireBody, MODEL_IDS, toWireBody } from '../../src/catalog/index.js';
import { BASE, I, V } from './cases.js';

const CB = 'https://hooks.example/run-1?token=abc';

describe('toWireBody', () => {
  it('adds model and the callback around the canonical body', () => {
    expect(toWireBody(CATALOG['flat-image'], { prompt: 'A mug', ratio: '1:1' }, CB)).toEqual({
      model: 'flat-image',
      prompt: 'A mug',
      ratio: '1:1',
      custom_callback_url: CB,
    });
  });

  it('sends no model to the face swap endpoint and no callback when none is given', () => {
    expect(toWireBody(CATALOG['video-face-swap'], { reference_video: V, reference_img: I })).toEqual({
      reference_video: V,
      reference_img: I,
    });
  });

  it('sends the stream callback under its canonical name', () => {
    const wire = toWireBody(CATALOG['stream-2-0-fast'], { prompt: 'p' }, CB);
    expect(wire).toEqual({ model: 'stream-2-0-fast', prompt: 'p', custom_callback_url: CB });
  });
});

describe('fromWireBody', () => {
  it.each(MODEL_IDS.map((m) => [m]))('round-trips %s with a callback', (model) => {
    const entry = CATALOG[model];
    const wire = JSON.parse(JSON.stringify(toWireBody(entry, BASE[model], CB)));
    const read = fromWireBody(entry.endpoint, wire);
    expect(read).toEqual({ ok: true, entry, input: BASE[model], callbackUrl: CB });
    if (read.ok) expect(read.entry.check(read.input)).toEqual({ ok: true, body: BASE[model] });
  });

  it('omits callbackUrl when none was sent', () => {
    const read = fromWireBody(ENDPOINTS.images, { model: 'pixel-lite', prompt: 'x' });
    expect(read).toEqual({ ok: true, entry: CATALOG['pixel-lite'], input: { prompt: 'x' } });
  });

  it('takes the callback from args', () => {
    const read = fromWireBody(ENDPOINTS.audio, {
      model: 'speech-v3',
      text: 'hi',
      args: { custom_callback_url: CB },
    });
    expect(read).toEqual({ ok: true, entry: CATALOG['speech-v3'], input: { text: 'hi' }, callbackUrl: CB });
  });

  it("takes the callback from stream-2-0-fast's alias", () => {
    const read = fromWireBody(ENDPOINTS.videos, { model: 'stream-2-0-fast', prompt: 'p', callback_url: CB });
    expect(read).toEqual({
      ok: true,
      entry: CATALOG['stream-2-0-fast'],
      input: { prompt: 'p' },
      callbackUrl: CB,
    });
  });

  it('leaves callback_url in the input of other models, where check refuses it', () => {
    const read = fromWireBody(ENDPOINTS.videos, { model: 'flow22_spicy', prompt: 'p', callback_url: CB });
    expect(read.ok && read.input).toEqual({ prompt: 'p', callback_url: CB });
    if (read.ok) expect(read.entry.check(read.input).ok).toBe(false);
  });

  it('keeps aliases in the input for check to normalise', () => {
    const read = fromWireBody(ENDPOINTS.videos, {
      model: 'stream-2-0-fast',
      image_url: I,
      resolution: '720p',
    });
    if (!read.ok) throw new Error(JSON.stringify(read.issues));
    expect(read.entry.check(read.input)).toEqual({ ok: true, body: { image_urls: [I], quality: '720p' } });
  });

  it.each<[string, string, unknown, { path: string; message: string }[]]>([
    [
      'an unknown endpoint',
      '/api/v1/music',
      { model: 'x' },
      [{ path: '', message: expect.stringContaining('unknown endpoint /api/v1/music') }],
    ],
    [
      'a body that is not an object',
      ENDPOINTS.images,
      'x',
      [{ path: '', message: 'body must be a JSON object, got "x"' }],
    ],
    [
      'a missing model',
      ENDPOINTS.images,
      { prompt: 'x' },
      [{ path: 'model', message: 'is required; one of flat-image, anime-waifu, pixel-lite, oc-maker' }],
    ],
    [
      'a model of another endpoint',
      ENDPOINTS.images,
      { model: 'speech-v3', text: 'x' },
      [
        {
          path: 'model',
          message:
            'must be one of flat-image, anime-waifu, pixel-lite, oc-maker on /api/v1/images/generations, got "speech-v3"',
        },
      ],
    ],
    [
      'a model on the face swap endpoint',
      ENDPOINTS.faceSwap,
      { model: 'video-face-swap', reference_video: V, reference_img: I },
      [{ path: 'model', message: 'not accepted: the face swap endpoint has no model field; remove it' }],
    ],
    [
      'two different callbacks',
      ENDPOINTS.audio,
      {
        model: 'speech-v3',
        text: 'x',
        custom_callback_url: CB,
        args: { custom_callback_url: 'https://other.example/' },
      },
      [
        {
          path: 'args.custom_callback_url',
          message: expect.stringContaining('callback URL given twice with different values'),
        },
      ],
    ],
    [
      'a callback that is not a URL',
      ENDPOINTS.audio,
      { model: 'speech-v3', text: 'x', custom_callback_url: 'hook' },
      [{ path: 'custom_callback_url', message: 'must be an http(s) URL, got "hook"' }],
    ],
    [
      'other fields in args',
      ENDPOINTS.audio,
      { model: 'speech-v3', text: 'x', args: { speed: 1 } },
      [{ path: 'args.speed', message: 'unknown field; known fields in args: custom_callback_url' }],
    ],
  ])('refuses %s', (_name, endpoint, wire, issues) => {
    expect(fromWireBody(endpoint, wire)).toEqual({ ok: false, issues });
  });
});
