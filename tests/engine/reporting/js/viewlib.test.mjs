// node --test: the pure part of `drscore view`'s page (engine/reporting/view_static/viewlib.mjs).
// Run by tests/engine/reporting/test_view_js.py.
import assert from "node:assert/strict";
import {test} from "node:test";
import {fileURLToPath} from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const lib = await import(path.join(here, "..", "..", "..", "..", "engine", "reporting", "view_static", "viewlib.mjs"));

test("a view survives the URL: write then read gives the same state", () => {
  const state = {...lib.DEFAULTS, view: "pair", sort: "score", desc: true, offset: 50, agent: "a&b=c #1",
                 method: "fact", tmode: "prefix", task: "5", ot: "51", oa: "x", om: "fact", call: 3,
                 pm: "race", pa: "α", pb: "b"};
  const hash = lib.writeState(state);
  assert.ok(hash.startsWith("#view=pair&sort=score&desc=1&offset=50"));
  assert.deepEqual(lib.readState(hash), state);
});

test("defaults are left out of the link and garbage falls back to them", () => {
  assert.equal(lib.writeState({...lib.DEFAULTS}), "");
  const s = lib.readState("#view=nope&offset=-4&call=1e400&tmode=regex&desc=yes&unknown=1");
  assert.equal(s.view, "rows");
  assert.equal(s.offset, 0);
  assert.equal(s.call, -1);
  assert.equal(s.tmode, "exact");
  assert.equal(s.desc, false);
  assert.equal("unknown" in s, false);
});

test("the rows query carries the filters, and the task as exact or prefix", () => {
  const q = new URLSearchParams(lib.rowsQuery({...lib.DEFAULTS, agent: "a", task: "1", tmode: "prefix",
                                               desc: true, sort: "score", offset: 100}, 50));
  assert.equal(q.get("task_prefix"), "1");
  assert.equal(q.get("task"), null);
  assert.equal(q.get("descending"), "1");
  assert.equal(q.get("offset"), "100");
  assert.equal(q.get("agent"), "a");
  assert.equal(q.get("method"), null);
});

test("messages stored as [role, content] pairs read like objects (the 'prompt · undefined' bug)", () => {
  const pairs = lib.messagesOf({messages: [["system", "be fair"], ["user", "grade this"]]});
  assert.deepEqual(pairs.map((m) => [m.role, m.content]), [["system", "be fair"], ["user", "grade this"]]);
  const objects = lib.messagesOf({messages: [{role: "user", content: "x", marks: [["report", 0, 1]]}]});
  assert.deepEqual(objects, [{role: "user", content: "x", marks: [["report", 0, 1]]}]);
  assert.deepEqual(lib.messagesOf(null), []);
  assert.deepEqual(lib.messagesOf({messages: [["user", {parts: [1]}]]})[0].content, JSON.stringify({parts: [1]}, null, 1));
});

test("marked spans cut the text without losing or repeating a character", () => {
  const text = "<page>PAGE TEXT</page> then [1] a statement";
  const marks = [["statements", 28, 43], ["page", 6, 15], ["bad", 40, 99], ["overlap", 10, 20]];
  const parts = lib.segments(text, marks);
  assert.equal(parts.map((p) => p.text).join(""), text);
  assert.deepEqual(parts.filter((p) => p.mark).map((p) => [p.mark, p.text]),
                   [["page", "PAGE TEXT"], ["statements", "[1] a statement"]]);
  assert.deepEqual(lib.segments("", []), [{text: "", mark: null}]);
  assert.equal(lib.variableLabel("page"), "cited page");
  assert.equal(lib.variableLabel("something_new"), "something_new");
});

test("numbers as text: signs, costs, p-values, seconds", () => {
  assert.equal(lib.fmtSigned(0.1234, 3), "+0.123");
  assert.equal(lib.fmtSigned(-2, 1), "−2.0");
  assert.equal(lib.fmtSigned(null), "–");
  assert.equal(lib.fmtCost(null), "unknown");
  assert.equal(lib.fmtCost(0.000123), "$0.000123");
  assert.equal(lib.fmtCost(1.5), "$1.5000");
  assert.equal(lib.fmtP(0.0004), "<0.001");
  assert.equal(lib.fmtP(0.0312), "0.031");
  assert.equal(lib.fmtSeconds(3.14159), "3.14 s");
  assert.equal(lib.fmt(12345), "12,345");
  assert.equal(lib.fmt(NaN), "–");
  assert.equal(lib.chars(1), "1 character");
  assert.equal(lib.isLong("x".repeat(lib.FOLD_CHARS + 1)), true);
  assert.equal(lib.isLong("x".repeat(lib.FOLD_CHARS)), false);
});

