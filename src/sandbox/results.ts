// What a successful job returns in `json`, per model, following the spec's result items.
import type { CatalogEntry, MediaDurations, RequestBody, ResultItemKind } from '../catalog/types.js';
import type { FileRecipe } from './files.js';
import type { Random } from './random.js';

export type UrlItem = {
  type: Exclude<ResultItemKind, 'json'>;
  value: string;
  audio_id?: string;
  title?: string;
  audio_duration?: number;
  style?: string;
  lyrics?: string;
};
export type JsonItem = { type: 'json'; value: Record<string, unknown> };
export type ResultItem = UrlItem | JsonItem;

/** Words in a prompt that make a job fail, so every failure path of the spec can be reached on purpose. */
export const FAIL_KEYWORDS = {
  /** Any model: the job ends `failed` and is refunded. */
  any: 'SANDBOX_FAIL',
  /** oc-maker: the text stage answers something that is not JSON. */
  noJson: 'NOJSON',
  /** oc-maker: the text stage answers JSON without `oc_prompt`. */
  noPrompt: 'NOPROMPT',
} as const;

/** Why the job is bound to fail because of what the request says, or null. */
export function plannedFailure(entry: CatalogEntry, body: RequestBody): string | null {
  const texts = Object.values(body).filter((v): v is string => typeof v === 'string');
  if (texts.some((t) => t.includes(FAIL_KEYWORDS.any)))
    return `the prompt asks to fail (${FAIL_KEYWORDS.any})`;
  if (entry.model === 'oc-maker') {
    const prompt = typeof body.prompt === 'string' ? body.prompt : '';
    if (prompt.includes(FAIL_KEYWORDS.noJson)) return 'text stage: the output is not JSON';
    if (prompt.includes(FAIL_KEYWORDS.noPrompt)) return 'text stage: the JSON has no oc_prompt';
  }
  return null;
}

/** A file to register and the item that links to it; `value` is filled with the link. */
export interface PlannedItem {
  item: ResultItem;
  recipe: FileRecipe | null;
}

/** Characters of speech per second at speed 1; about 150 words a minute. */
const SPEECH_CHARS_PER_SECOND = 15;

export function speechSeconds(text: string, speed: number): number {
  return round2(Math.max(1, text.length / SPEECH_CHARS_PER_SECOND / speed));
}

/** The items of a successful job, with the file each URL item needs. Random draws come from the job's own generator. */
export function planItems(
  entry: CatalogEntry,
  body: RequestBody,
  media: MediaDurations,
  random: Random,
): PlannedItem[] {
  switch (entry.model) {
    case 'speech-v3': {
      const text = typeof body.text === 'string' ? body.text : '';
      const speed = typeof body.speed === 'number' ? body.speed : 1;
      return [
        {
          item: { type: 'audio', value: '' },
          recipe: { format: 'mp3', seconds: speechSeconds(text, speed) },
        },
      ];
    }
    case 'voice-cover': {
      const seconds = media.audio_url ?? 30;
      const format = body.output_format === 'wav' ? 'wav' : 'mp3';
      return [{ item: { type: 'audio', value: '' }, recipe: { format, seconds } }];
    }
    case 'song-replace-section':
      return songItems(body, media, random);
    case 'oc-maker':
      return [
        { item: { type: 'json', value: characterSheet(body, random) }, recipe: null },
        { item: { type: 'image', value: '' }, recipe: { format: 'png' } },
      ];
    default:
      return entry.result.items.map((kind) => genericItem(kind));
  }
}

function genericItem(kind: ResultItemKind): PlannedItem {
  if (kind === 'video') return { item: { type: 'video', value: '' }, recipe: { format: 'mp4' } };
  if (kind === 'audio') return { item: { type: 'audio', value: '' }, recipe: { format: 'mp3', seconds: 10 } };
  if (kind === 'json') return { item: { type: 'json', value: {} }, recipe: null };
  return { item: { type: 'image', value: '' }, recipe: { format: 'png' } };
}

function songItems(body: RequestBody, media: MediaDurations, random: Random): PlannedItem[] {
  const base = media.audio_url ?? media.audio_id ?? round2(random.between(150, 240));
  const str = (v: unknown): string => (typeof v === 'string' ? v : '');
  return [0, 1].map((version) => {
    // Versions differ slightly in length, as two renders of the same section do.
    const seconds = round2(base + version * random.between(0, 2));
    const item: UrlItem = {
      type: 'audio',
      value: '',
      audio_id: random.uuid(),
      title: str(body.title),
      audio_duration: seconds,
      style: str(body.style),
      lyrics: str(body.full_lyrics),
    };
    return { item, recipe: { format: 'mp3', seconds } };
  });
}

const NAMES = ['Aria Vale', 'Juno Marsh', 'Kestrel Ono', 'Mira Holt', 'Tobin Reyes', 'Sable Quinn'] as const;
const TRAITS = ['curious', 'stubborn', 'gentle', 'reckless', 'wry', 'loyal'] as const;

function characterSheet(body: RequestBody, random: Random): Record<string, unknown> {
  const prompt = typeof body.prompt === 'string' ? body.prompt : '';
  const name = random.pick(NAMES);
  return {
    name,
    personality: `${random.pick(TRAITS)} and ${random.pick(TRAITS)}`,
    backstory: `Written by the sandbox from a prompt of ${prompt.length} characters.`,
    oc_prompt: `Full-body character portrait of ${name}, ${prompt.slice(0, 200)}`,
    oc_ratio: typeof body.ratio === 'string' ? body.ratio : '3:4',
  };
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}
