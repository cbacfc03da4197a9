// `drscore view`'s page: rows, a row's judge calls as transcripts, agents side by side on
// one task, the decisions with their pair view, and charts. It talks only to its own
// server (/api/...) and writes every value as text (textContent), never as markup: report
// text, judge answers and page text cannot run. The view lives in the URL's fragment
// (viewlib.mjs: readState/writeState), so a link or a reload gives the same view.
"use strict";
import {
  chars, decisionMatrix, detailTables, extent, fmt, fmtCost, fmtInterval, fmtP, fmtSeconds, fmtSigned, isLong, messagesOf, noiseShare, readState, rowsQuery, segments, variableLabel, verdictTables, writeState,
} from "./viewlib.mjs";

const PAGE = 50;
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const COLS = [["task", "task"], ["agent", "agent"], ["method", "method"], ["status", "status"], ["score", "score"],
  ["coverage", "coverage"], ["calls", "calls"], ["cache_hits", "cache hits"], ["input_tokens", "input tok"],
  ["cached_input_tokens", "cached tok"], ["output_tokens", "output tok"], ["reasoning_tokens", "reasoning tok"],
  ["cost_usd", "cost $"], ["judge_s", "at judge s"], ["quota_wait_s", "waiting s"], ["errors", "errors"]];
const TEXT = new Set(["task", "agent", "method", "status"]);

let state = readState(location.hash);
let meta = {rows: -1, agents: [], methods: [], statuss: [], colours: {}, prompt_caches: {searched: [], opened: []}};
const seq = {rows: 0, panel: 0, task: 0, pair: 0, decisions: 0, charts: 0};

// ------------------------------------------------------------------ small DOM helpers

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}
function button(text, onClick, cls) {
  const b = el("button", text, cls);
  b.type = "button";
  b.addEventListener("click", (ev) => { ev.stopPropagation(); onClick(ev); });
  return b;
}
function colour(agent) { return meta.colours[agent] || "#888"; }
function swatch(agent) {
  const s = el("span", null, "swatch");
  s.dataset.agent = agent;
  s.style.background = colour(agent);
  return s;
}
function agentLabel(agent) {
  const span = el("span", null, "agent");
  span.append(swatch(agent), document.createTextNode(agent));
  return span;
}
function table(spec) {
  const t = el("table", null, "dtable");
  if (spec.kind) t.dataset.kind = spec.kind;
  const tr = t.createTHead().insertRow();
  for (const c of spec.columns) tr.appendChild(el("th", c));
  const body = t.createTBody();
  for (const r of spec.rows) {
    const row = body.insertRow();
    r.forEach((v) => row.appendChild(el("td", typeof v === "number" ? fmt(v, 4) : v ?? "", typeof v === "number" ? "n" : "")));
  }
  return t;
}
function tables(parent, specs) {
  for (const spec of specs) {
    const box = el("div", null, "tablebox");
    box.appendChild(el("h5", spec.title));
    box.appendChild(table(spec));
    parent.appendChild(box);
  }
}
async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `${url}: ${r.status}`);
  return body;
}
function show(view) {
  for (const v of ["rows", "task", "pair", "decisions", "charts"]) $(v + "-view").hidden = v !== view;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("on", b.dataset.view === view);
}
function failed(parent, err) { parent.appendChild(el("p", String(err.message || err), "error")); }

// ------------------------------------------------------------------ navigation

/** Change the view: the new state goes into the URL (a new history entry when `push`),
 *  then the page draws what changed. */
function go(changes, push = true) {
  const before = state;
  state = {...state, ...changes};
  writeURL(push);
  render(before);
}
/** Record a change that is already on screen (a call opened) in the URL only. */
function remember(changes) {
  state = {...state, ...changes};
  writeURL(false);
}
// Replacing the URL is coalesced: browsers drop history updates past a rate (Chromium:
// 200 in 10 s), and opening calls one after another must not lose the last one.
let replaceTimer = 0;
function writeURL(push) {
  clearTimeout(replaceTimer);
  if (push) { history.pushState(null, "", writeState(state) || "#"); return; }
  replaceTimer = setTimeout(() => history.replaceState(null, "", writeState(state) || "#"), 60);
}
let drawn = null;  // the state last drawn
window.addEventListener("popstate", () => { const before = state; state = readState(location.hash); render(before); });
window.addEventListener("hashchange", () => { const before = state; state = readState(location.hash); render(before); });

