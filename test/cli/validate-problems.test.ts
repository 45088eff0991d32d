// `validate` says every problem at once, each in words a person reads: a template that fails does not
// hide the rest of its task, the same problem in many tasks is one line for every kind of problem, and
// each kind's exact text is read back here (a table), through the CLI in-process.
import { describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

async function validate(text: string, files: Record<string, string> = {}) {
  const cwd = await folder({ 'm.yaml': `version: 1\nname: m\n${text}`, ...files });
  const r = await cli(['validate', 'm.yaml'], { cwd });
  return { code: r.code, stdout: r.stdout, lines: lines(r.stderr) };
}

describe('validate: a template error hides nothing else of its task', () => {
  it('lists a template typo and four rule errors of one task in one pass, each located', async () => {
    const r = await validate(`vars:
  product: mug
tasks:
  - id: clip
    model: studio-2-6
    input:
      prompt: "A {{prodcut}} on a table"
      duration: 6
      aspect_ratio: "4:3"
      resolution: 4k
      ratoi: "1:1"
`);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.lines).toEqual([
      'm.yaml:9:18  task clip  input.prompt: unknown name "prodcut"; known names are: date, datetime, index, name, product, run',
      'm.yaml:10:17  task clip  input.duration: must be 5 or 10, got 6',
      'm.yaml:11:21  task clip  input.aspect_ratio: must be one of 16:9, 9:16, 1:1, got "4:3"',
      'm.yaml:12:19  task clip  input.resolution: must be 720p or 1080p, got "4k"',
      'm.yaml:13:14  task clip  input.ratoi: unknown field; known fields are: prompt, image_url, image_end_url, voice_ids, duration, resolution, aspect_ratio, generate_audio, quality, voice_id, ratio',
      'mediabatch: 5 problems in m.yaml; fix them and run again',
    ]);
  });

  it('says nothing of a rule the broken field decides: another field checked against it is not blamed', async () => {
    // generate_audio needs resolution 1080p; the resolution is the broken template, so whether the
    // rule holds is not known yet, while the duration is wrong whatever the template gives.
    const r = await validate(`tasks:
  - id: clip
    model: studio-2-6
    input:
      prompt: a kitchen
      resolution: "{{res}}"
      generate_audio: true
      duration: 7
`);
    expect(r.lines).toEqual([
      'm.yaml:8:20  task clip  input.resolution: unknown name "res"; known names are: date, datetime, index, name, run',
      'm.yaml:10:17  task clip  input.duration: must be 5 or 10, got 7',
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ]);
  });

  it('checks a field that comes from defaults, and the request of a task whose id is taken', async () => {
    const r = await validate(`defaults:
  speech-v3: { speed: 1.5 }
tasks:
  - { id: hello, model: speech-v3, input: { text: "Hi {{who}}" } }
  - { id: twice, model: flat-image, input: { prompt: x } }
  - { id: twice, model: flat-image, input: { prompt: y, ratio: "5:4" } }
`);
    expect(r.lines).toEqual([
      'm.yaml:4:23  task hello  input.speed: must be a number from 0.7 to 1.2, got 1.5',
      'm.yaml:6:55  task hello  input.text: unknown name "who"; known names are: date, datetime, index, name, run',
      'm.yaml:8:5  task twice  id: duplicate task id, made by tasks.1 at m.yaml:7:5 and by tasks.2 at m.yaml:8:5; make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
      'm.yaml:8:64  task twice  input.ratio: must be one of 1:1, 2:3, 3:2, 4:3, 3:4, 16:9, 9:16, got "5:4"',
      'mediabatch: 4 problems in m.yaml; fix them and run again',
    ]);
  });

  it('checks a local file of a task whose template failed, in validate, plan and run alike', async () => {
    const cwd = await folder({
      'm.yaml': `version: 1
name: m
tasks:
  - id: swap
    model: video-face-swap
    input: { reference_video: "file:gone.mp4", reference_img: "{{face}}" }
`,
    });
    const expected = [
      'm.yaml:6:31  task swap  input.reference_video: file:gone.mp4: no such file',
      'm.yaml:6:64  task swap  input.reference_img: unknown name "face"; known names are: date, datetime, index, name, run',
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ];
    for (const argv of [
      ['validate', 'm.yaml'],
      ['plan', 'm.yaml'],
      ['run', 'm.yaml', '--sandbox', '--yes'],
    ]) {
      const r = await cli(argv, { cwd });
      expect(r.code).toBe(1);
      expect(lines(r.stderr)).toEqual(expected);
    }
  });

  it('says the same through plan and run, before anything is priced or sent', async () => {
    const cwd = await folder({
      'm.yaml': `version: 1
name: m
tasks:
  - { id: clip, model: studio-2-6, input: { prompt: "{{x}}", duration: 6 } }
`,
    });
    const expected = [
      'm.yaml:4:54  task clip  input.prompt: unknown name "x"; known names are: date, datetime, index, name, run',
      'm.yaml:4:72  task clip  input.duration: must be 5 or 10, got 6',
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ];
    for (const argv of [
      ['plan', 'm.yaml'],
      ['run', 'm.yaml', '--sandbox', '--yes'],
    ]) {
      const r = await cli(argv, { cwd });
      expect(r.code).toBe(1);
      expect(lines(r.stderr)).toEqual(expected);
    }
  });
});

