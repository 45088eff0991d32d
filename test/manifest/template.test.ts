import { describe, expect, it } from 'vitest';
import { loaded, problemsOf } from './helpers.js';

// Line 16 is `      v: <value>`; column 10 is the first character of the value.
const withValue = (value: string) => `version: 1
name: demo
vars:
  brand: Acme
  count: 3
  ratio: 1.5
  on: true
  tags: [a, b]
  obj: { k: v }
  nested: "{{brand}}"
  code: "\${process.exit(1)}"
tasks:
  - id: t
    model: flat-image
    input:
      v: ${value}
`;

describe('template rendering', () => {
  it.each<[string, unknown]>([
    ['"{{brand}}"', 'Acme'],
    ['"{{ brand }}"', 'Acme'],
    ['"{{count}}"', 3],
    ['"{{ratio}}"', 1.5],
    ['"{{on}}"', true],
    ['"{{tags}}"', ['a', 'b']],
    ['"{{obj}}"', { k: 'v' }],
    ['"{{obj.k}}"', 'v'],
    ['"{{tags.1}}"', 'b'],
    ['"n={{count}}, on={{on}}"', 'n=3, on=true'],
    ['"{{name}}/{{run}}/{{date}}/{{datetime}}/{{index}}"', 'demo/demo/2024-03-10/2024-03-10T013045/1'],
    // Single pass: a value that looks like a template is inserted as it is.
    ['"{{nested}}"', '{{brand}}'],
    ['"x {{nested}}"', 'x {{brand}}'],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the point is that it stays literal text
    ['"{{code}}"', '${process.exit(1)}'],
    // Look-alikes of other template languages are plain text.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the point is that it stays literal text
    ['"${brand}"', '${brand}'],
    ['"<%= brand %>"', '<%= brand %>'],
    ['"{brand}"', '{brand}'],
    ['"}} {brand} {{brand}}"', '}} {brand} Acme'],
    ['12', 12],
  ])('%s renders to %j', async (value, expected) => {
    const { tasks } = await loaded(withValue(value));
    expect(tasks[0]?.input.v).toEqual(expected);
  });

  it.each<[string, string]>([
    [
      '"a {{brnd}}"',
      'm.yaml:16:13  task t  input.v: unknown name "brnd"; known names are: brand, code, count, date, datetime, index, name, nested, obj, on, ratio, run, tags',
    ],
    [
      '"{{brand}} {{row.text}}"',
      'm.yaml:16:21  task t  input.v: unknown name "row" (`row` exists only in tasks with foreach); known names are: brand, code, count, date, datetime, index, name, nested, obj, on, ratio, run, tags',
    ],
    [
      "'{{constructor}}'",
      'm.yaml:16:11  task t  input.v: unknown name "constructor"; known names are: brand, code, count, date, datetime, index, name, nested, obj, on, ratio, run, tags',
    ],
    ['"{{obj.toString}}"', 'm.yaml:16:11  task t  input.v: "obj" has no field "toString"; its fields are: k'],
    [
      '"{{obj.__proto__}}"',
      'm.yaml:16:11  task t  input.v: "obj" has no field "__proto__"; its fields are: k',
    ],
    [
      '"{{tags.length}}"',
      'm.yaml:16:11  task t  input.v: "tags" is a list of 2; "length" is not one of its item numbers (0 to 1)',
    ],
    [
      '"{{tags.2}}"',
      'm.yaml:16:11  task t  input.v: "tags" is a list of 2; "2" is not one of its item numbers (0 to 1)',
    ],
    ['"{{brand.length}}"', 'm.yaml:16:11  task t  input.v: "brand" is "Acme", which has no field "length"'],
    [
      '"see {{tags}}"',
      'm.yaml:16:15  task t  input.v: "tags" is a list; only text, numbers and true/false can be part of a longer text (a list or object can only be a whole value)',
    ],
    [
      '"{{ }}"',
      'm.yaml:16:11  tasks.0.input.v: empty placeholder "{{ }}"; put a name inside, like {{brand}}',
    ],
    [
      '"{{brand + 1}}"',
      'm.yaml:16:11  tasks.0.input.v: "{{brand + 1}}" is not a name; templates only look names up (letters, digits, _ and -, joined by dots) and never compute',
    ],
    [
      '"{{ process.exit() }}"',
      'm.yaml:16:11  tasks.0.input.v: "{{ process.exit() }}" is not a name; templates only look names up (letters, digits, _ and -, joined by dots) and never compute',
    ],
    ['"x {{brand"', 'm.yaml:16:13  tasks.0.input.v: unclosed "{{" in "{{brand"; close it with "}}"'],
  ])('%s is refused', async (value, expected) => {
    expect(await problemsOf(withValue(value))).toEqual([expected]);
  });

  it('locates a placeholder in a multi-line scalar at the scalar', async () => {
    const problems = await problemsOf(withValue('|\n        first line\n        second {{brnd}}'));
    expect(problems).toEqual([
      'm.yaml:16:10  task t  input.v: unknown name "brnd"; known names are: brand, code, count, date, datetime, index, name, nested, obj, on, ratio, run, tags',
    ]);
  });

  it('locates each of two identical placeholders', async () => {
    expect(await problemsOf(withValue('"{{ }} and {{ }}"'))).toEqual([
      'm.yaml:16:11  tasks.0.input.v: empty placeholder "{{ }}"; put a name inside, like {{brand}}',
      'm.yaml:16:21  tasks.0.input.v: empty placeholder "{{ }}"; put a name inside, like {{brand}}',
    ]);
  });

  it('locates a placeholder after others on the same line', async () => {
    expect(await problemsOf(withValue('"{{obj.k}} {{obj.k}}{{x}}"'))).toEqual([
      'm.yaml:16:30  task t  input.v: unknown name "x"; known names are: brand, code, count, date, datetime, index, name, nested, obj, on, ratio, run, tags',
    ]);
  });

  it('never evaluates a template as code', async () => {
    const before = Object.keys(globalThis).length;
    const problems = await problemsOf(withValue('"{{ globalThis.pwned = 1 }}"'));
    expect(problems).toHaveLength(1);
    expect((globalThis as Record<string, unknown>).pwned).toBeUndefined();
    expect(Object.keys(globalThis).length).toBe(before);
  });

  it('renders templates deep inside input, in id, model and media_seconds', async () => {
    const { tasks } = await loaded(`version: 1
name: demo
vars: { secs: 12.5, voice: anna, kind: speech-v3 }
tasks:
  - id: "{{kind}}-{{voice}}"
    model: "{{kind}}"
    media_seconds: "{{secs}}"
    input:
      text: hi
      voices: ["{{voice}}", { id: "{{voice}}-2" }]
`);
    expect(tasks).toMatchObject([
      {
        id: 'speech-v3-anna',
        model: 'speech-v3',
        mediaSeconds: 12.5,
        input: { text: 'hi', voices: ['anna', { id: 'anna-2' }] },
      },
    ]);
  });
});