const ROW_KEYS = ["ot", "oa", "om", "call"];
function render(before) {
  show(state.view);
  const same = (keys) => before && drawn && before.view === state.view
    && Object.keys(state).filter((k) => !keys.includes(k)).every((k) => state[k] === before[k]);
  if (state.view === "rows") {
    if (same(ROW_KEYS) && state.ot) openRow();        // only the open row changed
    else if (same(["call"])) { /* a call opened: already on screen */ }
    else loadRows();
  } else if (state.view === "task") loadTask();
  else if (state.view === "pair") loadPair();
  else if (state.view === "decisions") loadDecisions();
  else if (state.view === "charts") loadCharts();
  drawn = state;
}

// ------------------------------------------------------------------ rows

function head() {
  const tr = $("head"); tr.textContent = "";
  for (const [key, label] of COLS) {
    const th = el("th", label + (state.sort === key ? (state.desc ? " ▼" : " ▲") : ""), TEXT.has(key) ? "l" : "");
    th.dataset.sort = key;
    th.addEventListener("click", () => go(state.sort === key ? {desc: !state.desc, offset: 0}
                                                              : {sort: key, desc: !TEXT.has(key), offset: 0}, false));
    tr.appendChild(th);
  }
}
function syncFilters() {
  for (const f of ["agent", "method", "status"]) $("f-" + f).value = state[f];
  $("f-task-mode").value = state.tmode;
  if (document.activeElement !== $("f-task")) $("f-task").value = state.task;
}
async function loadRows() {
  const mine = ++seq.rows;
  document.body.dataset.ready = "0";  // until this page of rows is drawn (tests and benches wait for "1")
  head();
  syncFilters();
  let data;
  try {
    data = await getJSON("api/rows?" + rowsQuery(state, PAGE));
  } catch (err) {
    $("body").textContent = "";
    $("count").textContent = String(err.message || err);
    return;
  }
  if (mine !== seq.rows) return;
  const body = $("body"); body.textContent = "";
  for (const r of data.rows) {
    const tr = el("tr"); tr.dataset.id = r.id;
    for (const [key] of COLS) {
      const td = el("td", key === "agent" ? null : key === "cost_usd" ? (r[key] === null ? "–" : Number(r[key]).toFixed(6))
        : fmt(r[key]), TEXT.has(key) ? "l" : "");
      if (key === "agent") td.appendChild(agentLabel(r.agent));
      if (key === "status") td.classList.add("st-" + r.status);
      tr.appendChild(td);
    }
    if (r.task === state.ot && r.agent === state.oa && r.method === state.om) tr.classList.add("open");
    tr.addEventListener("click", () => go({ot: r.task, oa: r.agent, om: r.method, call: -1}));
    body.appendChild(tr);
  }
  const last = Math.min(state.offset + data.rows.length, data.total);
  $("count").textContent = data.total ? `rows ${state.offset + 1}–${last} of ${data.total}` : "no rows";
  $("prev").disabled = state.offset <= 0; $("next").disabled = last >= data.total;
  document.body.dataset.ready = "1";
  if (window.firstPageMs === undefined) window.firstPageMs = performance.now();  // benches read it
  if (state.ot) openRow(); else { $("panel").hidden = true; $("panel").textContent = ""; }
}

function factLine(parent, parts, cls = "facts") {
  parent.appendChild(el("p", parts.filter(Boolean).join(" · "), cls));
}

