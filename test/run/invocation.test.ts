// The one builder of the commands we print: each carries what reaches the same run, and the shell reads
// every word back exactly as it was meant (checked by /bin/sh itself, not by a parser of our own).
import { describe, expect, it } from 'vitest';
import {
  type CommandStep,
  commandLine,
  invocationOf,
  type RunInvocation,
  shellQuote,
  stateWithKnownPassword,
} from '../../src/results/invocation.js';
import { shellWords } from '../helpers/shell-words.js';

const base: RunInvocation = { runId: 'shop', manifest: 'shop.yaml', state: 'state/mediabatch.db' };

describe('commandLine', () => {
  const cases: [string, RunInvocation, CommandStep, string][] = [
    ['a default run continues by its id', base, { command: 'run' }, 'mediabatch run shop.yaml --run-id shop'],
    [
      'a sandbox run keeps --sandbox and its own state file stays implicit',
      { ...base, sandbox: true, state: 'state/sandbox.db' },
      { command: 'run' },
      'mediabatch run shop.yaml --run-id shop --sandbox',
    ],
    [
      'a sandbox run in another state file names it',
      { ...base, sandbox: true, state: 'state/mediabatch.db' },
      { command: 'status' },
      'mediabatch status shop --sandbox --state state/mediabatch.db',
    ],
    [
      'a shard carries its shard, its base run id and its state file',
      { ...base, runId: 'shop.shard-2-of-3', state: 'shard-2.db' },
      { command: 'run' },
      'mediabatch run shop.yaml --shard 2/3 --run-id shop --state shard-2.db',
    ],
    [
      'config, base URL, budget and outside data are kept for run',
      {
        ...base,
        config: 'acct.yaml',
        baseUrl: 'https://api.example.com/v1',
        budget: 12.5,
        allowOutsideData: true,
      },
      { command: 'run', retryInDoubt: true },
      'mediabatch run shop.yaml --run-id shop --config acct.yaml --base-url https://api.example.com/v1 --budget 12.5 --allow-outside-data --retry-in-doubt',
    ],
    [
      "the embedded sandbox's address is never printed",
      { ...base, sandbox: true, state: 'state/sandbox.db', baseUrl: 'http://127.0.0.1:4000' },
      { command: 'run' },
      'mediabatch run shop.yaml --run-id shop --sandbox',
    ],
    [
      'review names its ids, globs quoted',
      { ...base, sandbox: true, state: 'state/sandbox.db', config: 'acct.yaml' },
      { command: 'review', approve: ['still-1', 'still-2'], reroll: ['clip-*'] },
      "mediabatch review shop --sandbox --approve still-1,still-2 --reroll 'clip-*'",
    ],
    [
      'report and view take the config, status does not',
      { ...base, config: 'acct.yaml' },
      { command: 'report' },
      'mediabatch report shop --config acct.yaml',
    ],
    [
      'a merge names its inputs',
      base,
      { command: 'merge', inputs: ['shard-1/report.json', 'shard 2/report.json'], out: 'merged' },
      "mediabatch report --merge shard-1/report.json 'shard 2/report.json' --out merged",
    ],
    [
      'paths with spaces, quotes and a leading dash',
      { ...base, manifest: "-my shop's.yaml", state: '/tmp/a b/s.db' },
      { command: 'run' },
      "mediabatch run './-my shop'\\''s.yaml' --run-id shop --state '/tmp/a b/s.db'",
    ],
  ];
  it.each(cases)('%s', (_what, inv, step, expected) => {
    expect(commandLine(inv, step)).toBe(expected);
  });
});

describe('shellQuote', () => {
  const words = [
    'plain-word_1.yaml',
    'two words',
    "it's",
    "''",
    '',
    '$HOME',
    '`id`',
    '$(touch /tmp/never)',
    'a\\b',
    'tab\there',
    'new\nline',
    '*.yaml',
    '~/x',
    '#not-a-comment',
    'ünïcode ✓',
    '!bang',
    'a;b|c&d',
    '"double"',
  ];
  it.each(words)('the shell reads %j back as one word, unchanged', (word) => {
    expect(shellWords(`x ${shellQuote(word)} y`)).toEqual(['x', word, 'y']);
  });

  it('leaves plain words bare, so the commands stay readable', () => {
    expect(shellQuote('state/sandbox.db')).toBe('state/sandbox.db');
    expect(shellQuote('--shard')).toBe('--shard');
    expect(shellQuote('2/3')).toBe('2/3');
    expect(shellQuote('a,b')).toBe('a,b');
  });
});

describe('a PostgreSQL state in a printed command', () => {
  const run = { id: 'shop', manifestPath: '/w/shop.yaml', settings: {}, api: null };
  it('names the database without its password, in the user part or as a parameter, the rest as given', () => {
    for (const [given, printed] of [
      ['postgres://mb:pw-SENTINEL@db.local:5433/mb', 'postgres://mb@db.local:5433/mb'],
      [
        'postgresql://db.local/mb?password=pw-SENTINEL&options=-c%20statement_timeout%3D5000',
        'postgresql://db.local/mb?options=-c%20statement_timeout%3D5000',
      ],
    ] as const) {
      const inv = invocationOf(run, { cwd: '/w', state: given });
      const line = commandLine(inv, { command: 'status' });
      expect(line).toBe(`mediabatch status shop --state ${shellQuote(printed)}`);
      expect(line).not.toContain('SENTINEL');
    }
  });

  it('is given its password from MEDIABATCH_STATE_URL when typed where that names the same database', () => {
    const env = 'postgresql://db.local/mb?password=pw-SENTINEL&options=-c%20statement_timeout%3D5000';
    const printed = shellWords(
      commandLine(invocationOf(run, { cwd: '/w', state: env }), { command: 'status' }),
    );
    const typed = printed[printed.indexOf('--state') + 1] as string;
    expect(stateWithKnownPassword(typed, env)).toBe(env);
    // Another database, other options, a password of its own, or none in the environment: as given.
    for (const [given, fromEnv] of [
      ['postgresql://db.local/other?options=-c%20statement_timeout%3D5000', env],
      ['postgresql://db.local/mb', env],
      ['postgresql://mb:own@db.local/mb?options=-c%20statement_timeout%3D5000', env],
      [typed, typed],
      [typed, undefined],
      ['state/mediabatch.db', env],
    ] as const) {
      expect(stateWithKnownPassword(given, fromEnv)).toBe(given);
    }
  });
});
