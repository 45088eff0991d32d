// Many rows in one INSERT, as PostgreSQL takes them best. The store adds tasks a hundred rows a statement
// (`INSERT … VALUES (?, …), (?, …), …`, 1,700 parameters): SQLite runs that as fast as anything, but
// PostgreSQL binds, plans and executes each parameter on its own. The same rows as one array per column,
// `INSERT … SELECT … FROM unnest($1::text[], …)`, are 17 parameters whatever the number of rows.

/** A multi-row `INSERT … VALUES` whose rows are alike: what it takes to send its rows as arrays. */
export interface BulkInsert {
  table: string;
  columns: readonly string[];
  /** Per column: which of a row's parameters it takes, or the SQL it is given (a literal). */
  row: ReadonlyArray<{ param: number } | { sql: string }>;
  /** Parameters per row. */
  perRow: number;
}

const INSERT_VALUES = /^\s*INSERT\s+INTO\s+(\w+)\s*\(([^()]*)\)\s*VALUES\s*/i;

/** The parenthesised rows after VALUES, or undefined when anything else follows them. */
function rowsOf(code: string, from: number): string[] | undefined {
  const rows: string[] = [];
  let i = from;
  while (i < code.length) {
    if (code[i] !== '(') return undefined;
    let depth = 0;
    let end = -1;
    for (let j = i; j < code.length; j++) {
      if (code[j] === '(') depth += 1;
      else if (code[j] === ')' && --depth === 0) {
        end = j;
        break;
      }
    }
    if (end < 0) return undefined;
    rows.push(code.slice(i + 1, end));
    const next = /^\s*,\s*/.exec(code.slice(end + 1));
    i = end + 1 + (next?.[0].length ?? 0);
    if (next === null) return /^\s*$/.test(code.slice(end + 1)) ? rows : undefined;
  }
  return rows;
}

/**
 * The statement as a bulk insert, when it is one: SQLite's text with its literals masked (`mask` in
 * sql.ts, `unmask` to put them back), rows alike, each parameter a whole column value.
 */
export function bulkInsertOf(masked: string, unmask: (code: string) => string): BulkInsert | undefined {
  const head = INSERT_VALUES.exec(masked);
  if (head === null) return undefined;
  const rows = rowsOf(masked, head[0].length);
  if (rows === undefined || rows.length < 2) return undefined;
  // Literals are masked one by one: rows are alike when they read alike with them put back.
  const first = unmask(rows[0] ?? '');
  if (rows.some((r) => unmask(r) !== first)) return undefined;
  const columns = (head[2] ?? '').split(',').map((c) => c.trim());
  const items = (rows[0] ?? '').split(',').map((c) => c.trim());
  if (items.length !== columns.length) return undefined;
  let perRow = 0;
  const row: Array<{ param: number } | { sql: string }> = [];
  for (const item of items) {
    if (item === '?') row.push({ param: perRow++ });
    else if (/[?:@$(]/.test(item)) return undefined;
    else row.push({ sql: unmask(item) });
  }
  return { table: head[1] ?? '', columns, row, perRow };
}

/** The INSERT … SELECT FROM unnest(…) of a bulk insert, given its table's column types. */
export function bulkInsertText(bulk: BulkInsert, types: ReadonlyMap<string, string>): string {
  const arrays: string[] = [];
  const select = bulk.row.map((item, i) => {
    if ('sql' in item) return item.sql;
    const column = bulk.columns[i] ?? '';
    const type = types.get(column);
    if (type === undefined) throw new Error(`bulk insert: no column ${column} in ${bulk.table}`);
    arrays.push(`$${item.param + 1}::${type}[]`);
    return `u.c${item.param}`;
  });
  const names = bulk.row.flatMap((item) => ('param' in item ? [`c${item.param}`] : []));
  return `INSERT INTO ${bulk.table} (${bulk.columns.join(', ')}) SELECT ${select.join(', ')} FROM unnest(${arrays.join(', ')}) AS u(${names.join(', ')})`;
}

type Bindable = string | number | bigint | boolean | null | undefined;

function element(value: Bindable): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return `"${value.replace(/["\\]/g, '\\$&')}"`;
}