async function openRow() {
  const mine = ++seq.panel;
  const p = $("panel");
  let d;
  try {
    d = await getJSON("api/row?" + new URLSearchParams({task: state.ot, agent: state.oa, method: state.om}));
  } catch (err) {
    if (mine !== seq.panel) return;
    p.hidden = false; p.textContent = ""; failed(p, err);
    return;
  }
  await metaReady.catch(() => {});
  if (mine !== seq.panel) return;
  for (const tr of document.querySelectorAll("#body tr")) tr.classList.toggle("open", Number(tr.dataset.id) === d.id);
  p.textContent = ""; p.hidden = false; p.dataset.id = d.id;
  const r = d.row;
  const h = el("h3");
  h.append(`${r.task_id} · `, agentLabel(r.agent), ` · ${r.method}: score ${fmt(r.score, 4)} (${r.status})`);
  p.appendChild(h);
  const tools = el("div", null, "tools");
  tools.append(button("side by side: every agent on this task", () => go({view: "task", st: r.task_id, sm: ""}), "side"),
               button("close", () => go({ot: "", oa: "", om: "", call: -1}), "close"));
  p.appendChild(tools);
  factLine(p, [`coverage ${fmt(r.coverage, 3)} (${r.judged}/${r.expected} judged)`,
               `at the judge ${fmtSeconds(r.judge_s)}`, `waiting ${fmtSeconds(r.quota_wait_s)}`,
               r.shared_wait_s > 0 && `waiting for shared calls ${fmtSeconds(r.shared_wait_s)}`,
               `tokens in ${fmt(r.input_tokens)} (cached ${fmt(r.cached_input_tokens || 0)})`,
               `out ${fmt(r.output_tokens)} (reasoning ${fmt(r.reasoning_tokens || 0)})`,
               `${r.calls} calls, ${r.cache_hits} from the cache`,
               `cost ${fmtCost(r.cost_usd)} (alone ${fmtCost(r.cost_usd_uncached)})`, r.judge && `judge ${r.judge}`]);
  if (r.errors && r.errors.length) {
    p.appendChild(el("h4", "errors"));
    const ul = el("ul", null, "errors");
    for (const e of r.errors) ul.appendChild(el("li", e));
    p.appendChild(ul);
  }
  const subs = Object.entries(r.subscores || {});
  if (subs.length) {
    tables(p, [{title: "subscores", columns: ["subscore", "value", "judge sd"],
                rows: subs.map(([k, v]) => [k, v ?? "–", (r.subscore_sd || {})[k] ?? ""]), kind: "subscores"}]);
  }
  if (r.sample_scores && r.sample_scores.length > 1) {
    factLine(p, [`judge samples: ${r.sample_scores.map((v) => fmt(v, 3)).join(", ")}`, `sd ${fmt(r.score_sd, 4)}`]);
  }
  const detail = el("div", null, "details");
  tables(detail, detailTables(r, d.calls));
  p.appendChild(detail);
  p.appendChild(el("h4", `judge calls (${d.calls.length})`));
  if (!d.calls.some((c) => c.prompt) && d.calls.length) {
    const caches = meta.prompt_caches;
    p.appendChild(el("p", caches.opened.length
      ? "These calls are not in the judge cache (offline judge, or answered elsewhere): the inputs verdicts.jsonl "
        + "recorded are shown instead."
      : `No judge cache found (looked in ${caches.searched.join(", ") || "nothing"}): the inputs verdicts.jsonl `
        + "recorded are shown instead of the full prompts; start drscore view with --cache DIR.", "note"));
  }
  d.calls.forEach((c, i) => p.appendChild(callBox(c, i)));
  if (state.call >= 0) {
    const box = p.querySelector(`details.call[data-index="${state.call}"]`);
    if (box) { box.open = true; box.scrollIntoView({block: "nearest"}); }
  }
}

function callBox(c, i) {
  const box = el("details", null, "call");
  box.dataset.index = i; box.dataset.template = c.template; box.dataset.status = c.status;
  const sum = el("summary");
  sum.append(el("b", `call ${i + 1}`), ` ${c.template}${c.label ? " · " + c.label : ""} `,
             el("span", c.status, c.status === "ok" ? "tag ok" : "tag failed"));
  if (c.cached) sum.appendChild(el("span", "cached", "tag cached"));
  if (c.judge_sample) sum.appendChild(el("span", `sample ${c.judge_sample}`, "tag"));
  sum.appendChild(el("span", ` ${fmtSeconds(c.judge_s ?? c.latency_s)} · ${fmtCost(c.cost_usd)}`, "muted"));
  box.appendChild(sum);
  let drawn = false;
  box.addEventListener("toggle", () => {
    if (box.open && !drawn) { drawn = true; box.appendChild(transcript(c)); }
    if (box.open && state.call !== i) remember({call: i});
  });
  return box;
}

/** One judge call as a conversation: its facts, the messages (variables the template
 *  filled marked), the model's reasoning, and the answer beside the verdict. */
