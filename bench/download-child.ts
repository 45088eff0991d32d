// One download through the product's downloadResult, in a process of its own so its peak RSS is its
// own. Usage: tsx bench/download-child.ts <url> <dest>; prints {"ok":…,"bytes":…,"ms":…} on stdout.
import { downloadResult } from '../src/api/download.js';

const [url, dest] = process.argv.slice(2);
if (!url || !dest) {
  console.error('download-child: usage: download-child.ts <url> <dest>');
  process.exit(1);
}
const start = performance.now();
const result = await downloadResult(url, dest, { maxBytes: 4 * 1024 ** 3, timeoutMs: 60_000 });
const ms = performance.now() - start;
console.log(JSON.stringify({ ok: result.ok, bytes: result.ok ? result.bytes : 0, ms }));
process.exitCode = result.ok ? 0 : 1;
