"""The per-report viewer: ``viewer.html``, a second self-contained page beside
``report.html`` (which links into it from the leaderboard).

One line per (task, agent, method) score row, filtered by agent, method, status and
task; opening a line shows its score, subscores, status and errors, the method's
per-item details (FACT statements with URL and page outcome, factuality claims, KAE key
points, redundancy pairs: any list of records in ``details``), and every judge call
behind it from ``verdicts.jsonl``: template, label, status, cached or not, tokens,
cost, latency, what was judged (``inputs``: statements, URLs, passages) and the verdict
(per-criterion scores and the judge's reasons, drawn as tables).

A verdict belongs to a row through the ``task_id``, ``agent`` and ``method`` that both
records carry. The page works offline and fetches nothing: the data is embedded as one
JSON block (strings interned, rows as columns); each row's details and calls are JSON
strings of their own, decoded only when the row is opened; the table draws the first
page of matches only. A Content-Security-Policy that allows no source at all makes the
"no network" promise checkable by the browser itself.
"""
from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from typing import Any, Iterable

from drscore.engine.runtime.calls.ledger import money_text
from drscore.engine.runtime.models import InputError, ScoreRow, VerdictRecord
from drscore.engine.runtime.rundir_read import RunDir, natural_key

MAX_CALLS_PER_ROW = 300  # beyond this a row lists how many calls were left out
MAX_DETAIL_ITEMS = 1000  # per list in ``details`` (a row may list thousands of pairs)
MAX_ERRORS_PER_ROW = 50