function transcript(c) {
  const t = el("div", null, "call-body");
  const timing = c.judge_s !== undefined
    ? [`at the judge ${fmtSeconds(c.judge_s)}`, `waiting ${fmtSeconds(c.quota_wait_s)}`,
       c.shared_wait_s > 0 && `waiting for the same call sent by another item ${fmtSeconds(c.shared_wait_s)}`]
    : [`${fmtSeconds(c.latency_s)} (at the judge and waiting together: recorded by an older drscore)`];
  factLine(t, [...timing, `input ${fmt(c.input_tokens)} tokens (cached ${fmt(c.cached_input_tokens || 0)})`,
               `output ${fmt(c.output_tokens)} (reasoning ${fmt(c.reasoning_tokens || 0)})`,
               `cost ${fmtCost(c.cost_usd)}`, c.prompt && c.prompt.model && `model ${c.prompt.model}`]);
  if (c.status !== "ok") {
    const f = el("div", null, "failure");
    f.appendChild(el("p", `failed: ${c.error || "no reason recorded"}`, "error"));
    const attempts = Array.isArray(c.attempts) ? c.attempts : [];
    if (attempts.length) {
      f.appendChild(table({title: "attempts", columns: ["attempt", "outcome", "at the judge", "detail"], kind: "attempts",
                           rows: attempts.map((a, n) => [n + 1, a.outcome, fmtSeconds(a.seconds), a.detail || ""])}));
    } else {
      f.appendChild(el("p", "attempts: not recorded (the call failed before it was sent, or by an older drscore)", "muted"));
    }
    t.appendChild(f);
  } else if (Array.isArray(c.attempts) && c.attempts.length > 1) {
    t.appendChild(table({title: "attempts", columns: ["attempt", "outcome", "at the judge", "detail"], kind: "attempts",
                         rows: c.attempts.map((a, n) => [n + 1, a.outcome, fmtSeconds(a.seconds), a.detail || ""])}));
  }
  const conv = el("div", null, "transcript");
  const messages = messagesOf(c.prompt);
  if (messages.length) {
    for (const m of messages) conv.appendChild(message(m.role, m.content, m.marks));
  } else {
    const rec = el("div", null, "msg");
    rec.dataset.role = "inputs";
    rec.appendChild(el("div", "recorded inputs (the full prompt is not in a judge cache on this machine)", "msg-head"));
    rec.appendChild(table({title: "", columns: ["variable", "value"], kind: "inputs",
                           rows: Object.entries(c.inputs || {}).map(([k, v]) => [k, v])}));
    conv.appendChild(rec);
  }
  if (c.reasoning) conv.appendChild(message("reasoning", c.reasoning, [], "reasoning (returned by the endpoint)"));
  const turn = el("div", null, "turn");
  const answer = c.prompt ? c.prompt.answer : null;
  if (answer !== null && answer !== undefined) turn.appendChild(message("assistant", answer, [], "answer (as the judge sent it)"));
  else turn.appendChild(el("div", c.status === "ok" ? "answer: not in a judge cache on this machine" : "no answer", "msg muted"));
  const v = el("div", null, "verdict");
  v.appendChild(el("div", "verdict (decoded)", "msg-head"));
  tables(v, verdictTables(c.verdict));
  if (c.verdict === null || c.verdict === undefined) v.appendChild(el("p", "none", "muted"));
  turn.appendChild(v);
  conv.appendChild(turn);
  t.appendChild(conv);
  return t;
}

function message(role, content, marks, title) {
  const m = el("div", null, "msg");
  m.dataset.role = role;
  m.appendChild(el("div", `${title || role} · ${chars(content.length)}`, "msg-head"));
  const text = el("div", null, "msg-text");
  for (const s of segments(content, marks)) {
    if (s.mark === null) { text.appendChild(document.createTextNode(s.text)); continue; }
    const mark = el("mark", s.text, "var");
    mark.dataset.var = s.mark;
    mark.title = `${variableLabel(s.mark)} (\${${s.mark}}, ${chars(s.text.length)})`;
    text.appendChild(el("span", variableLabel(s.mark), "var-label"));
    text.appendChild(mark);
  }
  m.appendChild(text);
  if (isLong(content)) {
    text.classList.add("folded");
    m.appendChild(button(`show all ${chars(content.length)}`, (ev) => {
      const folded = text.classList.toggle("folded");
      ev.target.textContent = folded ? `show all ${chars(content.length)}` : "fold";
    }, "unfold"));
  }
  return m;
}

