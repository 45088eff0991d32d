// A command line split into words by a real POSIX shell (/bin/sh), as a person's terminal would: the
// tests that type the commands mediabatch prints use it, so the quoting is checked by the shell itself.
import { execFileSync } from 'node:child_process';

/** The words `sh` makes of `line` (quotes, escapes), without running anything but `printf`. */
export function shellWords(line: string): string[] {
  // `eval "set -- …"` makes the positional parameters from the line as the shell parses it; a command
  // substitution or a variable in it would expand, which the quoting under test must prevent.
  const out = execFileSync('/bin/sh', ['-c', 'eval "set -- $1"; printf "%s\\0" "$@"', 'sh', line], {
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
  });
  return out.split('\0').slice(0, -1);
}
