// Limits that keep a hostile or mistaken manifest from exhausting memory or time.

export const MAX_MANIFEST_BYTES = 5 * 1024 * 1024;
/** `foreach` data files may be larger than the manifest: 100,000 rows of CSV is a few MB. */
export const MAX_DATA_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_TASKS = 1_000_000;
/** Values produced through YAML aliases (`*name`), summed over the file; a billion-laughs file hits it at once. */
export const MAX_ALIAS_VALUES = 10_000;
export const MAX_DEPTH = 64;