// ------------------------------------------------------------------ side by side

async function loadTask() {
  const mine = ++seq.task;
  const box = $("task-view");
  box.textContent = "";
  const h = el("h2", `task ${state.st}: every agent side by side`);
  box.appendChild(h);
  box.appendChild(button("back to the rows", () => go({view: "rows"}), "back"));
  let d;
  try {
    d = await getJSON("api/task?" + new URLSearchParams(state.sm ? {task: state.st, method: state.sm} : {task: state.st}));
  } catch (err) { failed(box, err); return; }
  if (mine !== seq.task) return;
  if (!d.rows.length) box.appendChild(el("p", "No rows for this task.", "note"));
  const methods = [...new Set(d.rows.map((r) => r.row.method))];
  for (const method of methods) {
    const sec = el("section", null, "method");
    sec.dataset.method = method;
    sec.appendChild(el("h3", method));
    const pairs = d.pairs.filter((p) => p.method === method);
    if (pairs.length) {
      const t = el("table", null, "pairs");
      const hr = t.createTHead().insertRow();
      for (const c of ["pair", "score A", "score B", "difference on this task (A − B)"]) hr.appendChild(el("th", c));
      const scores = Object.fromEntries(d.rows.filter((r) => r.row.method === method).map((r) => [r.row.agent, r.row.score]));
      for (const p of pairs) {
        const tr = t.createTBody().insertRow();
        const name = el("td", null, "l");
        name.append(agentLabel(p.a), " − ", agentLabel(p.b));
        tr.append(name, el("td", fmt(scores[p.a], 4), "n"), el("td", fmt(scores[p.b], 4), "n"),
                  el("td", fmtSigned(p.delta, 4), "n delta"));
        tr.dataset.a = p.a; tr.dataset.b = p.b;
        tr.addEventListener("click", () => go({view: "pair", pm: method, pa: p.a, pb: p.b}));
      }
      sec.appendChild(t);
    }
    const grid = el("div", null, "columns");
    for (const r of d.rows.filter((x) => x.row.method === method)) grid.appendChild(agentColumn(r));
    sec.appendChild(grid);
    box.appendChild(sec);
  }
  if (window.taskViewMs === undefined) window.taskViewMs = performance.now();
  box.dataset.ready = "1";
}

function agentColumn(r) {
  const row = r.row;
  const col = el("div", null, "agent-col");
  col.dataset.agent = row.agent;
  col.style.borderTopColor = colour(row.agent);
  const h = el("h4");
  h.append(agentLabel(row.agent));
  col.appendChild(h);
  col.appendChild(el("p", `score ${fmt(row.score, 4)} · ${row.status}`, "score st-" + row.status));
  factLine(col, [`at the judge ${fmtSeconds(row.judge_s)}`, `waiting ${fmtSeconds(row.quota_wait_s)}`,
                 `cost ${fmtCost(row.cost_usd)}`]);
  col.appendChild(button("open this row", () => go({view: "rows", ot: row.task_id, oa: row.agent, om: row.method, call: -1}),
                         "open"));
  const subs = Object.entries(row.subscores || {});
  if (subs.length) col.appendChild(table({title: "", columns: ["subscore", "value"], rows: subs, kind: "subscores"}));
  for (const e of row.errors || []) col.appendChild(el("p", e, "error"));
  r.calls.forEach((c, i) => {
    const a = el("div", null, "answer-box");
    const head = el("div", `${c.template}${c.label ? " · " + c.label : ""} · ${c.status}`, "msg-head");
    head.appendChild(button("open", () => go({view: "rows", ot: row.task_id, oa: row.agent, om: row.method, call: i}),
                            "open-call"));
    a.appendChild(head);
    tables(a, verdictTables(c.verdict));
    const text = c.prompt && c.prompt.answer;
    if (text) {
      const ans = el("div", text, "msg-text answer" + (isLong(text) ? " folded" : ""));
      a.appendChild(ans);
    }
    col.appendChild(a);
  });
  return col;
}