describe('validate: a problem of a side field or of defaults hides nothing else', () => {
  it.each([
    ['retries', 'retries: -1', 'm.yaml:6:14  tasks.0.retries: must be >= 0, got -1'],
    ['review', 'review: "yes"', 'm.yaml:6:13  tasks.0.review: must be true or false, got "yes"'],
    ['repeat', 'repeat: 0', 'm.yaml:6:13  tasks.0.repeat: must be >= 1, got 0'],
  ])('a bad %s: the task is still checked', async (_field, written, problem) => {
    const r = await validate(`tasks:
  - id: a
    model: studio-2-6
    ${written}
    input: { prompt: x, duration: 6 }
`);
    expect(r.lines).toEqual([
      problem,
      'm.yaml:7:35  task a  input.duration: must be 5 or 10, got 6',
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ]);
  });

  it('defaults keyed by something that is no model: the tasks are still checked', async () => {
    const r = await validate(`defaults: { model: flat-image }
tasks:
  - { id: a, model: studio-2-6, input: { prompt: x, duration: 6 } }
`);
    expect(r.lines.slice(1)).toEqual([
      'm.yaml:5:63  task a  input.duration: must be 5 or 10, got 6',
      'mediabatch: 2 problems in m.yaml; fix them and run again',
    ]);
    expect(r.lines[0]).toMatch(/^m\.yaml:3:13 {2}defaults\.model: unknown model "model"/);
  });
});

