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
page of matches only. Its script and style are files (``view_static/viewer.js`` and
``viewer.css``), inlined when the page is written. A Content-Security-Policy that allows no source at all makes the
"no network" promise checkable by the browser itself.
"""
from __future__ import annotations

import html
import json
import math
from importlib import resources
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
                         rec.error or "", rec.verdict, rec.inputs or {}, rec.reasoning_tokens,
                         _num(rec.judge_s, 4), _num(rec.quota_wait_s, 4)])
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


def _static(name: str) -> str:
    """A file of ``view_static/`` (the page's style and script, kept as real files)."""
    return resources.files(__package__).joinpath("view_static", name).read_text(encoding="utf-8")


_CSS = _static("viewer.css")
_JS = _static("viewer.js")


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