// ------------------------------------------------------------------ pair view

async function loadPair() {
  const mine = ++seq.pair;
  const box = $("pair-view");
  box.textContent = "";
  const h = el("h2");
  h.append(agentLabel(state.pa), " vs ", agentLabel(state.pb), ` · ${state.pm}`);
  box.appendChild(h);
  box.appendChild(button("back to the decisions", () => go({view: "decisions"}), "back"));
  let d;
  try {
    d = await getJSON("api/pair?" + new URLSearchParams({method: state.pm, a: state.pa, b: state.pb, limit: "50"}));
  } catch (err) { failed(box, err); return; }
  if (mine !== seq.pair) return;
  const dec = d.decision;
  if (dec) {
    const sign = dec.a === state.pa ? 1 : -1;
    const ci = Array.isArray(dec.ci) ? (sign > 0 ? dec.ci : [-dec.ci[1], -dec.ci[0]]) : null;
    factLine(box, [`mean difference ${state.pa} − ${state.pb}: ${fmtSigned(dec.delta === null ? null : sign * dec.delta, 4)} `
                   + fmtInterval(ci, 4),
                   `p ${fmtP(dec.p_holm)} (Holm)`, `${dec.n} shared tasks`, dec.significant ? "the difference holds" : "not significant"],
             "facts decision");
  }
  box.appendChild(el("p", `The ${d.tasks.length} of ${d.n} shared tasks where the two differ most (largest |A − B| first).`, "muted"));
  const t = el("table", null, "pair-tasks");
  t.id = "pair-tasks";
  const hr = t.createTHead().insertRow();
  for (const c of ["task", state.pa, state.pb, "A − B", ""]) hr.appendChild(el("th", c));
  const body = t.createTBody();
  for (const x of d.tasks) {
    const tr = body.insertRow();
    tr.dataset.task = x.task;
    const tools = el("td", null, "l");
    tools.append(button("side by side", () => go({view: "task", st: x.task, sm: state.pm}), "side"),
                 button(`open ${state.pa}`, () => go({view: "rows", ot: x.task, oa: state.pa, om: state.pm, call: -1}), "open-a"),
                 button(`open ${state.pb}`, () => go({view: "rows", ot: x.task, oa: state.pb, om: state.pm, call: -1}), "open-b"));
    tr.append(el("td", x.task, "l"), el("td", fmt(x.a, 4), "n"), el("td", fmt(x.b, 4), "n"),
              el("td", fmtSigned(x.delta, 4), "n delta"), tools);
  }
  box.appendChild(t);
  box.dataset.ready = "1";
}

// ------------------------------------------------------------------ decisions

async function loadDecisions() {
  const mine = ++seq.decisions;
  const box = $("decisions-view");
  box.textContent = "";
  box.appendChild(el("h2", "Decisions: paired differences"));
  box.appendChild(el("p", "Each cell: row agent minus column agent, the mean over the tasks both scored, with its 95% "
    + "bootstrap interval and the p-value adjusted over the method's pairs (Holm). Shaded: the difference holds. "
    + "Click a cell for the tasks where the two differ most.", "muted"));
  const note = el("p", "computing…", "muted");
  box.appendChild(note);
  let d;
  try { d = await getJSON("api/decisions"); } catch (err) { failed(box, err); return; }
  if (mine !== seq.decisions) return;
  note.remove();
  if (!Object.keys(d).length) box.appendChild(el("p", "No method has two comparable agents.", "note"));
  for (const [method, dec] of Object.entries(d)) {
    const sec = el("section", null, "decision");
    sec.dataset.method = method;
    sec.appendChild(el("h3", method));
    const {agents, cells} = decisionMatrix(dec);
    const t = el("table", null, "matrix");
    const hr = t.createTHead().insertRow();
    hr.appendChild(el("th", "row − column", "l"));
    for (const a of agents) { const th = el("th"); th.appendChild(agentLabel(a)); hr.appendChild(th); }
    const body = t.createTBody();
    agents.forEach((a, i) => {
      const tr = body.insertRow();
      const th = el("th", null, "l"); th.appendChild(agentLabel(a)); tr.appendChild(th);
      agents.forEach((b, j) => {
        const c = cells[i][j];
        const td = el("td", null, "cell");
        if (c) {
          td.dataset.a = a; td.dataset.b = b;
          if (c.delta === null) td.textContent = "no shared task";
          else {
            td.append(el("span", fmtSigned(c.delta, 3), "delta"), " ", el("span", fmtInterval(c.ci, 3), "ci"),
                      el("br"), el("small", `p ${fmtP(c.p_holm)} · n ${c.n}`));
            if (c.significant) td.classList.add("sig");
          }
          td.addEventListener("click", () => go({view: "pair", pm: method, pa: a, pb: b}));
        }
        tr.appendChild(td);
      });
    });
    sec.appendChild(t);
    if (dec.p_first) {
      const first = Object.entries(dec.p_first).sort((x, y) => y[1] - x[1]);
      sec.appendChild(table({title: "", columns: ["agent", "P(ranks first)"], kind: "p-first",
                             rows: first.map(([a, v]) => [a, v])}));
      sec.appendChild(el("p", `P(ranks first): over the ${dec.first_tasks} tasks every agent scored, from the same resamples.`, "muted"));
    }
    const share = noiseShare(dec);
    sec.appendChild(el("p", dec.samples > 1 && share
      ? `Judge noise (${dec.samples} samples per report): ${share} of the variance of the per-task differences.`
      : "One judge sample per report: the judge's noise is inside the spread between tasks (run with --samples K to measure it).",
      "noise"));
    for (const [agent, why] of Object.entries(dec.unranked || {})) sec.appendChild(el("p", `not compared: ${agent} (${why})`, "note"));
    box.appendChild(sec);
  }
  box.dataset.ready = "1";
}

