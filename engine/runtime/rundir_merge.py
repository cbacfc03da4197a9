"""Join the run directories of ``drscore run --shard K/N`` into one run directory.

Rows are re-aggregated with the same :class:`Aggregator` a single run uses (given the
same interval function and methods, for their suite figures and notes), so the
leaderboard statistics (means, intervals, counts) are those of one run over all reports;
per-method accounting and totals are sums of the shards' (wall time: the longest shard,
as they ran side by side). Input errors are reported identically by every shard (each
reads every line), so they are taken once.

Shards must come from one configuration: the same methods, options, judge, seed, inputs
(compared by file name, since machines differ in paths, and by content: each run records
its inputs' SHA-256 in ``summary.json``) and drscore version, the same N, every part
1..N present once, each finished (``summary.json`` written). Their rows are checked
against each shard's own record: every line decodes (a bad line is reported as
``file:line``), the file is the one the run wrote (its row count and SHA-256, recorded in
``summary.json`` as ``scores_file`` when the run ended), each (task, agent) is a report of
the inputs (when they are readable here), each row lies inside its shard's part of the
split, and no (task, agent, method) is in two shards. Pacing settings (``--rpm``,
``--concurrency`` ...), the cache directory and the Redis URL may differ.

Money: the merged totals are the shards' ledgers (``ledger.jsonl``: what each shard paid
in every invocation), summed, with each shard's beside them.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Sequence

import msgspec
import orjson

from drscore.engine.runtime.aggregate import Aggregator
from drscore.engine.runtime.io import iter_reports, shard_of, shard_part
from drscore.engine.runtime.method import Method
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir import _atomic_write, scores_identity
from drscore.engine.runtime.rundir_read import RunDir, natural_key, read_run_dir

# Settings that change how fast or where a shard ran, never what it scored.
_PACING = ("out", "shard", "max_in_flight", "fetch_concurrency")
_JUDGE_PACING = ("cache_dir", "redis", "redis_ttl_days", "api_key_present", "concurrency", "rpm", "tpm", "burst_s",
                 "timeout_s", "max_retries", "max_cost")
# What one shard's process learned about its endpoint (the estimates' error, the margins, the
# quota its 429s taught, what the server said of itself, a delay hint not believed, a fatal stop
# after every item): facts of that process, not sums (summing dropped their strings and doubled
# a server's window); kept per shard in merged_from.
_PER_PROCESS_TOTALS = ("prompts_estimated", "prompts_counted", "quota_margins", "learned_quota", "judge_server",
                       "unusable_rate_limit_hints", "stop_after_all_items")
_ADDITIVE_TOTALS_SKIP = {"wall_time_s", "budget_exhausted", "inputs_skipped", "max_cost_usd", "priced_as", "ledger",
                         "this_invocation", "reused", *_PER_PROCESS_TOTALS}
_SHOWN_PROBLEMS = 10


class MergeError(ValueError):
    """Shards that cannot be joined (different configurations, missing parts, unfinished)."""


def scoring_config(config: dict[str, Any]) -> dict[str, Any]:
    """The part of a run's config.json that decides its scores."""
    cfg = copy.deepcopy(config)
    for k in _PACING:
        cfg.pop(k, None)
    judge = cfg.get("judge") or {}
    for k in _JUDGE_PACING:
        judge.pop(k, None)
    cfg["reports"] = [Path(p).name for p in cfg.get("reports") or []]
    if cfg.get("tasks"):
        cfg["tasks"] = Path(cfg["tasks"]).name
    return cfg