/** The rows' values (row after row, as the VALUES form binds them) as one array literal per column. */
export function bulkInsertParams(bulk: BulkInsert, values: readonly Bindable[]): string[] {
  const columns: string[][] = Array.from({ length: bulk.perRow }, () => []);
  for (let i = 0; i < values.length; i++) columns[i % bulk.perRow]?.push(element(values[i]));
  return columns.map((c) => `{${c.join(',')}}`);
}

/** What CopyRows needs of the connection (PgDb's COPY methods). */
export interface CopyTarget {
  beginCopy(table: string, columns: readonly string[]): void;
  copyData(chunk: Buffer): void;
  endCopy(): number;
  abortCopy(reason: string): void;
}

/** Whether `db` can take rows by COPY: a PostgreSQL state's does, SQLite's has no such methods. */
export function copyTargetOf(db: object): CopyTarget | undefined {
  const c = db as Partial<CopyTarget>;
  return typeof c.beginCopy === 'function' && typeof c.copyData === 'function'
    ? (db as CopyTarget)
    : undefined;
}

/** Rows per COPY statement: a second or so of the server's work, far inside any statement_timeout. */
export const COPY_ROWS = 10_000;

/** Bytes of rows gathered before they are sent: few system calls, and the server never waits long. */
const SEND_AT = 256 * 1024;

/** A value in COPY's text format: `\N` for NULL, and a backslash before what would end a field or row. */
function copyField(value: Bindable): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value !== 'string') return String(value);
  return /[\\\n\r\t]/.test(value) ? value.replace(/[\\\n\r\t]/g, escapeCopy) : value;
}

function escapeCopy(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return '\\\\';
}

/**
 * Many new rows of one table through `COPY … FROM STDIN`: each row is sent (in pieces of SEND_AT
 * bytes) as it is added, so the server stores rows while the caller makes the next ones; the
 * INSERT this replaces waited for the server once every hundred rows. The copy opens at the first row;
 * `end` waits until the server has stored them all.
 */
export class CopyRows {
  readonly #target: CopyTarget;
  readonly #table: string;
  readonly #columns: readonly string[];
  #open = false;
  /** Rows not sent yet, written as they come (one long string would be copied again to be encoded). */
  readonly #pending = Buffer.allocUnsafe(SEND_AT);
  #used = 0;

  constructor(target: CopyTarget, table: string, columns: readonly string[]) {
    this.#target = target;
    this.#table = table;
    this.#columns = columns;
  }

  /** One row: its values in the columns' order. */
  add(values: readonly Bindable[]): void {
    if (values.length !== this.#columns.length) {
      throw new RangeError(
        `COPY ${this.#table}: ${values.length} values for ${this.#columns.length} columns`,
      );
    }
    if (!this.#open) {
      this.#target.beginCopy(this.#table, this.#columns);
      this.#open = true;
    }
    let line = copyField(values[0]);
    for (let i = 1; i < values.length; i++) line += `\t${copyField(values[i])}`;
    line += '\n';
    // UTF-8 takes at most three bytes for each UTF-16 unit.
    if (this.#used + line.length * 3 > SEND_AT) this.#send();
    if (line.length * 3 > SEND_AT) this.#target.copyData(Buffer.from(line, 'utf8'));
    else this.#used += this.#pending.write(line, this.#used, 'utf8');
  }

  /** Sends what is left and waits for the server to store every row; returns how many it stored. */
  end(): number {
    if (!this.#open) return 0;
    this.#send();
    this.#open = false;
    return this.#target.endCopy();
  }

  /** Stores none of the rows (what made them failed). */
  abort(reason: string): void {
    if (!this.#open) return;
    this.#open = false;
    this.#used = 0;
    this.#target.abortCopy(reason);
  }

  /** libpq copies what it is given: the buffer is written again from its start. */
  #send(): void {
    if (this.#used === 0) return;
    const used = this.#used;
    this.#used = 0;
    this.#target.copyData(this.#pending.subarray(0, used));
  }
}
