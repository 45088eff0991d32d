import {
  formatProblem,
  type LoadedManifest,
  loadManifest,
  type ManifestResult,
} from '../../src/manifest/index.js';

export const NOW = new Date('2024-03-10T01:30:45Z');

/** Loads `text` as `m.yaml` from an in-memory folder; `files` are its neighbours (`data/rows.csv`). */
export function loadText(
  text: string,
  files: Record<string, string> = {},
  options: { maxTasks?: number; now?: Date } = {},
): Promise<ManifestResult> {
  const all: Record<string, string> = { 'm.yaml': text, ...files };
  return loadManifest('m.yaml', {
    now: options.now ?? NOW,
    cwd: '/work',
    maxTasks: options.maxTasks,
    readFile: async (path) => {
      const name = path.replace(/^\/work\//, '');
      const content = all[name];
      if (content === undefined) throw Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
      return Buffer.from(content);
    },
  });
}

export async function loaded(text: string, files: Record<string, string> = {}): Promise<LoadedManifest> {
  const result = await loadText(text, files);
  if (!result.ok)
    throw new Error(`expected a valid manifest:\n${result.problems.map(formatProblem).join('\n')}`);
  return result.manifest;
}

export async function problemsOf(
  text: string,
  files: Record<string, string> = {},
  options: { maxTasks?: number } = {},
): Promise<string[]> {
  const result = await loadText(text, files, options);
  if (result.ok) throw new Error('expected problems, the manifest loaded');
  return result.problems.map(formatProblem);
}

/** A manifest around some tasks: `head` lines go before `tasks:`. */
export function manifest(tasks: string, head = ''): string {
  return `version: 1\nname: demo\n${head}tasks:\n${tasks}`;
}