def _check(runs: list[RunDir]) -> int:
    """Validate the shards; returns N."""
    if not runs:
        raise MergeError("no run directories given")
    parts: dict[int, str] = {}
    n_seen: set[int] = set()
    for run in runs:
        if not run.config:
            raise MergeError(f"{run.path}: no config.json; is it a `drscore run --out` directory?")
        if not run.summary:
            raise MergeError(f"{run.path}: no summary.json; the shard did not finish (re-run its command to "
                             "complete it from the cache)")
        try:
            shard = shard_of(run.config.get("shard"))
        except ValueError as e:
            raise MergeError(f"{run.path}/config.json: {e}") from None
        if shard is None:
            raise MergeError(f"{run.path}: not a shard (it was run without --shard K/N)")
        k, n = shard
        n_seen.add(n)
        if k in parts:
            raise MergeError(f"{run.path} and {parts[k]} are both shard {k}/{n}")
        parts[k] = run.path
    if len(n_seen) > 1:
        raise MergeError(f"shards of different splits: N = {', '.join(map(str, sorted(n_seen)))}")
    n = n_seen.pop()
    missing = [k for k in range(1, n + 1) if k not in parts]
    if missing:
        raise MergeError(f"missing shard(s) {', '.join(f'{k}/{n}' for k in missing)}")
    base = scoring_config(runs[0].config)
    for run in runs[1:]:
        other = scoring_config(run.config)
        if other != base:
            diff = sorted(k for k in set(base) | set(other) if base.get(k) != other.get(k))
            if "judge" in diff:
                jb, jo = base.get("judge") or {}, other.get("judge") or {}
                diff = [d for d in diff if d != "judge"] + \
                    [f"judge.{k}" for k in sorted(set(jb) | set(jo)) if jb.get(k) != jo.get(k)]
            raise MergeError(f"{run.path} was run with a different configuration than {runs[0].path} "
                             f"(differs in: {', '.join(diff)})")
    _check_inputs(runs)
    return n


def _check_inputs(runs: list[RunDir]) -> None:
    """The shards read the same files: compared by content (SHA-256), not only by name."""
    base = runs[0].summary.get("inputs")
    for run in runs[1:]:
        other = run.summary.get("inputs")
        if other == base:
            continue
        if base is None or other is None:
            raise MergeError(f"{(runs[0] if base is None else run).path}/summary.json records no input hashes; "
                             "re-run that shard with this drscore to compare its inputs")
        for a, b in zip(base, other):
            if a != b:
                raise MergeError(f"{run.path} read a different {a['role']} file than {runs[0].path}: "
                                 f"{b['file']} (sha256 {b['sha256'][:12]}) vs {a['file']} (sha256 {a['sha256'][:12]})")
        raise MergeError(f"{run.path} read {len(other)} input files, {runs[0].path} read {len(base)}")


def _check_lines(runs: list[RunDir]) -> None:
    """Every line of each shard's ``scores.jsonl`` decodes (bad ones named ``file:line``)."""
    problems = [str(p) for run in runs for p in run.problems]
    if problems:
        more = f" (and {len(problems) - _SHOWN_PROBLEMS} more)" if len(problems) > _SHOWN_PROBLEMS else ""
        raise MergeError("bad lines in the shards' scores.jsonl, nothing merged:\n  "
                         + "\n  ".join(problems[:_SHOWN_PROBLEMS]) + more)


def _check_files(runs: list[RunDir]) -> None:
    """Each shard's ``scores.jsonl`` is the file its run wrote: the row count and SHA-256
    its ``summary.json`` recorded at the end of the run."""
    for run in runs:
        recorded = run.summary.get("scores_file")
        path = Path(run.path) / "scores.jsonl"
        if not isinstance(recorded, dict):
            raise MergeError(f"{run.path}/summary.json records no scores_file (row count and hash); re-run that "
                             "shard with this drscore (it resumes from the cache) to record them")
        found = scores_identity(path)
        if found != {"rows": recorded.get("rows"), "sha256": recorded.get("sha256")}:
            raise MergeError(f"{path} is not the file its run wrote: {found['rows']} lines, sha256 "
                             f"{found['sha256'][:12]}, where summary.json records {recorded.get('rows')} rows, sha256 "
                             f"{str(recorded.get('sha256'))[:12]}; re-run that shard's command to write it again")
        if run.duplicates:
            raise MergeError(f"{path}: {run.duplicates} (task, agent, method) written twice")


def _check_inputs_hold(runs: list[RunDir], order: dict[tuple[str, str], int] | None) -> None:
    """Every row is a report of the inputs (checked when the report files are readable here)."""
    if order is None:
        return
    for run in runs:
        for row in run.scores:
            if (row.task_id, row.agent) not in order:
                raise MergeError(f"{run.path}/scores.jsonl: task {row.task_id!r}, agent {row.agent!r} is no report "
                                 "of the input files; the shard's rows do not come from its inputs")


