/**
 * The studio page's stylesheet (inline, allowed by its hash in the Content-Security-Policy).
 * No style="" attributes anywhere: the policy would refuse them. Light and dark follow the
 * system's setting.
 */
export const STUDIO_STYLE = String.raw`
:root {
  color-scheme: light dark;
  --bg: #f6f7f9; --panel: #ffffff; --fg: #1c1f24; --muted: #667085; --line: #d8dce3;
  --accent: #2f6fde; --accent-fg: #ffffff; --error: #c0362c; --user: #eef3fd; --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #15171b; --panel: #1d2025; --fg: #e4e7ec; --muted: #98a2b3; --line: #343a44; --accent: #5b8ff0; --user: #23304a; --error: #f0776c; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; align-items: center; gap: 12px; padding: 8px 16px; border-bottom: 1px solid var(--line); background: var(--panel); flex-wrap: wrap; }
header h1 { font-size: 16px; margin: 0; }
#status { color: var(--muted); flex: 1; }
#status.bad { color: var(--error); }
details.keybox { position: relative; }
details.keybox summary { cursor: pointer; color: var(--accent); }
details.keybox .drop { position: absolute; right: 0; z-index: 2; width: 320px; padding: 12px; background: var(--panel); border: 1px solid var(--line); border-radius: 8px; box-shadow: 0 6px 24px rgba(0,0,0,.18); }
nav { display: flex; gap: 2px; padding: 0 16px; border-bottom: 1px solid var(--line); background: var(--panel); }
nav button { border: 0; border-bottom: 2px solid transparent; border-radius: 0; background: none; color: var(--muted); padding: 8px 12px; }
nav button[aria-selected="true"] { color: var(--fg); border-bottom-color: var(--accent); }
main { padding: 16px; max-width: 1200px; margin: 0 auto; }
section[hidden] { display: none; }
.row { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin-bottom: 8px; }
.grid { display: grid; grid-template-columns: 280px 1fr; gap: 16px; }
@media (max-width: 800px) { .grid { grid-template-columns: 1fr; } }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 12px; }
label { display: block; font-size: 12px; color: var(--muted); margin: 8px 0 4px; }
label:first-child { margin-top: 0; }
input, select, textarea, button { font: inherit; color: inherit; }
input, select, textarea { width: 100%; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); }
textarea { resize: vertical; min-height: 64px; }
.row input, .row select { width: auto; flex: 1; }
.row input.narrow { flex: 0 0 90px; }
button { padding: 6px 14px; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-fg); }
button:disabled { opacity: .5; cursor: default; }
#transcript { height: 56vh; overflow-y: auto; display: flex; flex-direction: column; gap: 8px; margin-bottom: 8px; }
.msg { padding: 8px 10px; border-radius: 8px; white-space: pre-wrap; word-wrap: break-word; }
.msg .who { display: block; font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin-bottom: 2px; }
.msg.user { background: var(--user); align-self: flex-end; max-width: 85%; }
.msg.assistant { background: var(--bg); border: 1px solid var(--line); }
.msg .thinking { display: block; color: var(--muted); font-style: italic; margin-bottom: 4px; }
.msg .thinking:empty { display: none; }
.meta { font-size: 12px; color: var(--muted); min-height: 1.4em; }
.error { color: var(--error); white-space: pre-wrap; }
pre { font-family: var(--mono); font-size: 12.5px; white-space: pre-wrap; word-wrap: break-word; margin: 0; }
pre.out { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 8px; max-height: 60vh; overflow: auto; min-height: 3em; }
#term-out { background: #0f1115; color: #d7dde6; }
#term-out .err { color: #f59d94; }
#term-out .cmd { color: #8fb8ff; }
#term-out .note { color: #98a2b3; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num { font-family: var(--mono); text-align: right; white-space: nowrap; }
.warn { border-left: 3px solid var(--error); padding-left: 8px; color: var(--muted); font-size: 12px; }
`;