test("the decision matrix holds every pair both ways, the sign following the cell", () => {
  const decision = {agents: ["a", "b", "c"], pairs: [
    {a: "a", b: "b", delta: 0.5, ci: [0.1, 0.9], p_holm: 0.01, n: 10, significant: true, judge_noise_share: 0.1},
    {a: "a", b: "c", delta: 0.2, ci: [-0.1, 0.4], p_holm: 0.3, n: 9, significant: false, judge_noise_share: 0.3}]};
  const {agents, cells} = lib.decisionMatrix(decision);
  assert.deepEqual(agents, ["a", "b", "c"]);
  assert.equal(cells[0][0], null);
  assert.equal(cells[0][1].delta, 0.5);
  assert.equal(cells[1][0].delta, -0.5);
  assert.deepEqual(cells[1][0].ci, [-0.9, -0.1]);
  assert.equal(cells[1][0].a, "b");
  assert.equal(cells[1][2], null);  // b and c never compared
  assert.equal(lib.noiseShare(decision), "10%–30%");
  assert.equal(lib.noiseShare({pairs: [{judge_noise_share: null}]}), "");
});

test("a chart's range holds every value and is never empty", () => {
  assert.deepEqual(lib.extent([0.5, NaN, 2, null]), [0.5, 2]);
  assert.deepEqual(lib.extent([3, 3]), [2.5, 3.5]);
  assert.deepEqual(lib.extent([]), [0, 1]);
});

test("a redundancy row's details: units and sampled pairs as tables", () => {
  const row = {method: "redundancy", details: {units: 3, segmentation: "paragraphs", unit_lines: [[1, 4], [2, 9], [3, 12]],
    pairs: [[1, 2, 4, "judged"], [2, 3, 1, "screened"]], protocol: "sampled", max_pairs: 30}};
  const tables = lib.detailTables(row);
  const byKind = Object.fromEntries(tables.filter((t) => t.kind).map((t) => [t.kind, t]));
  assert.deepEqual(byKind.units.rows, [[1, 4], [2, 9], [3, 12]]);
  assert.deepEqual(byKind.pairs.rows, [[1, 2, 4, 9, 4, "judged"], [2, 3, 9, 12, 1, "screened"]]);
  assert.deepEqual(tables[0].rows, [["protocol", "sampled"], ["max_pairs", 30]]);
  assert.ok(!JSON.stringify(tables).includes("unit_lines"));
});

test("a RACE row's details: dimensions and criteria with weights and both scores", () => {
  const row = {method: "race", details: {dimension_weights: {insight: 0.6, readability: 0.4},
    target: {dims: {insight: 6, readability: 5}, total: 5.6}, reference: {dims: {insight: 5, readability: 5}, total: 5},
    criteria: [["insight", "depth", 0.5, 7, 5], ["readability", "clear", 1, 5, 5]]}};
  const byKind = Object.fromEntries(lib.detailTables(row).filter((t) => t.kind).map((t) => [t.kind, t]));
  assert.deepEqual(byKind.dimensions.rows, [["insight", 0.6, 6, 5], ["readability", 0.4, 5, 5]]);
  assert.deepEqual(byKind.criteria.rows, [["insight", "depth", 0.5, 7, 5], ["readability", "clear", 1, 5, 5]]);
  // an older row without criteria: the scores come from the judge's answer
  const old = {method: "race", details: {dimension_weights: {insight: 1}, target: {dims: {insight: 6}}}};
  const calls = [{verdict: {insight: [{criterion: "depth", article_1_score: 7, article_2_score: 4}]}}];
  const crit = lib.detailTables(old, calls).find((t) => t.kind === "criteria");
  assert.deepEqual(crit.rows, [["insight", "depth", "–", 7, 4]]);
});

test("a FACT row's details: statements with their URL and label", () => {
  const row = {method: "fact", details: {statements: [{url: "https://a", statement: "x rose", outcome: "supported"}],
    counts: {supported: 1, unsupported: 0}, urls: [{url: "https://a", page: "ok", statements: 1}]}};
  const tables = lib.detailTables(row);
  const st = tables.find((t) => t.kind === "statements");
  assert.deepEqual(st.columns, ["statement", "URL", "label"]);
  assert.deepEqual(st.rows, [["x rose", "https://a", "supported"]]);
  assert.deepEqual(tables.find((t) => t.title === "counts").rows, [["supported", 1], ["unsupported", 0]]);
  assert.deepEqual(tables.find((t) => t.title === "urls (1)").rows, [["https://a", "ok", 1]]);
});

test("a verdict as tables: scalar fields as facts, lists of objects as rows", () => {
  const tables = lib.verdictTables({overall: 3, why: "fine", judgments: [{statement: 1, verdict: "supported"}]});
  assert.deepEqual(tables[0].rows, [["overall", 3], ["why", "fine"]]);
  assert.deepEqual(tables[1].columns, ["statement", "verdict"]);
  assert.deepEqual(lib.verdictTables(null), []);
});
