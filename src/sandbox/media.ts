// Sample input media the sandbox serves under /_sandbox/media/, so that every model (talking avatar,
// dance, face swap, voice cover, song section) can be tried without hosting files of one's own.
// The files are committed under assets/sandbox/ and are real media: the sandbox measures them as it
// measures any link, so their lengths are chosen inside each model's limits.
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sandboxAsset } from '../media/assets.js';

export const SANDBOX_MEDIA_PATH = '/_sandbox/media';

/** The manifest var that `run --sandbox` sets to the embedded sandbox's base URL. */
export const SANDBOX_VAR = 'sandbox';

export interface SampleMedia {
  /** The served name, also the file name under assets/sandbox/. */
  name: string;
  contentType: string;
  /** Length in seconds as the sandbox's own probe measures it; absent for images. */
  seconds?: number;
  what: string;
}

/** Every sample, with the length its probe gives (a test keeps these figures true). */
export const SANDBOX_MEDIA: readonly SampleMedia[] = [
  {
    name: 'talking-head.mp4',
    contentType: 'video/mp4',
    seconds: 12,
    what: 'a front-facing video (talking avatar 3-60 s, face swap)',
  },
  { name: 'dance.mp4', contentType: 'video/mp4', seconds: 5, what: 'a dance reference (at most 30 s)' },
  { name: 'face.png', contentType: 'image/png', what: 'a face photo (face swap, avatar)' },
  { name: 'full-body.png', contentType: 'image/png', what: 'a full-body figure (dance)' },
  {
    name: 'speech.mp3',
    contentType: 'audio/mpeg',
    seconds: 8.1,
    what: 'a spoken line (talking avatar audio)',
  },
  {
    name: 'song.mp3',
    contentType: 'audio/mpeg',
    seconds: 30.067,
    what: 'a song (voice cover 5-360 s, song section)',
  },
  {
    name: 'voice.wav',
    contentType: 'audio/wav',
    seconds: 4,
    what: 'a voice sample (voice cover reference, at least 3 s)',
  },
];

/**
 * The vars `run --sandbox` gives a manifest: `{{sandbox}}` becomes the embedded sandbox's base URL, so
 * `{{sandbox}}/_sandbox/media/song.mp3` reaches its sample song whatever port it listens on.
 */
export function sandboxVars(baseUrl: string): Record<string, string> {
  return { [SANDBOX_VAR]: baseUrl.replace(/\/+$/, '') };
}

const byName = new Map(SANDBOX_MEDIA.map((m) => [m.name, m]));
const cache = new Map<string, Promise<Buffer>>();

function bytesOf(name: string): Promise<Buffer> {
  let bytes = cache.get(name);
  if (!bytes) {
    bytes = readFile(sandboxAsset(name));
    cache.set(name, bytes);
    // A failed read is not cached, so a repaired install works without a restart.
    bytes.catch(() => cache.delete(name));
  }
  return bytes;
}

/** Registers GET /_sandbox/media (the list) and GET /_sandbox/media/<name>, with single Range requests. */
export function routeSampleMedia(app: FastifyInstance, baseUrl: () => string): void {
  app.get(SANDBOX_MEDIA_PATH, async (_request, reply) =>
    reply.send(
      SANDBOX_MEDIA.map((m) => ({
        url: `${baseUrl()}${SANDBOX_MEDIA_PATH}/${m.name}`,
        content_type: m.contentType,
        ...(m.seconds === undefined ? {} : { seconds: m.seconds }),
        what: m.what,
      })),
    ),
  );
  app.get<{ Params: { name: string } }>(`${SANDBOX_MEDIA_PATH}/:name`, sendSample);
}

async function sendSample(
  request: FastifyRequest<{ Params: { name: string } }>,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const sample = byName.get(request.params.name);
  if (!sample) {
    const known = SANDBOX_MEDIA.map((m) => m.name).join(', ');
    return reply.code(404).type('text/plain').send(`no such sample; the samples are: ${known}\n`);
  }
  return sendBytes(request, reply, await bytesOf(sample.name), sample.contentType);
}

/** Sends `bytes`, or the one range the request asks for (206), as a media host does. */
export function sendBytes(
  request: FastifyRequest,
  reply: FastifyReply,
  bytes: Buffer,
  contentType: string,
): FastifyReply {
  reply.header('accept-ranges', 'bytes').type(contentType);
  const range = /^bytes=(\d*)-(\d*)$/.exec(String(request.headers.range ?? ''));
  if (!range || (range[1] === '' && range[2] === '')) return reply.send(bytes);
  const size = bytes.length;
  // `bytes=-N` asks for the last N bytes; `bytes=N-` for everything from N.
  const start = range[1] === '' ? Math.max(0, size - Number(range[2])) : Number(range[1]);
  const end = range[1] === '' || range[2] === '' ? size - 1 : Math.min(Number(range[2]), size - 1);
  if (start >= size || end < start) {
    return reply.code(416).header('content-range', `bytes */${size}`).send();
  }
  return reply
    .code(206)
    .header('content-range', `bytes ${start}-${end}/${size}`)
    .send(bytes.subarray(start, end + 1));
}
