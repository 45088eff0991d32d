// What a successful job returns in `json`, per model, following the spec's result items.
import type { ResultItem as WireResultItem } from '../api/schemas.js';
import type { CatalogEntry, MediaDurations, RequestBody, ResultItemKind } from '../catalog/types.js';
import type { FileRecipe } from './files.js';
import type { Random } from './random.js';

/** A result item as the client reads it (src/api/schemas.ts), narrowed to what the sandbox writes. */
export type UrlItem = Pick<WireResultItem, 'audio_id' | 'title' | 'audio_duration' | 'style' | 'lyrics'> & {
  type: Exclude<ResultItemKind, 'json'>;
  value: string;
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

/**
 * The items of a successful job, with the file each URL item needs. Which items, in which order and
 * with which file format, is the catalog's result shape for the request: the sandbox answers what the
 * client expects to read. Random draws come from the job's own generator.
 */
export function planItems(
  entry: CatalogEntry,
  body: RequestBody,
  media: MediaDurations,
  random: Random,
): PlannedItem[] {
  const shape = entry.resultFor?.(body) ?? entry.result;
  const audioFormat = shape.extension.audio === 'wav' ? 'wav' : 'mp3';
  const song = entry.model === 'song-replace-section' ? songVersions(body, media, random) : undefined;
  let audioItems = 0;
  return shape.items.map((kind): PlannedItem => {
    switch (kind) {
      case 'json':
        return {
          item: { type: 'json', value: entry.model === 'oc-maker' ? characterSheet(body, random) : {} },
          recipe: null,
        };
      case 'image':
        return { item: { type: 'image', value: '' }, recipe: { format: 'png' } };
      case 'video':
        return { item: { type: 'video', value: '' }, recipe: { format: 'mp4' } };
    }
    if (song) return song(audioItems++, audioFormat);
    return {
      item: { type: 'audio', value: '' },
      recipe: { format: audioFormat, seconds: audioSeconds(entry, body, media) },
    };
  });
}

/** How long a single audio result lasts: speech from its text, a cover as long as its song. */
function audioSeconds(entry: CatalogEntry, body: RequestBody, media: MediaDurations): number {
  if (entry.model === 'speech-v3') {
    const text = typeof body.text === 'string' ? body.text : '';
    const speed = typeof body.speed === 'number' ? body.speed : 1;
    return speechSeconds(text, speed);
  }
  if (entry.model === 'voice-cover') return media.audio_url ?? 30;
  return 10;
}

/** The song versions of one request; the song's length is drawn once, each version's offset on its turn. */
function songVersions(
  body: RequestBody,
  media: MediaDurations,
  random: Random,
): (version: number, format: 'mp3' | 'wav') => PlannedItem {
  const base = media.audio_url ?? media.audio_id ?? round2(random.between(150, 240));
  const str = (v: unknown): string => (typeof v === 'string' ? v : '');
  return (version, format) => {
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
    return { item, recipe: { format, seconds } };
  };
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
