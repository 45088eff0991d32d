import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pino, { type Logger } from 'pino';
import { scrub } from './secrets.js';

export type { Logger };

export interface LogOptions {
  level?: string;
  /** JSON lines are appended here; without it logs are silent unless `toStderr`. */
  file?: string;
  toStderr?: boolean;
}

const REDACT = [
  'apiKey',
  'api_key',
  'key',
  'authorization',
  'Authorization',
  'headers.authorization',
  'headers.Authorization',
  '*.apiKey',
  '*.authorization',
  'req.headers.authorization',
];

export function createLogger(opts: LogOptions = {}): Logger {
  const level = opts.level ?? 'info';
  const streams: pino.StreamEntry[] = [];
  if (opts.file) {
    mkdirSync(dirname(opts.file), { recursive: true });
    streams.push({ level: level as pino.Level, stream: createWriteStream(opts.file, { flags: 'a' }) });
  }
  if (opts.toStderr) streams.push({ level: level as pino.Level, stream: process.stderr });
  if (streams.length === 0) return pino({ level: 'silent' });
  return pino(
    {
      level,
      redact: { paths: REDACT, censor: '[redacted]' },
      hooks: {
        // Belt and braces: a key pasted into a message or an error string is scrubbed too.
        streamWrite: (line) => scrub(line),
      },
    },
    pino.multistream(streams),
  );
}