def _num(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _clip_details(details: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in details.items():
        if isinstance(value, list) and len(value) > MAX_DETAIL_ITEMS:
            out[key] = value[:MAX_DETAIL_ITEMS]
            out[f"{key} (note)"] = f"first {MAX_DETAIL_ITEMS} of {len(value)} listed"
        else:
            out[key] = value
    return out


class _Strings:
    """Interned strings: each distinct value stored once, rows refer to its index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[str] = []

    def __call__(self, value: str) -> int:
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(value)
        return i


def viewer_data(rows: list[ScoreRow], verdicts: Iterable[VerdictRecord | InputError],
                max_calls: int = MAX_CALLS_PER_ROW) -> dict[str, Any]:
    """The compact data the page embeds (see the module docstring)."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i].method, natural_key(rows[i].task_id), rows[i].agent))
    rows = [rows[i] for i in order]
    position = {(r.task_id, r.agent, r.method): i for i, r in enumerate(rows)}
    calls: dict[int, list[list[Any]]] = defaultdict(list)
    dropped: dict[int, int] = defaultdict(int)
    unmatched = 0
    strings = _Strings()
    for rec in verdicts:
        if isinstance(rec, InputError):
            continue
        i = position.get((rec.task_id, rec.agent, rec.method))
        if i is None:
            unmatched += 1
            continue
        if len(calls[i]) >= max_calls:
            dropped[i] += 1
            continue
        calls[i].append([strings(rec.template), rec.label, rec.status, 1 if rec.cached else 0,
                         rec.input_tokens, rec.output_tokens, _num(rec.cost_usd, 8), _num(rec.latency_s, 4),
                         rec.error or "", rec.verdict, rec.inputs or {}, rec.reasoning_tokens])
    col: dict[str, list[Any]] = {k: [] for k in ("t", "a", "m", "st", "s", "cov", "n", "hit", "cost", "lat",
                                                 "wait", "err")}
    detail: list[str] = []
    call_text: list[str] = []
    for i, r in enumerate(rows):
        col["t"].append(strings(r.task_id))
        col["a"].append(strings(r.agent))
        col["m"].append(strings(r.method))
        col["st"].append(strings(r.status))
        col["s"].append(_num(r.score))
        col["cov"].append(_num(r.coverage, 4))
        col["n"].append(r.calls)
        col["hit"].append(r.cache_hits)
        col["cost"].append(_num(r.cost_usd, 8))
        # time at the judge and time only waiting for quota, apart (latency_s mixes them)
        col["lat"].append(_num(r.judge_s, 3))
        col["wait"].append(_num(r.quota_wait_s, 3))
        col["err"].append(len(r.errors))
        detail.append(json.dumps({
            "subscores": {k: _num(v) for k, v in r.subscores.items()},
            "errors": r.errors[:MAX_ERRORS_PER_ROW], "judged": r.judged, "expected": r.expected,
            "judge": r.judge, "tokens": [r.input_tokens, r.output_tokens, r.reasoning_tokens],
            "honest": {"cached_input_tokens": r.cached_input_tokens, "cost_usd_uncached": _num(r.cost_usd_uncached, 8),
                       "latency_s": _num(r.latency_s, 3), "score_sd": _num(r.score_sd),
                       "sample_scores": [_num(v) for v in r.sample_scores]},
            "details": _clip_details(r.details)}, ensure_ascii=False, separators=(",", ":"), default=str))
        call_text.append(json.dumps({"calls": calls.get(i, []), "dropped": dropped.get(i, 0)},
                                    ensure_ascii=False, separators=(",", ":"), default=str))
    return {"strings": strings.values, "rows": col, "detail": detail, "calls": call_text,
            "unmatched_verdicts": unmatched}


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2rem auto;max-width:1250px;
padding:0 1rem;color:#222;line-height:1.4}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin:1.2rem 0 .4rem}h3{font-size:1rem;margin:1rem 0 .3rem}
#filters{display:flex;gap:.6rem;flex-wrap:wrap;align-items:end;background:#f6f6f6;padding:.6rem;border-radius:4px}
#filters label{display:flex;flex-direction:column;font-size:.8rem;color:#444}
select,input{font:inherit;font-size:.9rem;padding:.15rem .3rem}
table{border-collapse:collapse;font-size:.85rem;margin:.4rem 0}
th,td{border:1px solid #ddd;padding:.2rem .45rem;text-align:left;vertical-align:top}
th{background:#f4f4f4;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums}
#rows tbody tr{cursor:pointer}#rows tbody tr:hover{background:#eef5ff}#rows tbody tr.open{background:#dbe9ff}
.st-ok{color:#1a7f37}.st-partial{color:#9a6700}.st-failed{color:#cf222e}.st-skipped{color:#777}
#panel{border:1px solid #ccd;border-radius:4px;padding:.6rem .9rem;margin-top:1rem}
details.call{border-top:1px solid #eee;padding:.25rem 0}details.call summary{cursor:pointer}
.tag{display:inline-block;font-size:.75rem;padding:0 .35rem;border-radius:3px;background:#eee;margin-left:.3rem}
.tag.cached{background:#ddf4ff}.tag.failed{background:#ffebe9}
pre{background:#f6f6f6;padding:.5rem;white-space:pre-wrap;word-break:break-word;font-size:.8rem;margin:.3rem 0}
.muted{color:#666;font-size:.85rem}button{font:inherit;font-size:.85rem}
"""

# The page script: filters, the row table (first PAGE matches, "show more"), and the
# panel of one row, drawn on demand. Everything is inserted as text nodes (report text
# and judge answers never become markup).
_JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const S = D.strings, R = D.rows, N = R.t.length, PAGE = 200;
const $ = (id) => document.getElementById(id);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "title") e.title = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
const fmt = (v, d = 3) => (v === null || v === undefined) ? "–" : (typeof v === "number" ? v.toFixed(d) : String(v));
const distinct = (col) => [...new Set(col)].map((i) => S[i]).sort();
function fillSelect(sel, values) {
  sel.append(el("option", {value: ""}, "all"));
  for (const v of values) sel.append(el("option", {value: v}, v));
}
fillSelect($("f-agent"), distinct(R.a));
fillSelect($("f-method"), distinct(R.m));
fillSelect($("f-status"), distinct(R.st));
let shown = PAGE, matches = [], openRow = -1;

function readHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  for (const k of ["agent", "method", "status", "task"]) {
    const f = $("f-" + k); const v = q.get(k) || "";
    if (f.tagName === "SELECT" && v && ![...f.options].some((o) => o.value === v)) continue;
    f.value = v;
  }
  return q.has("row") ? Number(q.get("row")) : -1;
}
function writeHash() {
  const q = new URLSearchParams();
  for (const k of ["agent", "method", "status", "task"]) { const v = $("f-" + k).value; if (v) q.set(k, v); }
  if (openRow >= 0) q.set("row", String(openRow));
  history.replaceState(null, "", "#" + q.toString());
}
function filter() {
  const a = $("f-agent").value, m = $("f-method").value, st = $("f-status").value;
  const t = $("f-task").value.trim().toLowerCase();
  const ai = a ? S.indexOf(a) : -1, mi = m ? S.indexOf(m) : -1, si = st ? S.indexOf(st) : -1;
  matches = [];
  for (let i = 0; i < N; i++) {
    if (a && R.a[i] !== ai) continue;
    if (m && R.m[i] !== mi) continue;
    if (st && R.st[i] !== si) continue;
    if (t && !S[R.t[i]].toLowerCase().includes(t)) continue;
    matches.push(i);
  }
  shown = PAGE;
  drawRows();
}
function drawRows() {
  const body = $("rows").tBodies[0];
  const frag = document.createDocumentFragment();
  for (const i of matches.slice(0, shown)) {
    const tr = el("tr", {"data-row": i, class: i === openRow ? "open" : ""},
      el("td", {}, S[R.t[i]]), el("td", {}, S[R.a[i]]), el("td", {}, S[R.m[i]]),
      el("td", {class: "n"}, fmt(R.s[i])), el("td", {class: "st-" + S[R.st[i]]}, S[R.st[i]]),
      el("td", {class: "n"}, fmt(R.cov[i], 2)), el("td", {class: "n"}, R.n[i]), el("td", {class: "n"}, R.hit[i]),
      el("td", {class: "n"}, R.cost[i] === null ? "unknown" : fmt(R.cost[i], 4)), el("td", {class: "n"}, fmt(R.lat[i], 2)),
      el("td", {class: "n"}, fmt(R.wait[i], 2)), el("td", {class: "n"}, R.err[i]));
    frag.append(tr);
  }
  body.replaceChildren(frag);
  $("count").textContent = `${matches.length} of ${N} rows` + (matches.length > shown ? `, first ${shown} shown` : "");
  $("more").hidden = matches.length <= shown;
}
function table(records) {
  const cols = [];
  for (const r of records) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
  const t = el("table", {}, el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", {}, c)))));
  const b = el("tbody");
  for (const r of records) b.append(el("tr", {}, ...cols.map((c) => el("td", {}, value(r[c])))));
  t.append(b);
  return t;
}
function value(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}
const isRecords = (v) => Array.isArray(v) && v.length > 0 && v.every((x) => x && typeof x === "object" && !Array.isArray(x));
function verdictView(v) {
  if (v === null || v === undefined) return el("p", {class: "muted"}, "no verdict");
  if (typeof v !== "object" || Array.isArray(v)) return el("pre", {}, JSON.stringify(v, null, 2));
  const box = el("div", {class: "verdict"});
  const scalars = Object.entries(v).filter(([, x]) => !isRecords(x));
  if (scalars.length) box.append(table([Object.fromEntries(scalars)]));
  for (const [k, x] of Object.entries(v)) if (isRecords(x)) box.append(el("h4", {}, k), table(x));
  return box;
}
function detailsView(details) {
  const box = el("div");
  for (const [k, v] of Object.entries(details)) {
    if (isRecords(v)) { box.append(el("h3", {}, `${k} (${v.length})`), table(v)); continue; }
    if (k === "pairs" && Array.isArray(v) && v.length) {
      box.append(el("h3", {}, `pairs (${v.length})`),
        table(v.map((p) => ({i: p[0], j: p[1], score: p[2], scored_by: p[3]}))));
      continue;
    }
  }
  const rest = Object.fromEntries(Object.entries(details).filter(([k, v]) => !isRecords(v) && k !== "pairs"));
  if (Object.keys(rest).length) box.append(el("h3", {}, "other details"), el("pre", {}, JSON.stringify(rest, null, 2)));
  return box;
}
function openPanel(i) {
  openRow = i;
  writeHash();
  for (const tr of $("rows").tBodies[0].rows) tr.classList.toggle("open", Number(tr.dataset.row) === i);
  const panel = $("panel");
  if (i < 0 || i >= N) { panel.hidden = true; return; }
  const det = JSON.parse(D.detail[i]), c = JSON.parse(D.calls[i]);
  const head = el("h2", {}, `task ${S[R.t[i]]} · ${S[R.a[i]]} · ${S[R.m[i]]}`);
  const facts = table([{score: R.s[i], status: S[R.st[i]], coverage: R.cov[i], judged: det.judged,
    expected: det.expected, calls: R.n[i], cache_hits: R.hit[i], input_tokens: det.tokens[0],
    output_tokens: det.tokens[1], reasoning_tokens: det.tokens[2] ?? 0,
    cost_usd: R.cost[i] === null ? "unknown" : R.cost[i], judge_s: R.lat[i], quota_wait_s: R.wait[i],
    judge: det.judge, ...(det.honest || {})}]);
  const parts = [head, facts];
  if (Object.keys(det.subscores).length) parts.push(el("h3", {}, "subscores"),
    table(Object.entries(det.subscores).map(([k, v]) => ({subscore: k, value: v}))));
  if (det.errors.length) parts.push(el("h3", {}, "errors"), el("pre", {class: "errors"}, det.errors.join("\n")));
  parts.push(detailsView(det.details));
  const calls = el("div", {id: "calls"});
  parts.push(el("h3", {}, `judge calls (${c.calls.length}${c.dropped ? `, ${c.dropped} more in verdicts.jsonl` : ""})`), calls);
  if (!c.calls.length) calls.append(el("p", {class: "muted"}, "no judge call recorded for this row"));
  c.calls.forEach((k, n) => {
    const [tpl, label, status, cached, tin, tout, cost, lat, error, verdict, inputs, reasoning] = k;
    const thought = reasoning ? ` (${reasoning} thinking)` : "";
    const price = cost === null ? "cost unknown" : `$${fmt(cost, 5)}`;
    const sum = el("summary", {}, `#${n + 1} ${S[tpl]}`, label ? ` · ${label}` : "",
      el("span", {class: "tag " + status}, status), cached ? el("span", {class: "tag cached"}, "cached") : null,
      el("span", {class: "muted"}, ` ${tin}+${tout}${thought} tokens · ${price} · ${fmt(lat, 2)}s`));
    const d = el("details", {class: "call", "data-template": S[tpl]}, sum);
    d.addEventListener("toggle", () => {
      if (!d.open || d.dataset.drawn) return;
      d.dataset.drawn = "1";
      if (error) d.append(el("pre", {class: "errors"}, error));
      if (inputs && Object.keys(inputs).length) d.append(el("h4", {}, "judged"),
        table(Object.entries(inputs).map(([name, text]) => ({variable: name, value: text}))));
      d.append(el("h4", {}, "verdict"), verdictView(verdict));
    });
    calls.append(d);
  });
  panel.replaceChildren(...parts);
  panel.hidden = false;
}
$("rows").tBodies[0].addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr"); if (tr) openPanel(Number(tr.dataset.row));
});
for (const k of ["agent", "method", "status"]) $("f-" + k).addEventListener("change", () => { filter(); writeHash(); });
$("f-task").addEventListener("input", () => { filter(); writeHash(); });
$("more").addEventListener("click", () => { shown += PAGE; drawRows(); });
window.addEventListener("hashchange", () => { const r = readHash(); filter(); if (r >= 0) openPanel(r); });
const first = readHash();
filter();
if (first >= 0) openPanel(first);
window.viewerReady = performance.now();
"""


# Above this many score rows, viewer.html is a pointer to `drscore view` (a local server
# paging rows from an index) instead of one page carrying every row and call.
MAX_VIEWER_ROWS = 10_000


def render_viewer_pointer(run_path: str, rows: int, *, title: str | None = None,
                          report_href: str | None = "report.html") -> str:
    """The page written instead of the viewer for a run of more than MAX_VIEWER_ROWS rows."""
    title = title or f"drscore viewer: {run_path}"
    back = f'<p><a href="{html.escape(report_href)}">back to the report</a></p>' if report_href else ""
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<link rel="icon" href="data:,">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p id="pointer">This run has {rows:,} score rows, more than one page can hold usefully '
        f"(the static viewer stops at {MAX_VIEWER_ROWS:,}). Browse them with the local viewer, "
        "which pages, sorts and filters every row and shows each judge call:</p>",
        f"<pre>drscore view {html.escape(run_path)}</pre>",
        back,
        "</body></html>",
    ]) + "\n"


def render_viewer(run: RunDir, verdicts: Iterable[VerdictRecord | InputError], *, title: str | None = None,
                  report_href: str | None = "report.html", max_calls: int = MAX_CALLS_PER_ROW) -> str:
    """The viewer page as one string."""
    data = viewer_data(list(run.scores), verdicts, max_calls=max_calls)
    title = title or f"drscore viewer: {run.path}"
    back = f'<a href="{html.escape(report_href)}">back to the report</a> · ' if report_href else ""
    note = ""
    if data["unmatched_verdicts"]:
        note = (f'<p class="muted">{data["unmatched_verdicts"]} verdict(s) in verdicts.jsonl belong to no '
                "score row (e.g. a run stopped before the row was written) and are not shown.</p>")
    if run.ledger:
        note += f'<p class="muted" id="money">{html.escape(money_text(run.ledger))}</p>'
    csp = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">{back}One line per report and method; click one to see its judge calls. '
        f'<span id="holds">This page holds {len(data["detail"]):,} rows.</span></p>',
        note,
        '<div id="filters">'
        '<label>agent<select id="f-agent"></select></label>'
        '<label>method<select id="f-method"></select></label>'
        '<label>status<select id="f-status"></select></label>'
        '<label>task<input id="f-task" type="search" placeholder="task id"></label>'
        '<span id="count" class="muted"></span></div>',
        '<table id="rows"><thead><tr><th>task</th><th>agent</th><th>method</th><th>score</th><th>status</th>'
        "<th>coverage</th><th>calls</th><th>cache hits</th><th>cost $</th><th>judge s</th><th>wait s</th><th>errors</th>"
        "</tr></thead><tbody></tbody></table>",
        '<button id="more" hidden>show more</button>',
        '<section id="panel" hidden></section>',
        f'<script type="application/json" id="data">{_script_json(data)}</script>',
        f"<script>{_JS}</script>",
        "</body></html>",
    ]) + "\n"
