// viewer.html's script, inlined by engine/reporting/viewer.py: filters, the row table (first
// PAGE matches, "show more"), and the panel of one row, drawn on demand. Everything is
// inserted as text nodes (report text and judge answers never become markup).
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
    const [tpl, label, status, cached, tin, tout, cost, lat, error, verdict, inputs, reasoning, judgeS, waitS] = k;
    const thought = reasoning ? ` (${reasoning} thinking)` : "";
    const price = cost === null ? "cost unknown" : `$${fmt(cost, 5)}`;
    // time at the judge and waiting apart; a record without them (older drscore) has the mixed latency only
    const time = judgeS || waitS || !lat ? `at the judge ${fmt(judgeS, 2)}s · waiting ${fmt(waitS, 2)}s`
      : `${fmt(lat, 2)}s (judge and waiting together)`;
    const sum = el("summary", {}, `#${n + 1} ${S[tpl]}`, label ? ` · ${label}` : "",
      el("span", {class: "tag " + status}, status), cached ? el("span", {class: "tag cached"}, "cached") : null,
      el("span", {class: "muted"}, ` ${tin}+${tout}${thought} tokens · ${price} · ${time}`));
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
