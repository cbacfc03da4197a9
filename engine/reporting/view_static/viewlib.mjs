// The pure part of `drscore view`'s page: the view's state and its URL, messages and the
// spans marked in them, numbers as text, and a row's details as tables. No DOM here, so
// node's test runner checks it (tests/engine/reporting/js/viewlib.test.mjs).
"use strict";

// ------------------------------------------------------------------ state <-> URL

// What the URL's fragment holds, with the defaults left out of it.
export const DEFAULTS = Object.freeze({
  view: "rows",      // rows | task | pair | decisions | charts
  sort: "task", desc: false, offset: 0,
  agent: "", method: "", status: "", task: "", tmode: "exact",
  ot: "", oa: "", om: "", call: -1,   // the open row (task, agent, method) and its open call
  st: "", sm: "",                      // side by side: task, method ("" = every method)
  pm: "", pa: "", pb: "",              // pair view: method, agent A, agent B
  cm: "",                              // charts: method
});
const NUMBERS = new Set(["offset", "call"]);
const FLAGS = new Set(["desc"]);
export const VIEWS = ["rows", "task", "pair", "decisions", "charts"];

/** The state a fragment (`#view=rows&sort=score...`) describes; unknown keys are ignored,
 *  values out of range fall back to their default. */
export function readState(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  const state = {...DEFAULTS};
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    if (!params.has(key)) continue;
    const raw = params.get(key);
    if (NUMBERS.has(key)) {
      const n = Number(raw);
      state[key] = Number.isSafeInteger(n) && n >= (key === "call" ? -1 : 0) ? n : fallback;
    } else if (FLAGS.has(key)) {
      state[key] = raw === "1";
    } else {
      state[key] = raw;
    }
  }
  if (!VIEWS.includes(state.view)) state.view = DEFAULTS.view;
  if (!["exact", "prefix"].includes(state.tmode)) state.tmode = DEFAULTS.tmode;
  return state;
}

/** The fragment for `state` (keys in a fixed order, defaults omitted): the same view
 *  always gives the same link. */
export function writeState(state) {
  const params = new URLSearchParams();
  for (const [key, fallback] of Object.entries(DEFAULTS)) {
    const value = state[key];
    if (value === undefined || value === fallback) continue;
    params.set(key, FLAGS.has(key) ? (value ? "1" : "0") : String(value));
  }
  const text = params.toString();
  return text ? "#" + text : "";
}

/** The query string of /api/rows for the rows view of `state`. */
export function rowsQuery(state, limit) {
  const p = new URLSearchParams({offset: String(state.offset), limit: String(limit), sort: state.sort,
                                 descending: state.desc ? "1" : "0"});
  for (const f of ["agent", "method", "status"]) if (state[f]) p.set(f, state[f]);
  if (state.task) p.set(state.tmode === "prefix" ? "task_prefix" : "task", state.task);
  return p.toString();
}

// ------------------------------------------------------------------ messages

/** Messages as `{role, content, marks}`, whether stored as `[role, content]` pairs (the
 *  judge cache's form) or as objects. */
export function messagesOf(prompt) {
  const raw = prompt && Array.isArray(prompt.messages) ? prompt.messages : [];
  const out = [];
  for (const m of raw) {
    let role, content, marks = [];
    if (Array.isArray(m) && m.length === 2) [role, content] = m;
    else if (m && typeof m === "object") ({role, content, marks = []} = m);
    else continue;
    out.push({role: String(role), content: typeof content === "string" ? content : JSON.stringify(content, null, 1),
              marks: Array.isArray(marks) ? marks : []});
  }
  return out;
}

/** `text` cut at the marked spans: `[{text, mark}]`, `mark` the variable's name or null.
 *  Spans out of range or overlapping an earlier one are dropped. */
export function segments(text, marks) {
  const spans = (marks || []).filter((m) => Array.isArray(m) && m.length === 3 && m[1] >= 0 && m[2] <= text.length
                                            && m[1] < m[2]).sort((a, b) => a[1] - b[1]);
  const out = [];
  let at = 0;
  for (const [name, start, end] of spans) {
    if (start < at) continue;
    if (start > at) out.push({text: text.slice(at, start), mark: null});
    out.push({text: text.slice(start, end), mark: String(name)});
    at = end;
  }
  if (at < text.length || out.length === 0) out.push({text: text.slice(at), mark: null});
  return out;
}

// What a template variable holds, in words (the marks' labels).
const VARIABLE_LABELS = {
  page: "cited page", url: "cited URL", statements: "statements from the report", claim: "claim from the report",
  chunk: "which part", report: "report text", article: "report text", article_1: "report (article 1)",
  article_2: "reference report (article 2)", passage_a: "paragraph A", passage_b: "paragraph B",
  task_prompt: "task", task: "task", question: "task", query: "task", criteria_list: "criteria",
  window: "part of the page shown", keypoints: "key points", sources: "sources", item: "checklist item",
  rubric: "rubric", keyword: "keyword",
};
export function variableLabel(name) {
  return VARIABLE_LABELS[name] || name;
}

