import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliArgv } from '../helpers/child.js';

describe('output into a closed pipe', () => {
  it('ends quietly when the reader goes away (`mediabatch plan big.yaml | head -1`)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mb-pipe-'));
    try {
      await writeFile(
        join(dir, 'big.yaml'),
        'version: 1\nname: big\ntasks:\n  - id: "img-{{index}}"\n    model: flat-image\n    repeat: 5000\n    input: { prompt: "p {{index}}" }\n',
      );
      const [command, ...args] = cliArgv(['plan', 'big.yaml', '--no-probe']);
      const child = spawn(command ?? process.execPath, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.stdout.once('data', () => child.stdout.destroy());
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(stderr).not.toContain('EPIPE');
      expect(code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
