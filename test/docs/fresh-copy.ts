// A fresh copy of the repository, as a newcomer's clone would be, and a terminal to type README commands in.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Lexer, type Tokens } from 'marked';

const run = promisify(execFile);

/**
 * The files a clone would have (tracked, plus new files not ignored: what is about to be committed), copied
 * into `to`; node_modules hard-linked (a symlink is not enough: `npm install` replaces a symlinked
 * node_modules with a full install, 2.5 minutes here), or copied where hard links cannot reach. With
 * node_modules installed from the same package-lock.json (as `npm ci` leaves it), `npm install` in the copy
 * finds it up to date: it runs `prepare` (dist/ is the copy's own) and rewrites only its record of the tree,
 * node_modules/.package-lock.json, which the copy gets as a file of its own.
 */
export async function freshCopy(from: string, to: string): Promise<void> {
  const { stdout } = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: from,
    maxBuffer: 64 * 1024 * 1024,
  });
  const files = stdout.split('\0').filter((file) => file !== '' && existsSync(join(from, file)));
  for (const file of files) {
    await mkdir(dirname(join(to, file)), { recursive: true });
    await copyFile(join(from, file), join(to, file));
  }
  try {
    await run('cp', ['-al', join(from, 'node_modules'), join(to, 'node_modules')]);
    // npm rewrites its record of the tree in place even when nothing changed: the copy gets its own.
    const record = join('node_modules', '.package-lock.json');
    await rm(join(to, record), { force: true });
    if (existsSync(join(from, record))) await copyFile(join(from, record), join(to, record));
  } catch {
    await rm(join(to, 'node_modules'), { recursive: true, force: true });
    await run('cp', ['-a', join(from, 'node_modules'), join(to, 'node_modules')]);
  }
}

/** The commands of the ```sh blocks under the README's `## <section>` headings, in order, comments cut. */
export function sectionCommands(readme: string, sections: readonly string[]): string[] {
  const commands: string[] = [];
  let section = '';
  for (const token of new Lexer({ gfm: true }).lex(readme)) {
    if (token.type === 'heading' && (token as Tokens.Heading).depth === 2) section = token.text;
    if (token.type !== 'code' || !sections.includes(section) || (token as Tokens.Code).lang !== 'sh')
      continue;
    for (const line of (token as Tokens.Code).text.split('\n')) {
      const command = line.replace(/(^|\s+)#.*$/, '').trim();
      if (command !== '') commands.push(command);
    }
  }
  return commands;
}

export interface Typed {
  code: number | null;
  /** What the terminal showed, without colours and cursor moves. */
  output: string;
}

/**
 * Types one command into a pseudo-terminal (util-linux `script`), as a user would, and answers `y` should
 * it ask. Resolves when it exits; killed after `timeoutMs`. The terminal's input stays open until then, as
 * a user's does: `script` whose input has ended waits 2 s before it exits, after every command.
 */
export function typeCommand(
  command: string,
  o: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<Typed> {
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: o.cwd, env: o.env });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs);
    child.on('error', reject);
    // A command that exits without reading its answer: the answer is not needed.
    child.stdin.on('error', () => undefined);
    child.on('close', (code) => {
      clearTimeout(timer);
      child.stdin.destroy();
      // biome-ignore lint/suspicious/noControlCharactersInRegex: terminal escape sequences are what is cut
      resolve({ code, output: output.replace(/\x1b\[[0-9;?]*[A-Za-z]|\x1b[78]|\r/g, '') });
    });
    child.stdin.write('y\n');
  });
}
