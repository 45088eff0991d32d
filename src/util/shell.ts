// Words quoted for a POSIX shell: the quoting of every command mediabatch prints for a person. The
// commands themselves are built from a run's invocation by src/results/invocation.ts (commandLine); the
// store, which knows no run's flags, quotes with this the one it names in a message (its state file).

/** Characters a POSIX shell reads as part of a plain word anywhere in it. */
const PLAIN = /^[A-Za-z0-9_@%+=:,./-]+$/;

/**
 * One word for a POSIX shell: as it is when every character is plain, else in single quotes (a single
 * quote inside closes the quotes, adds an escaped one and opens them again).
 */
export function shellQuote(word: string): string {
  if (PLAIN.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Words joined into one command line, each quoted for the shell. */
export function shellLine(words: readonly string[]): string {
  return words.map(shellQuote).join(' ');
}
