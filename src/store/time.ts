// Times are stored as ISO 8601 UTC text (`2024-10-11T10:55:32.596Z`): readable in the sqlite shell,
// and, being fixed-width, they compare correctly as strings in SQL.

export function toIso(date: Date): string {
  return date.toISOString();
}

export function fromIso(text: string): Date {
  return new Date(text);
}

export function fromIsoOrNull(text: string | null): Date | null {
  return text === null ? null : new Date(text);
}

/** The ledger's period of a moment: its UTC calendar month, `YYYY-MM`. */
export function periodOf(date: Date): string {
  return date.toISOString().slice(0, 7);
}