// ------------------------------------------------------------------ charts

async function loadCharts() {
  const mine = ++seq.charts;
  const box = $("charts-view");
  box.textContent = "";
  const pick = el("select"); pick.id = "c-method";
  for (const m of meta.methods) pick.appendChild(el("option", m)).value = m;
  const method = state.cm || meta.methods[0] || "";
  pick.value = method;
  pick.addEventListener("change", () => go({cm: pick.value}, false));
  const label = el("label", "method ");
  label.appendChild(pick);
  box.appendChild(label);
  if (!method) { box.appendChild(el("p", "No rows.", "note")); return; }
  let d;
  try { d = await getJSON("api/scores?" + new URLSearchParams({method})); } catch (err) { failed(box, err); return; }
  if (mine !== seq.charts) return;
  const agents = Object.keys(d.counts).sort();
  box.appendChild(legend(agents));
  box.appendChild(el("h3", "score distribution per agent"));
  box.appendChild(distribution(d, agents));
  const tasks = Object.keys(d.tasks);
  box.appendChild(el("h3", d.tasks_total > tasks.length ? `scores per task (the first ${tasks.length} of `
    + `${d.tasks_total} tasks, in task order)` : "scores per task"));
  box.appendChild(perTask(d.tasks, tasks, agents));
  box.dataset.ready = "1";
}

function legend(agents) {
  const l = el("div", null, "legend");
  for (const a of agents) l.appendChild(agentLabel(a));
  return l;
}

/** Each agent's histogram (counts the server binned over one range), one row per agent. */
function distribution(d, agents) {
  const [lo, hi] = d.range;
  const bins = d.bins, W = 640, rowH = 46, left = 150, right = 20;
  const s = svg("svg", {width: W, height: agents.length * rowH + 30, class: "hist", role: "img"});
  const x = (v) => left + (v - lo) / (hi - lo) * (W - left - right);
  agents.forEach((a, k) => {
    const counts = d.counts[a];
    const top = Math.max(1, ...counts);
    const y0 = k * rowH + rowH - 6;
    const name = svg("text", {x: left - 6, y: y0 - 12, "text-anchor": "end", class: "lab"});
    name.textContent = a;
    s.appendChild(name);
    counts.forEach((c, i) => {
      if (!c) return;
      const h = (rowH - 12) * c / top;
      const r = svg("rect", {x: x(lo + i * (hi - lo) / bins) + 0.5, y: y0 - h, width: Math.max(1, (W - left - right) / bins - 1),
                             height: h, fill: colour(a)});
      r.appendChild(svg("title")).textContent = `${a}: ${c} reports`;
      s.appendChild(r);
    });
    s.appendChild(svg("line", {x1: left, x2: W - right, y1: y0, y2: y0, class: "axis"}));
  });
  const yAxis = agents.length * rowH + 14;
  for (const v of [lo, (lo + hi) / 2, hi]) {
    const t = svg("text", {x: x(v), y: yAxis, "text-anchor": "middle", class: "tick"});
    t.textContent = fmt(v, 2);
    s.appendChild(t);
  }
  return s;
}

