import { readFileSync } from 'node:fs';
import { PgDb } from '../src/store/pg/db.js';
import { openStore } from '../src/store/index.js';
import { startPostgres } from '../test/helpers/postgres.js';
const pg = await startPostgres();
const url = pg.freshDatabase();
openStore(url).close();
const db = new PgDb(url);
const N = 4000;
const pid = Number(db.prepare('SELECT pg_backend_pid()').pluck().get());
const cpu = () => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8'); const x = f.slice(f.lastIndexOf(')') + 2).split(' '); return (Number(x[11]) + Number(x[12])) * 10; };
db.exec(`INSERT INTO runs (id, manifest_path, manifest_name, state, settings, created_at) VALUES ('r', 'm', 'm', 'running', '{}', 'x')`);
db.exec(`INSERT INTO tasks (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max, est_basis, est_assumed, updated_at, state, claimed_by, img_uuid)
  SELECT 'r', 't' || g, g, 'm', '/e', repeat('x', 300), 'h', 1, 1, 1, 'b', 0, 'x', 'submitted', 'w1', 'u' || g FROM generate_series(1, ${N}) g`);
db.exec('VACUUM ANALYZE tasks');
db.exec(`CREATE FUNCTION zz(st text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE i int;
BEGIN
  FOR i IN 1..${N} LOOP
    UPDATE tasks SET state = st, updated_at = 'y' WHERE run_id = 'r' AND task_id = 't' || i;
  END LOOP;
END $$`);
let st = 'running';
const variant = (label: string, ddl: string) => {
  db.exec('BEGIN');
  if (ddl) db.exec(ddl);
  const us: number[] = [];
  for (let k = 0; k < 4; k++) {
    st = st === 'running' ? 'submitted' : 'running';
    db.exec('SAVEPOINT a');
    const c0 = cpu();
    db.prepare('SELECT zz(?)').run(st);
    us.push(((cpu() - c0) * 1000) / N);
    db.exec('ROLLBACK TO a');
  }
  db.exec('ROLLBACK');
  console.log(label, us.map((u) => u.toFixed(1)).join(' '));
};
for (const [label, ddl] of JSON.parse(process.argv[2] ?? '[]') as [string, string][]) variant(label, ddl);
db.close(); pg.stop();
