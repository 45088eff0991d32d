// The manifest loader: YAML with positions → settings and expanded, located task specs.

export { type LoadOptions, loadManifest } from './load.js';
export { formatProblem } from './problems.js';
export { manifestJsonSchema, manifestSchema } from './schema.js';
export * from './types.js';