describe('validate: the same problem in many tasks is one line, whatever its kind', () => {
  it('folds a template error, a rule, an unknown field, a missing file and a missing upstream alike', async () => {
    const r = await validate(`tasks:
  - id: "clip-{{index}}"
    repeat: 9
    model: studio-2-6
    input:
      prompt: "A {{prodcut}}"
      duration: 6
      ratoi: x
  - id: "swap-{{index}}"
    repeat: 4
    model: video-face-swap
    after: "still-{{index}}"
    input: { reference_video: "file:gone.mp4", reference_img: "{{after.image}}" }
`);
    expect(r.lines).toEqual([
      'm.yaml:8:18  9 tasks (clip-1, clip-2, clip-3, …)  input.prompt: unknown name "prodcut"; known names are: date, datetime, index, name, run',
      'm.yaml:9:17  9 tasks (clip-1, clip-2, clip-3, …)  input.duration: must be 5 or 10, got 6',
      'm.yaml:10:14  9 tasks (clip-1, clip-2, clip-3, …)  input.ratoi: unknown field; known fields are: prompt, image_url, image_end_url, voice_ids, duration, resolution, aspect_ratio, generate_audio, quality, voice_id, ratio',
      'm.yaml:14:12  4 tasks (swap-1, swap-2, swap-3, …)  after: names task "still-1", which this manifest does not make (after expansion); check the id template',
      'm.yaml:15:31  4 tasks (swap-1, swap-2, swap-3, …)  input.reference_video: file:gone.mp4: no such file',
      'mediabatch: 5 problems in m.yaml; fix them and run again',
    ]);
  });

  it('counts lines, and --json gives each line its task count and first ids', async () => {
    const cwd = await folder({
      'm.yaml': `version: 1
name: m
tasks:
  - { id: "a-{{index}}", repeat: 2, model: flat-image, input: { prompt: "{{nope}}", ratio: "5:4" } }
`,
    });
    const r = await cli(['validate', '--json', 'm.yaml'], { cwd });
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.problems).toBe(2);
    expect(
      out.manifests[0].problems.map((p: Record<string, unknown>) => [p.task, p.tasks, p.taskIds, p.path]),
    ).toEqual([
      ['a-1', 2, ['a-1', 'a-2'], 'input.prompt'],
      ['a-1', 2, ['a-1', 'a-2'], 'input.ratio'],
    ]);
    expect(lines(r.stderr)).toEqual(['mediabatch: 2 problems in m.yaml; fix them and run again']);
  });
});