def _ledgers(runs: list[RunDir]) -> dict[str, Any] | None:
    """The shards' ledgers summed (what each paid, in every invocation), each beside it."""
    found = [(run.path, run.ledger) for run in runs if run.ledger]
    if not found:
        return None
    total: dict[str, Any] = {}
    for _, ledger in found:
        _sum_into(total, {k: ledger[k] for k in ("invocations", "run", "interrupted_in_flight", "outcome_unknown")})
    for part in (total["run"], total["interrupted_in_flight"], total["outcome_unknown"]):
        for k, v in part.items():
            if isinstance(v, float):
                part[k] = round(v, 6)
    total["file"] = "ledger.jsonl of each shard"
    total["by_shard"] = {path: ledger["run"] for path, ledger in found}
    if len(found) < len(runs):
        total["shards_without_ledger"] = [run.path for run in runs if not run.ledger]
    return total


def _check_rows(runs: list[RunDir], n: int) -> None:
    """Every row lies inside its shard's part of the split, and no (task, agent, method)
    is in two shards (it would be counted twice and narrow the interval)."""
    owner: dict[tuple[str, str, str], str] = {}
    for run in runs:
        for row in run.scores:
            key = (row.task_id, row.agent, row.method)
            if key in owner:
                raise MergeError(f"task {row.task_id!r}, agent {row.agent!r}, method {row.method!r} is in both "
                                 f"{owner[key]} and {run.path}; it would be counted twice")
            owner[key] = run.path
    for run in runs:
        shard = shard_of(run.config.get("shard"))
        assert shard is not None  # _check saw to it
        for row in run.scores:
            part = shard_part(row.task_id, row.agent, n)
            if part != shard[0]:
                raise MergeError(f"{run.path}/scores.jsonl: task {row.task_id!r}, agent {row.agent!r} belongs to "
                                 f"shard {part}/{n}, not {shard[0]}/{n}; the shard holds rows of another split")


def _input_order(config: dict[str, Any]) -> dict[tuple[str, str], int] | None:
    """(task, agent) -> position in the inputs, when the report files are still readable."""
    order: dict[tuple[str, str], int] = {}
    try:
        for path in config.get("reports") or []:
            for report in iter_reports(path, fmt=config.get("format", "auto"), agent=config.get("agent"),
                                       errors=[]):
                order.setdefault((report.task_id, report.agent), len(order))
    except (OSError, ValueError):
        return None
    return order or None


def _sum_into(target: dict[str, Any], source: dict[str, Any]) -> None:
    for k, v in source.items():
        if isinstance(v, bool):
            target[k] = bool(target.get(k)) or v
        elif isinstance(v, (int, float)):
            target[k] = target.get(k, 0) + v
        elif isinstance(v, dict):
            _sum_into(target.setdefault(k, {}), v)


