// One download through the product's downloadResult, in a process of its own so its peak RSS is its
// own. Usage: tsx bench/download-child.ts <url> <dest>; prints {"ok":…,"bytes":…,"ms":…,"cpuMs":…} on
// stdout: the call's own wall clock and the CPU of the whole process during it (its writing thread too).
import { downloadResult } from '../src/api/download.js';

const [url, dest] = process.argv.slice(2);
if (!url || !dest) {
  console.error('download-child: usage: download-child.ts <url> <dest>');
  process.exit(1);
}
const cpu = process.cpuUsage();
const start = performance.now();
const result = await downloadResult(url, dest, { maxBytes: 4 * 1024 ** 3, timeoutMs: 60_000 });
const ms = performance.now() - start;
const used = process.cpuUsage(cpu);
const cpuMs = (used.user + used.system) / 1000;
console.log(JSON.stringify({ ok: result.ok, bytes: result.ok ? result.bytes : 0, ms, cpuMs }));
if (!result.ok) console.error(result.message);
process.exitCode = result.ok ? 0 : 1;
