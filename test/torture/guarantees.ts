// A guarantee checked by the torture: what must hold, whether it held, and what was seen.
export interface Guarantee {
  name: string;
  ok: boolean;
  detail: string;
}

export function guarantee(name: string, ok: boolean, seen: string | string[]): Guarantee {
  const detail = Array.isArray(seen) ? (seen.length === 0 ? 'none' : seen.slice(0, 10).join('; ')) : seen;
  return { name, ok, detail };
}

export function formatGuarantees(list: readonly Guarantee[]): string {
  return list.map((g) => `  ${g.ok ? 'ok  ' : 'FAIL'} ${g.name}${g.ok ? '' : `: ${g.detail}`}`).join('\n');
}
