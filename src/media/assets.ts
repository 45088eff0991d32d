import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let packageRoot: string | undefined;

/** The folder of the nearest package.json above `from`; the same answer from src/ (tsx) and dist/ (tsc). */
export function findPackageRoot(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`package.json: not found above ${from}; reinstall mediabatch`);
  }
}

/** Absolute path of a committed sandbox sample, e.g. `sandboxAsset('result.png')`. */
export function sandboxAsset(name: string): string {
  if (!/^[\w-]+(\.[\w-]+)*$/.test(name)) {
    throw new TypeError(`name: must be a plain file name such as result.png, got ${JSON.stringify(name)}`);
  }
  packageRoot ??= findPackageRoot();
  return join(packageRoot, 'assets', 'sandbox', name);
}