/** Long texts are shown folded past this many characters (with their length). */
export const FOLD_CHARS = 1500;
export function isLong(text) {
  return typeof text === "string" && text.length > FOLD_CHARS;
}

// ------------------------------------------------------------------ numbers as text

export function fmt(value, digits = 3) {
  if (value === null || value === undefined || (typeof value === "number" && !Number.isFinite(value))) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? value.toLocaleString("en-US")
    : value.toFixed(digits);
  return String(value);
}
export function fmtSigned(value, digits = 3) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "–";
  return (value >= 0 ? "+" : "−") + Math.abs(value).toFixed(digits);
}
export function fmtCost(value) {
  if (value === null || value === undefined) return "unknown";
  return "$" + Number(value).toFixed(value !== 0 && Math.abs(value) < 0.01 ? 6 : 4);
}
export function fmtSeconds(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "–";
  return value < 10 ? value.toFixed(2) + " s" : value.toFixed(1) + " s";
}
export function chars(n) {
  return n.toLocaleString("en-US") + (n === 1 ? " character" : " characters");
}
export function fmtP(p) {
  if (typeof p !== "number" || !Number.isFinite(p)) return "–";
  return p < 0.001 ? "<0.001" : p.toPrecision(2);
}
export function fmtInterval(ci, digits = 3) {
  return Array.isArray(ci) && ci.length === 2 ? `[${fmtSigned(ci[0], digits)}, ${fmtSigned(ci[1], digits)}]` : "";
}

// ------------------------------------------------------------------ the decisions

/** The matrix of one method's decision: `cells[i][j]` is the pair (row agent i minus
 *  column agent j, sign flipped when the decision holds it the other way round), or null. */
export function decisionMatrix(decision) {
  const agents = decision.agents || [];
  const byPair = new Map();
  for (const p of decision.pairs || []) byPair.set(p.a + "\u0000" + p.b, p);
  const cells = agents.map((a) => agents.map((b) => {
    if (a === b) return null;
    const p = byPair.get(a + "\u0000" + b);
    if (p) return {...p, flipped: false};
    const q = byPair.get(b + "\u0000" + a);
    if (!q) return null;
    return {...q, a, b, mean_a: q.mean_b, mean_b: q.mean_a, delta: q.delta === null ? null : -q.delta,
            ci: Array.isArray(q.ci) ? [-q.ci[1], -q.ci[0]] : q.ci, flipped: true};
  }));
  return {agents, cells};
}

/** Share of the pairs' variance that is judge noise, as text ("12%", "8–15%") or "". */
export function noiseShare(decision) {
  const shares = (decision.pairs || []).map((p) => p.judge_noise_share).filter((v) => typeof v === "number");
  if (!shares.length) return "";
  const lo = Math.min(...shares), hi = Math.max(...shares);
  const pct = (v) => Math.round(v * 100) + "%";
  return hi - lo < 0.005 ? pct(lo) : `${pct(lo)}–${pct(hi)}`;
}

// ------------------------------------------------------------------ charts

/** A range that holds every value, a little wider than the values (never empty). */
export function extent(values) {
  const finite = values.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (!finite.length) return [0, 1];
  let lo = Math.min(...finite), hi = Math.max(...finite);
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  return [lo, hi];
}

// ------------------------------------------------------------------ a row's details

const SCALAR = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);

/** A row's details as tables (never a JSON dump): `[{title, columns, rows, note}]`, where
 *  a row is an array of cells. Methods with a known layout get tables that read well
 *  (redundancy: units and sampled pairs; RACE: dimensions, criteria with weights and both
 *  scores; FACT: statements with URLs and labels); any other detail falls back to a
 *  generic table of its fields. */
export function detailTables(row, calls = []) {
  const details = row && row.details && typeof row.details === "object" ? row.details : {};
  const tables = [];
  const used = new Set();
  const facts = [];
  if (row.method === "redundancy" || Array.isArray(details.pairs) && Array.isArray(details.unit_lines)) {
    redundancyTables(details, tables, used);
  }
  if (details.dimension_weights && details.target) raceTables(details, calls, tables, used);
  if (Array.isArray(details.statements)) {
    tables.push({title: `statements (${details.statements.length})`, columns: ["statement", "URL", "label"],
                 rows: details.statements.map((s) => [s.statement ?? "", s.url ?? "", s.outcome ?? ""]),
                 kind: "statements"});
    used.add("statements");
  }
  for (const [key, value] of Object.entries(details)) {
    if (used.has(key)) continue;
    if (SCALAR(value)) { facts.push([key, value]); continue; }
    if (Array.isArray(value)) {
      if (!value.length) { facts.push([key, "none"]); continue; }
      if (value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
        const columns = [...new Set(value.flatMap((v) => Object.keys(v)))];
        tables.push({title: `${key} (${value.length})`, columns,
                     rows: value.map((v) => columns.map((c) => cell(v[c])))});
      } else if (value.every(Array.isArray)) {
        const width = Math.max(...value.map((v) => v.length));
        tables.push({title: `${key} (${value.length})`, columns: Array.from({length: width}, (_, i) => String(i + 1)),
                     rows: value.map((v) => v.map(cell))});
      } else if (value.every(SCALAR)) {
        facts.push([key, value.length > 20 ? `${value.slice(0, 20).join(", ")}, … (${value.length})`
                                           : value.join(", ")]);
      } else {
        facts.push([key, cell(value)]);
      }
      continue;
    }
    const entries = Object.entries(value);
    if (entries.every(([, v]) => SCALAR(v))) {
      tables.push({title: key, columns: ["", "value"], rows: entries.map(([k, v]) => [k, v])});
    } else {
      tables.push({title: key, columns: ["", "value"], rows: entries.map(([k, v]) => [k, cell(v)])});
    }
  }
  if (facts.length) tables.unshift({title: "details", columns: ["", "value"], rows: facts});
  return tables;
}