// Each kind of problem and its exact line. A manifest of one or two tasks each; line 4 is the first task.
const KINDS: Array<[string, string, string]> = [
  [
    'unknown top-level key',
    'concurency: 4\ntasks:\n  - { id: a, model: flat-image, input: { prompt: x } }\n',
    'm.yaml:3:1  concurency: unknown key "concurency"; known keys are: version, name, run, schedule, timezone, concurrency, order, budget, file_name, retries, review, budget_per_period, output, callback_url, listen, vars, defaults, tasks',
  ],
  [
    'a setting of the wrong type',
    'concurrency: many\ntasks:\n  - { id: a, model: flat-image, input: { prompt: x } }\n',
    'm.yaml:3:14  concurrency: must be a number, got "many"',
  ],
  [
    'unknown task key',
    'tasks:\n  - { id: a, model: flat-image, modle: x, input: { prompt: x } }\n',
    'm.yaml:4:33  tasks.0.modle: unknown key "modle"; known keys are: id, model, input, matrix, foreach, repeat, media_seconds, retries, review, file_name, after',
  ],
  [
    'unknown template name',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: "{{brand}}" } }\n',
    'm.yaml:4:51  task a  input.prompt: unknown name "brand"; known names are: date, datetime, index, name, run',
  ],
  [
    'empty placeholder',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: "{{ }}" } }\n',
    'm.yaml:4:51  tasks.0.input.prompt: empty placeholder "{{ }}"; put a name inside, like {{brand}}',
  ],
  [
    'a placeholder that computes',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: "{{ a + b }}" } }\n',
    'm.yaml:4:51  tasks.0.input.prompt: "{{ a + b }}" is not a name; templates only look names up (letters, digits, _ and -, joined by dots) and never compute',
  ],
  [
    'an unclosed placeholder',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: "{{brand" } }\n',
    'm.yaml:4:51  tasks.0.input.prompt: unclosed "{{" in "{{brand"; close it with "}}"',
  ],
  [
    'a list inside a longer text',
    'vars: { tags: [a, b] }\ntasks:\n  - { id: a, model: flat-image, input: { prompt: "x {{tags}}" } }\n',
    'm.yaml:5:53  task a  input.prompt: "tags" is a list; only text, numbers and true/false can be part of a longer text (a list or object can only be a whole value)',
  ],
  [
    'a field a var does not have',
    'vars: { brand: { name: A } }\ntasks:\n  - { id: a, model: flat-image, input: { prompt: "{{brand.nme}}" } }\n',
    'm.yaml:5:51  task a  input.prompt: "brand" has no field "nme"; its fields are: name',
  ],
  [
    'a var named like a built-in',
    'vars: { index: 3 }\ntasks:\n  - { id: a, model: flat-image, input: { prompt: x } }\n',
    'm.yaml:3:9  vars.index: "index" is a built-in template name (name, run, date, datetime, index, row, after); rename this var',
  ],
  [
    'a matrix key named like a built-in',
    'tasks:\n  - { id: "a-{{index}}", model: flat-image, matrix: { index: [1, 2] }, input: { prompt: x } }\n',
    'm.yaml:4:55  tasks.0.matrix.index: "index" is a built-in template name (name, run, date, datetime, index, row, after); use another matrix key',
  ],
  [
    'an id that renders to a list',
    'vars: { n: [1] }\ntasks:\n  - { id: "{{n}}", model: flat-image, input: { prompt: x } }\n',
    'm.yaml:5:11  tasks.0.id: must render to text, got a list',
  ],
  [
    'an input that renders to a list',
    'vars: { n: [1] }\ntasks:\n  - { id: a, model: flat-image, input: "{{n}}" }\n',
    'm.yaml:5:40  task a  input: must render to a mapping of request fields, got a list',
  ],
  [
    'a data file that is not there',
    'tasks:\n  - { id: "a-{{index}}", model: flat-image, foreach: rows.csv, input: { prompt: "{{row.text}}" } }\n',
    "m.yaml:4:54  tasks.0.foreach: cannot read rows.csv: no such file; the path is relative to the manifest's folder",
  ],
  [
    'unknown model',
    'tasks:\n  - { id: a, model: flat-imag, input: { prompt: x } }\n',
    'm.yaml:4:5  task a  model: unknown model "flat-imag"; known models are: ai-talking-avatar-video, studio-2-6, ai_dance_move, flow22_spicy, stream-2-0-fast, video-face-swap, flat-image, anime-waifu, pixel-lite, oc-maker, speech-v3, song-replace-section, voice-cover',
  ],
  [
    'defaults not keyed by model',
    'defaults: { model: flat-image }\ntasks:\n  - { id: a, model: flat-image, input: { prompt: x } }\n',
    'm.yaml:3:13  defaults.model: unknown model "model": defaults is keyed by model id, with that model\'s request fields under it, like defaults: { flat-image: { ratio: "16:9" } }; known models are: ai-talking-avatar-video, studio-2-6, ai_dance_move, flow22_spicy, stream-2-0-fast, video-face-swap, flat-image, anime-waifu, pixel-lite, oc-maker, speech-v3, song-replace-section, voice-cover',
  ],
  [
    'unknown request field',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: x, ratoi: "1:1" } }\n',
    'm.yaml:4:60  task a  input.ratoi: unknown field; known fields are: prompt, ratio',
  ],
  [
    'a required field left out',
    'tasks:\n  - { id: a, model: flat-image, input: { ratio: "1:1" } }\n',
    'm.yaml:4:40  task a  input.prompt: is required',
  ],
  [
    'a value not among the choices',
    'tasks:\n  - { id: a, model: studio-2-6, input: { prompt: x, duration: 6 } }\n',
    'm.yaml:4:63  task a  input.duration: must be 5 or 10, got 6',
  ],
  [
    'a number out of range',
    'tasks:\n  - { id: a, model: stream-2-0-fast, input: { prompt: x, duration: 16 } }\n',
    'm.yaml:4:68  task a  input.duration: must be an integer from 4 to 15, got 16',
  ],
  [
    'a rule between two fields',
    'tasks:\n  - { id: a, model: studio-2-6, input: { prompt: x, generate_audio: true, resolution: 720p } }\n',
    'm.yaml:4:69  task a  input.generate_audio: native audio requires resolution 1080p, got 720p',
  ],
  [
    'media_seconds not above 0',
    'tasks:\n  - { id: a, model: flat-image, media_seconds: -1, input: { prompt: x } }\n',
    'm.yaml:4:48  tasks.0.media_seconds: must be > 0, got -1',
  ],
  [
    'a local file that is not there',
    'tasks:\n  - { id: a, model: video-face-swap, input: { reference_video: "file:gone.mp4", reference_img: "https://example.org/f.png" } }\n',
    'm.yaml:4:64  task a  input.reference_video: file:gone.mp4: no such file',
  ],
  [
    'a duplicate id',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: x } }\n  - { id: a, model: flat-image, input: { prompt: y } }\n',
    'm.yaml:5:5  task a  id: duplicate task id, made by tasks.0 at m.yaml:4:5 and by tasks.1 at m.yaml:5:5; make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
  ],
  [
    'a file name with a folder in it',
    'tasks:\n  - { id: a, model: flat-image, file_name: "../x", input: { prompt: x } }\n',
    'm.yaml:4:44  task a  file_name: must be one file name, without / or \\, got "../x"',
  ],
  [
    'a file name taken by another task',
    'tasks:\n  - { id: a, model: flat-image, file_name: same, input: { prompt: x } }\n  - { id: b, model: flat-image, file_name: same, input: { prompt: x } }\n',
    'm.yaml:5:44  task b  file_name: renders to "same", which task a has too: file names must differ (letter case aside)',
  ],
  [
    'an upstream that is not in the manifest',
    'tasks:\n  - { id: a, model: flat-image, after: hero, input: { prompt: "{{after.image}}" } }\n',
    'm.yaml:4:40  task a  after: names task "hero", which this manifest does not make (after expansion); check the id template',
  ],
  [
    'a task waiting for itself',
    'tasks:\n  - { id: a, model: flat-image, after: a, input: { prompt: x } }\n',
    'm.yaml:4:40  task a  after: names the task itself; a task cannot wait for its own result',
  ],
  [
    'a cycle',
    'tasks:\n  - { id: a, model: flat-image, after: b, input: { prompt: x } }\n  - { id: b, model: flat-image, after: a, input: { prompt: x } }\n',
    'm.yaml:5:40  task b  after: makes a cycle: a → b → a; a task cannot wait for a task that waits for it',
  ],
  [
    'a reference to no part of a result',
    'tasks:\n  - { id: a, model: flat-image, input: { prompt: a } }\n  - { id: b, model: flat-image, after: a, input: { prompt: "{{after.picture}}" } }\n',
    'm.yaml:5:61  task b  input.prompt: "after.picture" names no part of a result; what follows "after." is one of image, video, audio, files.N, img_uuid, songs.N.audio_id (or .title, .style, .lyrics, .audio_duration) or sheet.<key>; N counts from 1 (files.1 is the first file, songs.1 the first song)',
  ],
  [
    'a reference without after',
    'tasks:\n  - { id: b, model: flat-image, input: { prompt: "{{after.image}}" } }\n',
    'm.yaml:4:51  task b  input.prompt: "after.image" takes the result of an earlier task, which this task does not name: add after: "<task id>" to it',
  ],
  [
    'a reference to what the upstream does not make',
    'tasks:\n  - { id: v, model: speech-v3, input: { text: hi } }\n  - { id: b, model: studio-2-6, after: v, input: { prompt: x, image_url: "{{after.video}}" } }\n',
    'm.yaml:5:75  task b  input.image_url: {{after.video}} cannot be filled in: v is a speech-v3 task, which makes one audio, not a video',
  ],
];

describe('validate: each kind of problem, word for word', () => {
  it.each(KINDS)('%s', async (_kind, text, line) => {
    const r = await validate(text);
    expect(r.code).toBe(1);
    expect(r.lines).toEqual([line, 'mediabatch: 1 problem in m.yaml; fix it and run again']);
  });
});
