// Where a state lives, as the user names it: a SQLite file (a path, relative to the working folder) or a
// PostgreSQL database (a postgres:// URL, taken as given). Light on purpose: the CLI reads it before any
// database driver is loaded.

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

/** A state given as a URL rather than a file. */
export function isPostgresUrl(state: string): boolean {
  return /^postgres(ql)?:\/\//i.test(state);
}

/** The state to open: a file path made absolute against `cwd`, or the URL as it is. */
export function stateLocation(cwd: string, state: string): string {
  return isPostgresUrl(state) ? state : resolve(cwd, state);
}

/** The URL as shown in messages and stored as the state's name: never its password. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    parsed.search = '';
    return parsed.toString();
  } catch {
    return 'postgres://(unreadable URL)';
  }
}

/** A state as a mark or a message names it: the absolute file, or the URL without its password. */
export function stateName(state: string): string {
  return isPostgresUrl(state) ? redactUrl(state) : resolve(state);
}

/** Whether reading commands find a state there: a file that exists, or any database (it says itself). */
export function stateExists(location: string): boolean {
  return isPostgresUrl(location) || existsSync(location);
}

/** The file the embedded sandbox keeps its journal beside: the state file, or for a database the default one. */
export function sandboxJournalAnchor(cwd: string, state: string): string {
  return resolve(cwd, isPostgresUrl(state) ? 'state/sandbox.db' : state);
}
