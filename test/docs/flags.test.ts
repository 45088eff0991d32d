// Every flag the docs show exists: a flag on a `mediabatch <command>` line of any code block (shell, cron,
// systemd) is one that command (or the program) takes, and every flag in the first cell of an options
// table is one some command takes. A renamed or removed flag leaves no page wrong.
import { beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { codeBlocks, docFiles, shown, tableFirstCells } from './markdown.js';

const COMMANDS = ['validate', 'plan', 'run', 'status', 'report', 'balance', 'schedule', 'review', 'sandbox'];

/** The long flags a help text lists (`--allow-partial`, `--no-probe`). */
function helpFlags(help: string): Set<string> {
  return new Set([...help.matchAll(/^\s+(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1] ?? ''));
}

const known = new Map<string, Set<string>>();
beforeAll(async () => {
  known.set('', helpFlags((await cli(['--help'])).stdout));
  for (const command of COMMANDS) known.set(command, helpFlags((await cli([command, '--help'])).stdout));
});

interface Use {
  where: string;
  command: string;
  flag: string;
}

/** `mediabatch [global flags] <command> … --flag` on one line, from the binary or `npm start --silent --`. */
function usesOnLine(line: string, where: string): Use[] {
  const start = /(?:^|[\s/])(?:mediabatch|npm start --silent --)\s+(.*)$/.exec(line.replace(/\s#.*$/, ''));
  if (!start?.[1]) return [];
  const words = start[1].split(/\s+/);
  const command = words.find((word) => COMMANDS.includes(word));
  if (command === undefined) return [];
  return words
    .filter((word) => word.startsWith('--'))
    .map((word) => ({ where, command, flag: word.replace(/=.*$/, '') }));
}

const files = docFiles();
const uses = files.flatMap((file) =>
  codeBlocks(file).flatMap((block) =>
    block.text.split('\n').flatMap((line, i) => usesOnLine(line, `${shown(file)}:${block.line + i}`)),
  ),
);
const tableFlags = files.flatMap((file) =>
  tableFirstCells(file).flatMap((cell) =>
    cell.startsWith('`-')
      ? [...cell.matchAll(/`(?:-\w, )?(--[\w-]+)/g)].map((m) => ({ file, flag: m[1] ?? '' }))
      : [],
  ),
);

describe('flags in the docs', () => {
  it('are found in commands and option tables', () => {
    // A guard: were the pages not read, nothing below would be checked.
    expect(uses.length).toBeGreaterThan(20);
    expect(tableFlags.length).toBeGreaterThan(40);
  });

  it('on a command line, are flags of that command or of the program', () => {
    const wrong = uses
      .filter((u) => !known.get(u.command)?.has(u.flag) && !known.get('')?.has(u.flag))
      .map((u) => `${u.where}: mediabatch ${u.command} has no ${u.flag}`);
    expect(wrong).toEqual([]);
  });

  it('in an options table, are flags some command takes', () => {
    const all = new Set([...known.values()].flatMap((flags) => [...flags]));
    const wrong = tableFlags.filter((t) => !all.has(t.flag)).map((t) => `${shown(t.file)}: ${t.flag}`);
    expect(wrong).toEqual([]);
  });
});