def merge_runs(dirs: list[str | Path], out: str | Path, *,
               interval: Callable[[Sequence[float]], list[float] | None] | None = None,
               methods: list[Method] | None = None,
               extend: Callable[[dict[str, Any], list[ScoreRow]], None] | None = None) -> dict[str, Any]:
    """Join shard run directories into ``out``; returns the merged summary. ``interval``
    and ``methods`` are what the single run's summary used, ``extend`` adds the figures
    computed above the runtime (``drscore merge`` passes all three: the paired
    comparisons of drscore.api.add_decisions)."""
    runs = [read_run_dir(d) for d in dirs]
    runs.sort(key=lambda r: shard_of(r.config.get("shard")) or (0, 0))
    n = _check(runs)
    _check_lines(runs)
    _check_rows(runs, n)  # the specific faults first, then what else changed the files
    method_order = list(runs[0].config.get("methods") or [])
    order = _input_order(runs[0].config)
    _check_inputs_hold(runs, order)
    _check_files(runs)
    rows: list[ScoreRow] = [row for run in runs for row in run.scores]

    def position(row: ScoreRow) -> tuple:
        m = method_order.index(row.method) if row.method in method_order else len(method_order)
        if order is not None:
            return (order.get((row.task_id, row.agent), 1 << 60), m)
        return (natural_key(row.task_id), row.agent, m)

    rows.sort(key=position)
    aggregate = Aggregator()
    for row in rows:
        aggregate.add(row)

    per_method: dict[str, Any] = {}
    totals: dict[str, Any] = {}
    for run in runs:
        for name, meter in (run.summary.get("per_method") or {}).items():
            _sum_into(per_method.setdefault(name, {}), meter)
        _sum_into(totals, {k: v for k, v in (run.summary.get("totals") or {}).items()
                           if k not in _ADDITIVE_TOTALS_SKIP})
    for name, meter in per_method.items():
        for key in ("cost_usd", "cost_usd_uncached"):
            if key in meter:
                meter[key] = round(meter[key], 6)
    shard_totals = [run.summary.get("totals") or {} for run in runs]
    totals["cost_usd"] = round(totals.get("cost_usd", 0.0), 6)
    unpriced = next((t["price_unknown"] for t in shard_totals if t.get("price_unknown")), None)
    if unpriced is not None:  # an unknown price stays unknown, never a sum of zeros
        totals["price_unknown"] = unpriced
        for meter in (totals, *per_method.values()):
            meter["cost_usd"] = meter["cost_usd_uncached"] = None
    totals["inputs_skipped"] = max(t.get("inputs_skipped", 0) for t in shard_totals)
    totals["wall_time_s"] = max(t.get("wall_time_s", 0.0) for t in shard_totals)
    totals["budget_exhausted"] = any(t.get("budget_exhausted") for t in shard_totals)
    for key in ("max_cost_usd", "priced_as"):
        if key in shard_totals[0]:
            totals[key] = shard_totals[0][key]
    for key in ("cost_usd_uncached", "cost_unsettled_usd"):
        if totals.get(key) is not None:
            totals[key] = round(totals[key], 6)
    ledger = _ledgers(runs)
    if ledger is not None and unpriced is None:
        totals["ledger"] = ledger
        if "shards_without_ledger" not in ledger:  # every shard's record of what it paid
            for key in ("calls", "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens",
                        "cost_usd", "cost_usd_uncached"):
                totals[key] = ledger["run"][key]
    table = aggregate.table(interval)
    by_name = {m.name: m for m in methods or []}
    for entry in table:
        method = by_name.get(entry["method"])
        extra = method.suite(entry) if method is not None else None
        if extra:
            entry["suite"] = extra
    errors = list(dict.fromkeys(e for run in runs for e in run.summary.get("input_errors") or []))
    first = runs[0].summary
    summary: dict[str, Any] = {
        "judge": first.get("judge"),
        "dry_run": first.get("dry_run", False),
        "per_agent_method": table,
        "notes": {m.name: m.notes() for m in methods or [] if m.notes()},
        "per_method": per_method,
        "totals": totals,
        "stopped": next((run.summary["stopped"] for run in runs if run.summary.get("stopped")), None),
        "input_errors": errors[:200],
        "inputs": first.get("inputs"),
        "merged_from": [{"dir": run.path, "shard": run.config.get("shard"), "items": t.get("items"),
                         "wall_time_s": t.get("wall_time_s"), **{k: t[k] for k in _PER_PROCESS_TOTALS if k in t}}
                        for run, t in zip(runs, shard_totals)],
    }
    if extend is not None:
        extend(summary, rows)
    pages = [run.summary["pages"] for run in runs if isinstance(run.summary.get("pages"), dict)]
    if pages:
        merged_pages: dict[str, Any] = {}
        for p in pages:
            _sum_into(merged_pages, p)
        summary["pages"] = merged_pages

    out = Path(out)
    if out.resolve() in {Path(r.path).resolve() for r in runs}:
        raise MergeError(f"--out {out} is one of the shards; choose a new directory")
    config = copy.deepcopy(runs[0].config)
    config["shard"] = None
    config["out"] = str(out)
    config["merged_from"] = [f"{run.path} ({run.config.get('shard')})" for run in runs]
    out.mkdir(parents=True, exist_ok=True)
    encode = msgspec.json.Encoder().encode
    with open(out / "verdicts.jsonl", "wb") as joined:
        for run in runs:
            path = Path(run.path) / "verdicts.jsonl"
            if path.is_file():
                data = path.read_bytes()
                joined.write(data if not data or data.endswith(b"\n") else data + b"\n")
    _atomic_write(out / "scores.jsonl", b"".join(encode(row) + b"\n" for row in rows))
    summary["scores_file"] = scores_identity(out / "scores.jsonl")
    _atomic_write(out / "config.json", orjson.dumps(config, option=orjson.OPT_INDENT_2))
    _atomic_write(out / "summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return orjson.loads(orjson.dumps(summary))
