import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { mergePrices } from './catalog/index.js';
import type { PriceTable } from './catalog/types.js';
import { EXIT, ExitError } from './cli/errors.js';
import { registerSecret } from './util/secrets.js';

/** Settings that belong to the account rather than to a manifest. */
export interface Config {
  baseUrl?: string;
  /** Monthly quota in tokens, when the user knows it. */
  quota?: number;
  prices: PriceTable;
  /** Where the config came from, for messages. */
  source?: string;
  apiKey?: string;
}

const configFileSchema = z.strictObject({
  base_url: z.url({ protocol: /^https?$/ }).optional(),
  quota: z.number().positive().optional(),
  prices: z.record(z.string(), z.unknown()).optional(),
});

export const DEFAULT_CONFIG_FILE = 'mediabatch.config.yaml';

/**
 * Reads `mediabatch.config.yaml` (or `--config`), then the environment, which wins.
 * The API key is read from the environment only: flags show in `ps` and files end up in repos.
 */
export async function loadConfig(opts: {
  cwd: string;
  configFile?: string;
  env: NodeJS.ProcessEnv;
}): Promise<Config> {
  const file = resolve(opts.cwd, opts.configFile ?? DEFAULT_CONFIG_FILE);
  let raw: unknown = {};
  try {
    raw = parse(await readFile(file, 'utf8')) ?? {};
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    if (!missing || opts.configFile) {
      throw new ExitError(EXIT.invalid, `${file}: cannot read the config file (${(error as Error).message})`);
    }
  }
  const parsed = configFileSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${file}  ${i.path.join('.') || '(top)'}: ${i.message}`);
    throw new ExitError(EXIT.invalid, `${file}: invalid config; fix the fields above`, lines);
  }
  const { prices, issues } = mergePrices(parsed.data.prices ?? {});
  if (issues.length > 0) {
    const lines = issues.map((i) => `${file}  prices.${i.path}: ${i.message}`);
    throw new ExitError(EXIT.invalid, `${file}: invalid price overrides; fix the fields above`, lines);
  }
  const envQuota = opts.env['MEDIABATCH_QUOTA'];
  let quota = parsed.data.quota;
  if (envQuota !== undefined && envQuota !== '') {
    const n = Number(envQuota);
    if (!Number.isFinite(n) || n <= 0) {
      throw new ExitError(
        EXIT.invalid,
        `MEDIABATCH_QUOTA must be a positive number of tokens, got ${JSON.stringify(envQuota)}`,
      );
    }
    quota = n;
  }
  const apiKey = opts.env['MEDIABATCH_API_KEY'] || undefined;
  registerSecret(apiKey);
  const config: Config = { prices, source: file };
  const baseUrl = opts.env['MEDIABATCH_BASE_URL'] || parsed.data.base_url;
  if (baseUrl) config.baseUrl = baseUrl;
  if (quota !== undefined) config.quota = quota;
  if (apiKey) config.apiKey = apiKey;
  return config;
}
