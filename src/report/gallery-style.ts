// The gallery's stylesheet, inlined into index.html (no network, no build step).

export const GALLERY_CSS = `
:root {
  color-scheme: light dark;
  --bg: #f4f5f7; --panel: #ffffff; --panel-2: #f0f1f4; --text: #1b1f27; --muted: #5f6776; --line: #e2e5ea;
  --accent: #4f46e5; --accent-soft: #eef0ff; --media: #14161c;
  --done: #15803d; --done-bg: #e7f6ec; --failed: #b91c1c; --failed-bg: #fdecec; --doubt: #b45309; --doubt-bg: #fff4e0;
  --rejected: #7e22ce; --rejected-bg: #f4ecfd; --other: #475569; --other-bg: #eef1f5; --running: #1d4ed8; --running-bg: #e8effd;
  --shadow: 0 1px 2px rgba(16,24,40,.06), 0 2px 8px rgba(16,24,40,.06);
  --radius: 14px;
  font-family: ui-sans-serif, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0f1115; --panel: #171a21; --panel-2: #1e222b; --text: #e8eaf0; --muted: #9aa3b2; --line: #2a2f3a;
    --accent: #8b8cff; --accent-soft: #25263d; --media: #0a0b0e;
    --done: #4ade80; --done-bg: #12301f; --failed: #f87171; --failed-bg: #3a1717; --doubt: #fbbf24; --doubt-bg: #3a2a0c;
    --rejected: #c084fc; --rejected-bg: #2e1a42; --other: #cbd5e1; --other-bg: #262b35; --running: #93c5fd; --running-bg: #172540;
    --shadow: 0 1px 2px rgba(0,0,0,.4);
  }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); font-size: 14px; line-height: 1.45; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 12.5px; }
.wrap { max-width: 1440px; margin: 0 auto; padding: 28px 24px 64px; }
header.top { display: flex; flex-wrap: wrap; gap: 12px 24px; align-items: flex-end; justify-content: space-between; margin-bottom: 22px; }
header.top h1 { margin: 0; font-size: 26px; letter-spacing: -.01em; }
header.top h1 .run { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-weight: 600; }
header.top .meta { color: var(--muted); margin-top: 6px; display: flex; flex-wrap: wrap; gap: 6px 14px; }
header.top .links { display: flex; gap: 8px; flex-wrap: wrap; }
.btn { display: inline-flex; align-items: center; gap: 6px; padding: 7px 12px; border-radius: 999px; background: var(--panel);
  border: 1px solid var(--line); color: var(--text); font-size: 13px; box-shadow: var(--shadow); cursor: pointer; }
.btn:hover { text-decoration: none; border-color: var(--accent); }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin-bottom: 18px; }
.tile { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); padding: 14px 16px; box-shadow: var(--shadow); }
.tile .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .06em; }
.tile .value { font-size: 24px; font-weight: 650; margin-top: 4px; font-variant-numeric: tabular-nums; }
.tile .sub { color: var(--muted); font-size: 12.5px; margin-top: 2px; }
.tile.good .value { color: var(--done); } .tile.bad .value { color: var(--failed); } .tile.warn .value { color: var(--doubt); }
.attention { background: var(--doubt-bg); border: 1px solid color-mix(in srgb, var(--doubt) 35%, transparent); border-radius: var(--radius);
  padding: 14px 18px; margin-bottom: 18px; }
.attention h2 { margin: 0 0 6px; font-size: 15px; color: var(--doubt); }
.attention ul { margin: 6px 0 0; padding-left: 20px; }
.attention li { margin: 3px 0; }
.attention table { margin-top: 10px; }
section.panel { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); box-shadow: var(--shadow); margin-bottom: 18px; overflow: hidden; }
section.panel > summary, section.panel > h2 { list-style: none; cursor: pointer; margin: 0; padding: 14px 18px; font-size: 15px; font-weight: 650; }
details.panel > summary::-webkit-details-marker { display: none; }
details.panel > summary::before { content: "▸"; display: inline-block; width: 1.1em; color: var(--muted); transition: transform .15s; }
details.panel[open] > summary::before { transform: rotate(90deg); }
details.panel { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); box-shadow: var(--shadow); margin-bottom: 18px; }
details.panel > summary { list-style: none; cursor: pointer; padding: 14px 18px; font-size: 15px; font-weight: 650; }
details.panel > summary .hint { font-weight: 400; color: var(--muted); margin-left: 8px; font-size: 13px; }
.table-wrap { overflow-x: auto; padding: 0 18px 16px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
td.num, th.num { text-align: right; }
tr.total td { font-weight: 650; border-top: 2px solid var(--line); border-bottom: none; }
.note { color: var(--muted); font-size: 12.5px; padding: 0 18px 16px; margin: 0; }
.toolbar { position: sticky; top: 0; z-index: 5; display: flex; flex-wrap: wrap; gap: 10px 14px; align-items: center; padding: 12px 14px;
  margin: 0 -14px 14px; background: color-mix(in srgb, var(--bg) 88%, transparent); backdrop-filter: blur(8px); border-bottom: 1px solid var(--line); }
.toolbar select, .toolbar input { font: inherit; color: var(--text); background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 7px 10px; }
.toolbar input { min-width: 220px; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; }
.chip { font: inherit; font-size: 13px; border: 1px solid var(--line); background: var(--panel); color: var(--text); border-radius: 999px; padding: 5px 11px; cursor: pointer; }
.chip .n { color: var(--muted); margin-left: 4px; font-variant-numeric: tabular-nums; }
.chip[aria-pressed="true"] { background: var(--accent); border-color: var(--accent); color: #fff; }
.chip[aria-pressed="true"] .n { color: rgba(255,255,255,.8); }
.count { color: var(--muted); margin-left: auto; font-size: 13px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 16px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: var(--radius); overflow: hidden; box-shadow: var(--shadow);
  display: flex; flex-direction: column; min-width: 0; }
.card.s-failed { border-color: color-mix(in srgb, var(--failed) 45%, var(--line)); }
.card.s-in_doubt, .card.s-unfetched, .card.s-stalled { border-color: color-mix(in srgb, var(--doubt) 55%, var(--line)); }
.card.s-lost { border-color: color-mix(in srgb, var(--failed) 45%, var(--line)); }
.media { position: relative; background: var(--media); aspect-ratio: 4 / 3; display: flex; align-items: center; justify-content: center; overflow: hidden; }
.media img { width: 100%; height: 100%; object-fit: contain; cursor: zoom-in; display: block; }
.media video { width: 100%; height: 100%; object-fit: contain; background: #000; }
.media .strip { position: absolute; left: 8px; bottom: 8px; display: flex; gap: 6px; }
.media .strip img { width: 40px; height: 40px; object-fit: cover; border-radius: 6px; border: 2px solid rgba(255,255,255,.85); }
.media.audio { flex-direction: column; gap: 12px; padding: 16px; background: linear-gradient(135deg, #312e81, #7c3aed 55%, #db2777); }
.media.audio .wave { display: flex; align-items: center; gap: 3px; height: 54px; }
.media.audio .wave i { display: block; width: 4px; border-radius: 2px; background: rgba(255,255,255,.8); }
.media.audio audio { width: 100%; }
.media.audio .songtitle { color: #fff; font-weight: 650; text-align: center; font-size: 15px; text-shadow: 0 1px 2px rgba(0,0,0,.3); }
.media.empty { flex-direction: column; gap: 8px; color: var(--muted); background: var(--panel-2); text-align: center; padding: 16px; }
.media.empty .icon { font-size: 34px; line-height: 1; }
.media.s-failed { background: var(--failed-bg); color: var(--failed); }
.media.s-in_doubt, .media.s-unfetched, .media.s-stalled { background: var(--doubt-bg); color: var(--doubt); }
.media.s-lost { background: var(--failed-bg); color: var(--failed); }
.media.empty .hint { font-size: 12.5px; max-width: 30ch; }
.media.s-rejected { background: var(--rejected-bg); color: var(--rejected); }
.media .kind { position: absolute; top: 8px; right: 8px; background: rgba(0,0,0,.55); color: #fff; font-size: 11px; padding: 2px 8px; border-radius: 999px; }
.body { padding: 12px 14px 10px; display: flex; flex-direction: column; gap: 7px; flex: 1; min-width: 0; }
.titlerow { display: flex; align-items: center; gap: 8px; min-width: 0; }
.title { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-weight: 600; font-size: 13px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; flex: 1; min-width: 0; }
.badge { font-size: 11.5px; font-weight: 600; border-radius: 999px; padding: 2px 9px; white-space: nowrap; }
.rv-awaiting { color: #8a5a00; background: #fff4d6; } .rv-approved { color: var(--done); background: var(--done-bg); }
.rv-rejected { color: var(--failed); background: var(--failed-bg); } .rv-waiting { color: #555; background: #eee; }
.b-done { color: var(--done); background: var(--done-bg); } .b-failed { color: var(--failed); background: var(--failed-bg); }
.b-in_doubt, .b-unfetched, .b-stalled { color: var(--doubt); background: var(--doubt-bg); }
.b-lost { color: var(--failed); background: var(--failed-bg); } .b-rejected { color: var(--rejected); background: var(--rejected-bg); }
.b-blocked { color: var(--other); background: var(--other-bg); }
.b-pending, .b-submitting, .b-submitted, .b-running, .b-downloading { color: var(--running); background: var(--running-bg); }
.model { align-self: flex-start; font-size: 12px; color: var(--accent); background: var(--accent-soft); border-radius: 6px; padding: 1px 7px; }
.after { font-size: 12px; color: var(--muted); }
.after a { color: var(--accent); }
.prompt { color: var(--muted); font-size: 13px; display: -webkit-box; -webkit-line-clamp: 3; -webkit-box-orient: vertical; overflow: hidden; overflow-wrap: anywhere; }
.error { font-size: 12.5px; border-radius: 8px; padding: 7px 9px; background: var(--failed-bg); color: var(--failed); overflow-wrap: anywhere; }
.s-in_doubt .error, .s-unfetched .error, .s-stalled .error { background: var(--doubt-bg); color: var(--doubt); }
.paid { font-size: 12.5px; font-weight: 600; }
.s-unfetched .paid, .s-stalled .paid { color: var(--doubt); } .s-lost .paid { color: var(--failed); }
.marks { display: flex; flex-wrap: wrap; gap: 6px; }
.mark { font-size: 11.5px; border-radius: 6px; padding: 1px 7px; color: var(--other); background: var(--other-bg); }
.sheet { background: var(--panel-2); border-radius: 10px; padding: 9px 11px; font-size: 13px; display: grid; gap: 3px; overflow-wrap: anywhere; }
.sheet .name { font-weight: 700; font-size: 14px; }
.sheet dt { color: var(--muted); font-size: 11.5px; text-transform: uppercase; letter-spacing: .05em; margin-top: 4px; }
.sheet dd { margin: 0; }
.song { background: var(--panel-2); border-radius: 10px; padding: 8px 10px; font-size: 13px; display: grid; gap: 4px; }
.song .st { font-weight: 650; } .song .sm { color: var(--muted); font-size: 12px; }
.song audio { width: 100%; height: 32px; }
details.more summary { cursor: pointer; color: var(--accent); font-size: 12.5px; }
details.more pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 0; font-size: 12.5px; font-family: inherit; }
.foot { display: flex; flex-wrap: nowrap; white-space: nowrap; gap: 4px 12px; align-items: center; border-top: 1px solid var(--line); padding: 8px 14px; color: var(--muted); font-size: 12.5px; font-variant-numeric: tabular-nums; }
.foot .cost { color: var(--text); font-weight: 600; }
.foot a { margin-left: auto; }
.sentinel { height: 1px; }
.empty-state { color: var(--muted); text-align: center; padding: 48px 0; }
dialog.lightbox { border: none; padding: 0; background: transparent; max-width: 96vw; max-height: 96vh; }
dialog.lightbox::backdrop { background: rgba(8,9,12,.88); }
dialog.lightbox img { max-width: 96vw; max-height: 90vh; display: block; border-radius: 8px; }
dialog.lightbox .cap { color: #e5e7eb; text-align: center; margin-top: 8px; font-family: ui-monospace, monospace; font-size: 13px; }
footer.bottom { color: var(--muted); font-size: 12.5px; margin-top: 28px; text-align: center; }
`;