function cell(value) {
  if (SCALAR(value)) return value;
  if (Array.isArray(value) && value.every(SCALAR)) return value.join(", ");
  if (value && typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k}: ${SCALAR(v) ? v : JSON.stringify(v)}`).join("; ");
  }
  return JSON.stringify(value);
}

function redundancyTables(details, tables, used) {
  const lines = new Map();
  for (const u of details.unit_lines || []) if (Array.isArray(u) && u.length >= 2) lines.set(u[0], u[1]);
  const texts = Array.isArray(details.units) ? details.units : null;
  const unitCount = texts ? texts.length : (typeof details.units === "number" ? details.units : lines.size);
  if (lines.size || texts) {
    const ids = texts ? texts.map((_, i) => i + 1) : [...lines.keys()];
    tables.push({title: `units (${unitCount}; ${details.segmentation || "paragraphs"})`,
                 columns: texts ? ["unit", "line", "text"] : ["unit", "line in the report"],
                 rows: ids.map((i) => texts ? [i, lines.get(i) ?? "", texts[i - 1]] : [i, lines.get(i) ?? ""]),
                 kind: "units"});
  }
  if (Array.isArray(details.pairs)) {
    const judged = details.pairs.filter((p) => p[3] === "judged").length;
    tables.push({title: `sampled pairs (${details.pairs.length}; ${judged} judged, the rest screened)`,
                 columns: ["unit A", "unit B", "line A", "line B", "score (0 repeated … 4 none)", "how"],
                 rows: details.pairs.map((p) => [p[0], p[1], lines.get(p[0]) ?? "", lines.get(p[1]) ?? "",
                                                 p[2] ?? "–", p[3] ?? ""]),
                 kind: "pairs"});
  }
  for (const k of ["unit_lines", "pairs"]) used.add(k);
  if (lines.size || texts) { used.add("units"); used.add("segmentation"); }
}

function raceTables(details, calls, tables, used) {
  const w = details.dimension_weights || {};
  const t = (details.target && details.target.dims) || {};
  const r = (details.reference && details.reference.dims) || {};
  tables.push({title: "dimensions", columns: ["dimension", "weight", "target", "reference"],
               rows: Object.keys(w).map((d) => [d, w[d], t[d] ?? "–", r[d] ?? "–"]), kind: "dimensions"});
  let criteria = Array.isArray(details.criteria) ? details.criteria : null;
  if (!criteria) {  // older rows: the scores from the judge's answer, without weights
    const call = calls.find((c) => c.verdict && typeof c.verdict === "object" && !Array.isArray(c.verdict)
                                   && Object.values(c.verdict).some((v) => Array.isArray(v)));
    criteria = [];
    if (call) {
      for (const [dim, items] of Object.entries(call.verdict)) {
        if (!Array.isArray(items)) continue;
        for (const it of items) criteria.push([dim, it.criterion, null, it.article_1_score ?? it.target_score,
                                               it.article_2_score ?? null]);
      }
    }
  }
  if (criteria.length) {
    tables.push({title: `criteria (${criteria.length})`,
                 columns: ["dimension", "criterion", "weight", "target", "reference"],
                 rows: criteria.map((c) => [c[0], c[1], c[2] ?? "–", c[3] ?? "–", c[4] ?? "–"]), kind: "criteria"});
  }
  for (const k of ["dimension_weights", "target", "reference", "criteria"]) used.add(k);
}

/** A verdict as a table: an object's scalar fields as facts, lists of objects as rows. */
export function verdictTables(verdict) {
  if (verdict === null || verdict === undefined) return [];
  if (SCALAR(verdict)) return [{title: "verdict", columns: ["", "value"], rows: [["value", verdict]]}];
  if (Array.isArray(verdict)) return [{title: "verdict", columns: ["", "value"], rows: verdict.map((v, i) => [i + 1, cell(v)])}];
  const facts = [], tables = [];
  for (const [key, value] of Object.entries(verdict)) {
    if (Array.isArray(value) && value.length && value.every((v) => v && typeof v === "object" && !Array.isArray(v))) {
      const columns = [...new Set(value.flatMap((v) => Object.keys(v)))];
      tables.push({title: `${key} (${value.length})`, columns, rows: value.map((v) => columns.map((c) => cell(v[c])))});
    } else {
      facts.push([key, cell(value)]);
    }
  }
  if (facts.length) tables.unshift({title: "verdict", columns: ["", "value"], rows: facts});
  return tables;
}
