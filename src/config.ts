import { resolve } from 'node:path';
import { z } from 'zod';
import { mergePrices } from './catalog/index.js';
import type { PriceTable } from './catalog/types.js';
import { ConfigError } from './config-error.js';
import { FileRefused, readRegularFile } from './manifest/files.js';
import { formatProblem } from './manifest/problems.js';
import { schemaProblems } from './manifest/schema-problems.js';
import { joinPath, type SourceIndex } from './manifest/source-index.js';
import type { ManifestProblem } from './manifest/types.js';
import { isPlainObject } from './manifest/values.js';
import { parseYaml } from './manifest/yaml-tree.js';
import { resolveStorage, type StorageConfig, storageFileSchema } from './storage/config.js';
import { registerSecret } from './util/secrets.js';

export { ConfigError };

/** Settings that belong to the account rather than to a manifest. */
export interface Config {
  baseUrl?: string;
  /** Monthly quota in tokens, when the user knows it. */
  quota?: number;
  prices: PriceTable;
  /** Where the config came from, for messages. */
  source?: string;
  apiKey?: string;
  /** Bucket for local inputs (and results, if asked); absent when not configured. */
  storage?: StorageConfig;
}

const configFileSchema = z.strictObject({
  base_url: z
    .url({ protocol: /^https?$/, error: 'must be an http or https URL such as https://api.example.com' })
    .optional(),
  quota: z.number().positive().optional(),
  prices: z.record(z.string(), z.unknown()).optional(),
  storage: storageFileSchema.optional(),
});

export const DEFAULT_CONFIG_FILE = 'mediabatch.config.yaml';
const CONFIG_KEYS = Object.keys(configFileSchema.shape);
/** A config file is a few lines; anything near this is not one. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/** The file's text, or undefined when the default file is absent (the config is optional). */
async function readConfigText(file: string, shown: string, required: boolean): Promise<string | undefined> {
  try {
    return (await readRegularFile(file, MAX_CONFIG_BYTES)).toString('utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !required) return undefined;
    const why =
      error instanceof FileRefused
        ? error.reason.kind === 'not-regular'
          ? `it is ${error.reason.what}, not a regular file`
          : `it is more than ${MAX_CONFIG_BYTES / 1024 / 1024} MB`
        : code === 'ENOENT'
          ? 'no such file'
          : (code ?? 'unreadable');
    throw new ConfigError(`${shown}: cannot read the config file (${why}); check --config`);
  }
}

/** Located problems in the config, in the manifest's style: `file:line:col  key: message`. */
function configProblems(issues: readonly z.core.$ZodIssue[], index: SourceIndex): ManifestProblem[] {
  const problems: ManifestProblem[] = [];
  const others: z.core.$ZodIssue[] = [];
  for (const issue of issues) {
    if (issue.code !== 'unrecognized_keys') {
      others.push(issue);
      continue;
    }
    const parent = issue.path.map(String).join('.');
    for (const key of issue.keys) {
      const path = joinPath(parent, key);
      const known = parent === 'storage' ? Object.keys(storageFileSchema.shape) : CONFIG_KEYS;
      const message = `unknown key; known keys are: ${known.join(', ')}`;
      problems.push({ pos: index.keyAt(path), path, message });
    }
  }
  return [...problems, ...schemaProblems(others, index)];
}

function invalidConfig(shown: string, problems: readonly ManifestProblem[]): ConfigError {
  const sorted = [...problems].sort((a, b) => a.pos.line - b.pos.line || a.pos.col - b.pos.col);
  return new ConfigError(`${shown}: invalid config; fix the fields above`, sorted.map(formatProblem));
}

/**
 * Reads `mediabatch.config.yaml` (or `--config`), then the environment, which wins.
 * The API key is read from the environment only: flags show in `ps` and files end up in repos.
 */
export async function loadConfig(opts: {
  cwd: string;
  configFile?: string;
  env: NodeJS.ProcessEnv;
}): Promise<Config> {
  const shown = opts.configFile ?? DEFAULT_CONFIG_FILE;
  const file = resolve(opts.cwd, shown);
  const text = await readConfigText(file, shown, opts.configFile !== undefined);
  let raw: unknown = {};
  let index: SourceIndex | undefined;
  if (text !== undefined) {
    const parsed = parseYaml(text, shown);
    if (parsed.problems.length > 0) throw invalidConfig(shown, parsed.problems);
    index = parsed.index;
    raw = parsed.value ?? {};
    if (!isPlainObject(raw)) {
      const message = `must be a mapping of settings (${CONFIG_KEYS.map((k) => `${k}: ...`).join(', ')})`;
      throw invalidConfig(shown, [{ pos: { file: shown, line: 1, col: 1 }, path: '', message }]);
    }
  }
  const parsed = configFileSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) {
    throw invalidConfig(shown, index ? configProblems(parsed.error.issues, index) : []);
  }
  const { prices, issues } = mergePrices(parsed.data.prices ?? {});
  if (issues.length > 0) {
    const problems = issues.map((i) => {
      const path = i.path === '' ? 'prices' : `prices.${i.path}`;
      const pos = index?.keyAt(path) ?? { file: shown, line: 1, col: 1 };
      return { pos, path, message: i.message };
    });
    throw invalidConfig(shown, problems);
  }
  const envQuota = opts.env['MEDIABATCH_QUOTA'];
  let quota = parsed.data.quota;
  if (envQuota !== undefined && envQuota !== '') {
    const n = Number(envQuota);
    if (!Number.isFinite(n) || n <= 0) {
      throw new ConfigError(
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
  // Storage credentials are not read here: the AWS SDK's default chain finds them when the bucket is used.
  // The secret key is registered so that scrub() removes it should an SDK message ever carry it.
  registerSecret(opts.env['AWS_SECRET_ACCESS_KEY'] || undefined);
  registerSecret(opts.env['AWS_SESSION_TOKEN'] || undefined);
  try {
    const storage = resolveStorage(parsed.data.storage, opts.env);
    if (storage) config.storage = storage;
  } catch (error) {
    throw new ConfigError(`${shown}: ${(error as Error).message}`);
  }
  return config;
}