function perTask(byTask, tasks, agents) {
  const values = tasks.flatMap((t) => Object.values(byTask[t]));
  const [lo, hi] = extent(values);
  const W = Math.max(640, 40 + tasks.length * 14), H = 260, left = 50, bottom = 60, top = 10;
  const s = svg("svg", {width: W, height: H, class: "pertask", role: "img"});
  const x = (i) => left + (i + 0.5) * (W - left - 10) / Math.max(1, tasks.length);
  const y = (v) => top + (hi - v) / (hi - lo) * (H - top - bottom);
  for (const v of [lo, (lo + hi) / 2, hi]) {
    s.appendChild(svg("line", {x1: left, x2: W - 10, y1: y(v), y2: y(v), class: "grid"}));
    const t = svg("text", {x: left - 4, y: y(v) + 4, "text-anchor": "end", class: "tick"});
    t.textContent = fmt(v, 2);
    s.appendChild(t);
  }
  tasks.forEach((task, i) => {
    if (tasks.length <= 40 || i % Math.ceil(tasks.length / 40) === 0) {
      const t = svg("text", {x: x(i), y: H - bottom + 12, transform: `rotate(60 ${x(i)} ${H - bottom + 12})`, class: "tick"});
      t.textContent = task.length > 12 ? task.slice(0, 11) + "…" : task;
      s.appendChild(t);
    }
    for (const a of agents) {
      const v = byTask[task][a];
      if (typeof v !== "number") continue;
      const dot = svg("circle", {cx: x(i), cy: y(v), r: 4, fill: colour(a), class: "dot"});
      dot.appendChild(svg("title")).textContent = `task ${task} · ${a}: ${fmt(v, 4)}`;
      dot.addEventListener("click", () => go({view: "task", st: task, sm: state.cm || meta.methods[0]}));
      s.appendChild(dot);
    }
  });
  return s;
}

// ------------------------------------------------------------------ start

async function loadMeta(first) {
  const m = await getJSON("api/meta");
  $("state").textContent = `${m.rows} rows · ${m.calls} judge calls · run ${m.state}`
    + (m.money ? ` · ${m.money}` : "") + (m.index_note ? ` · ${m.index_note}` : "");
  const changed = meta.rows >= 0 && m.rows !== meta.rows;
  meta = m;
  if (first) {
    for (const [f, values] of [["agent", m.agents], ["method", m.methods], ["status", m.statuss]]) {
      const s = $("f-" + f); s.textContent = ""; s.appendChild(el("option", "all")).value = "";
      for (const v of values) s.appendChild(el("option", v)).value = v;
    }
    syncFilters();
  }
  if (changed && state.view === "rows") loadRows();
  if (m.state === "running") setTimeout(() => loadMeta(false).catch(() => {}), 3000);
}

for (const f of ["agent", "method", "status"]) $("f-" + f).addEventListener("change", (ev) => go({[f]: ev.target.value, offset: 0}, false));
$("f-task-mode").addEventListener("change", (ev) => go({tmode: ev.target.value, offset: 0}, false));
$("f-task").addEventListener("input", (ev) => go({task: ev.target.value.trim(), offset: 0}, false));
$("prev").addEventListener("click", () => go({offset: Math.max(0, state.offset - PAGE)}, false));
$("next").addEventListener("click", () => go({offset: state.offset + PAGE}, false));
for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => go({view: b.dataset.view}));
// The first page of rows is drawn as soon as it arrives; the filter menus and the agents'
// colours follow with /api/meta (swatches drawn before it are coloured then).
const metaReady = loadMeta(true).then(() => {
  for (const s of document.querySelectorAll(".swatch[data-agent]")) s.style.background = colour(s.dataset.agent);
});
if (state.view === "rows") { show("rows"); loadRows(); drawn = state; } else metaReady.then(() => render(null));
