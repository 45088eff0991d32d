import { createHash } from 'node:crypto';

const MAX_NAME = 80;

/**
 * A folder name for a task id that is safe on every file system and can never leave the run's folder:
 * no separators, no `..`, no control characters, bounded length. When the id had to be changed, a short
 * hash of the original id keeps two different ids from landing in one folder.
 */
export function taskFolderName(taskId: string): string {
  const cleaned = taskId
    .normalize('NFC')
    .replace(/[^\p{L}\p{N}._-]+/gu, '_')
    .replace(/^[._]+/, '')
    .replace(/_+/g, '_');
  const fits = cleaned.length > 0 && cleaned.length <= MAX_NAME;
  if (fits && cleaned === taskId && !isReserved(cleaned)) return cleaned;
  const hash = createHash('sha256').update(taskId).digest('hex').slice(0, 10);
  const stem = [...cleaned].slice(0, MAX_NAME - 11).join('') || 'task';
  if (isReserved(stem)) {
    // Windows reads `aux.txt-1a2b` as the device AUX still (the name before the first dot counts), so
    // the hash goes before that dot: `aux-1a2b.txt`.
    const dot = stem.indexOf('.');
    return dot < 0 ? `${stem}-${hash}` : `${stem.slice(0, dot)}-${hash}${stem.slice(dot)}`;
  }
  return `${stem}-${hash}`;
}

// Windows device names are harmless here but break the folder for anyone who copies it there. Windows
// also takes the superscript digits ¹²³ for COM and LPT ports.
function isReserved(name: string): boolean {
  return /^(con|prn|aux|nul|com[\d¹²³]|lpt[\d¹²³])(\..*)?$/i.test(name);
}

/** `1.png`, `2.mp3`: the item's position and the kind's extension, never anything from the URL or the server. */
export function resultFileName(position: number, extension: string): string {
  return `${position}.${extension.replace(/[^a-z0-9]/gi, '') || 'bin'}`;
}
