export type MediaKind = 'video' | 'audio' | 'image';

/** For an image, `seconds` is 0: only `bytes` means something. */
export type ProbeResult =
  | { ok: true; seconds: number; bytes?: number; container: string }
  | { ok: false; reason: string };

/** Measures an input media's duration, from a local path, a file: URL or an http(s) URL. */
export type Prober = (location: string, kind: MediaKind) => Promise<ProbeResult>;
