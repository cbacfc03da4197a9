"""The page `drscore view` serves: markup, style and script as three static strings.

The script only talks to its own server (``/api/...``) and writes every value with
``textContent``, never as HTML, so text from reports, judges or pages cannot run. The
server's Content-Security-Policy (``script-src 'self'``, ``connect-src 'self'``, nothing
else) backs that up: no inline script, no external request.
"""
from __future__ import annotations

import html

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1rem;color:#222;font-size:14px}
h1{font-size:1.2rem;margin:.2rem 0}.muted{color:#666}
#filters label{margin-right:.8rem}#filters select,#filters input{margin-left:.3rem}
table{border-collapse:collapse;margin:.6rem 0;width:100%}
th,td{border:1px solid #ddd;padding:.2rem .4rem;text-align:right;white-space:nowrap}
th{background:#f4f4f4;cursor:pointer;user-select:none}td.l,th.l{text-align:left}
tbody tr{cursor:pointer}tbody tr:hover{background:#f0f6ff}tr.open{background:#e3efff}
#panel{border:1px solid #bbb;padding:.6rem;margin-top:.6rem;background:#fcfcfc}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.4rem;max-height:30rem;overflow:auto}
.call{border-top:1px solid #ddd;margin-top:.6rem;padding-top:.4rem}
.failed{color:#a00}
"""

JS = r"""
"use strict";
const $ = (id) => document.getElementById(id);
const COLS = [["task","task"],["agent","agent"],["method","method"],["status","status"],["score","score"],
  ["coverage","coverage"],["calls","calls"],["cache_hits","cache hits"],["input_tokens","input tok"],
  ["output_tokens","output tok"],["reasoning_tokens","reasoning tok"],["cached_input_tokens","cached tok"],
  ["cost_usd","cost $"],["latency_s","latency s"],["errors","errors"]];
const TEXT = new Set(["task","agent","method","status"]);
const state = {offset: 0, limit: 50, sort: "task", descending: false, total: 0, rows: -1};
function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; }
function fmt(v, col) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number" && !Number.isInteger(v)) return col === "cost_usd" ? v.toFixed(6) : v.toFixed(3);
  return String(v);
}
function query() {
  const p = new URLSearchParams({offset: state.offset, limit: state.limit, sort: state.sort,
                                 descending: state.descending ? "1" : "0"});
  for (const f of ["agent", "method", "status"]) { const v = $("f-" + f).value; if (v) p.set(f, v); }
  const t = $("f-task").value.trim();
  if (t) p.set($("f-task-mode").value === "prefix" ? "task_prefix" : "task", t);
  return p;
}
async function getJSON(url) { const r = await fetch(url, {cache: "no-store"}); if (!r.ok) throw new Error(url + ": " + r.status); return r.json(); }
function head() {
  const tr = $("head"); tr.textContent = "";
  for (const [key, label] of COLS) {
    const th = el("th", label + (state.sort === key ? (state.descending ? " ▼" : " ▲") : ""), TEXT.has(key) ? "l" : "");
    th.dataset.sort = key;
    th.addEventListener("click", () => { if (state.sort === key) state.descending = !state.descending; else { state.sort = key; state.descending = !TEXT.has(key); } state.offset = 0; load(); });
    tr.appendChild(th);
  }
}
async function load() {
  head();
  const data = await getJSON("api/rows?" + query());
  state.total = data.total;
  const body = $("body"); body.textContent = "";
  for (const r of data.rows) {
    const tr = el("tr"); tr.dataset.id = r.id;
    for (const [key] of COLS) tr.appendChild(el("td", fmt(r[key], key), TEXT.has(key) ? "l" : ""));
    tr.addEventListener("click", () => openRow(r.id, tr));
    body.appendChild(tr);
  }
  const last = Math.min(state.offset + data.rows.length, state.total);
  $("count").textContent = state.total ? `rows ${state.offset + 1}–${last} of ${state.total}` : "no rows";
  $("prev").disabled = state.offset <= 0; $("next").disabled = last >= state.total;
  document.body.dataset.ready = "1";
  if (window.firstPageMs === undefined) window.firstPageMs = performance.now();  // benches read it
}
function section(parent, title, text) { parent.appendChild(el("h4", title)); parent.appendChild(el("pre", text)); }
async function openRow(id, tr) {
  for (const o of document.querySelectorAll("tr.open")) o.classList.remove("open");
  if (tr) tr.classList.add("open");
  const d = await getJSON("api/row/" + id);
  const p = $("panel"); p.textContent = ""; p.hidden = false;
  const r = d.row;
  p.appendChild(el("h3", `${r.task_id} · ${r.agent} · ${r.method}: score ${fmt(r.score)} (${r.status})`));
  p.appendChild(el("p", `tokens in ${r.input_tokens} (cached ${r.cached_input_tokens || 0}) · out ${r.output_tokens} (reasoning ${r.reasoning_tokens || 0}) · calls ${r.calls} · cache hits ${r.cache_hits}`, "muted"));
  if (r.errors && r.errors.length) section(p, "errors", r.errors.join("\n"));
  section(p, "subscores and details", JSON.stringify({subscores: r.subscores, details: r.details}, null, 1));
  p.appendChild(el("h4", `judge calls (${d.calls.length})`));
  d.calls.forEach((c, i) => {
    const box = el("div", null, "call"); p.appendChild(box);
    box.appendChild(el("b", `call ${i + 1}: ${c.template}${c.label ? " · " + c.label : ""} · ${c.status}${c.cached ? " · cached" : ""}`, c.status === "ok" ? "" : "failed"));
    box.appendChild(el("p", `input tokens ${c.input_tokens} (cached ${c.cached_input_tokens || 0}) · output ${c.output_tokens} (reasoning ${c.reasoning_tokens || 0}) · cost ${fmt(c.cost_usd, "cost_usd")} · ${fmt(c.latency_s)} s`, "muted"));
    if (c.error) section(box, "error", c.error);
    if (c.prompt && c.prompt.messages) {
      for (const m of c.prompt.messages) section(box, "prompt · " + m.role, typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 1));
      section(box, "answer (as the judge sent it)", c.prompt.answer);
    } else {
      section(box, "recorded inputs (the full prompt is not in the judge cache on this machine)", JSON.stringify(c.inputs || {}, null, 1));
    }
    section(box, "verdict", JSON.stringify(c.verdict, null, 1));
  });
}
async function meta(first) {
  const m = await getJSON("api/meta");
  $("state").textContent = `${m.rows} rows · ${m.calls} judge calls · run ${m.state}` + (m.money ? ` · ${m.money}` : "");
  if (first) {
    for (const [f, values] of [["agent", m.agents], ["method", m.methods], ["status", m.statuss]]) {
      const s = $("f-" + f); s.textContent = ""; s.appendChild(el("option", "all")).value = "";
      for (const v of values) s.appendChild(el("option", v)).value = v;
    }
  }
  if (m.rows !== state.rows) { const again = state.rows >= 0; state.rows = m.rows; if (again) load(); }
  if (m.state === "running") setTimeout(() => meta(false), 3000);
}
for (const f of ["f-agent", "f-method", "f-status", "f-task-mode"]) $(f).addEventListener("change", () => { state.offset = 0; load(); });
$("f-task").addEventListener("input", () => { state.offset = 0; load(); });
$("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); load(); });
$("next").addEventListener("click", () => { state.offset += state.limit; load(); });
meta(true).then(load);
"""


def page(title: str) -> str:
    """The page's markup; the script and style are served beside it (CSP: 'self')."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f'<title>{html.escape(title)}</title><link rel="stylesheet" href="view.css"></head><body>',
        f"<h1>{html.escape(title)}</h1>",
        '<p class="muted" id="state"></p>',
        '<div id="filters">'
        '<label>agent<select id="f-agent"></select></label>'
        '<label>method<select id="f-method"></select></label>'
        '<label>status<select id="f-status"></select></label>'
        '<label>task<select id="f-task-mode"><option value="exact">is</option>'
        '<option value="prefix">starts with</option></select>'
        '<input id="f-task" type="search" placeholder="task id"></label>'
        '<button id="prev">previous</button><button id="next">next</button> '
        '<span id="count" class="muted"></span></div>',
        '<table id="rows"><thead><tr id="head"></tr></thead><tbody id="body"></tbody></table>',
        '<section id="panel" hidden></section>',
        '<script src="view.js"></script>',
        "</body></html>",
    ]) + "\n"
