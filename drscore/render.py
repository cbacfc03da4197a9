"""Plain-text views of a run summary for the terminal."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from drscore.engine.runtime.escape import terminal
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.calls.ledger import may_have_billed, money_line
from drscore.engine.runtime.calls.pricing import cost_text, unknown_price_message

if TYPE_CHECKING:  # the reporting tables (numpy) load only when a leaderboard is drawn
    from drscore.engine.reporting.tables import BoardFold

# A proxy tokenizer's learned per-call error from which a run says so even without a 429: at
# 2%, a call the size of the token bucket waits 4% of it past a full one (providers.md).
ESTIMATE_NOTE_ERROR = 0.02


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def leaderboard_text(summary: dict[str, Any], rows: Iterable[ScoreRow] | BoardFold | None = None, *,
                     seed: int = 0, resamples: int | None = None) -> str:
    """One block per method, agents ranked best first. With the run's score ``rows``
    the table is :func:`drscore.engine.reporting.tables.leaderboard`'s, the one ``drscore
    report`` writes: percentile bootstrap intervals over tasks, agents ranked on the
    tasks they share (and a line saying so when their task sets differ)."""
    lines = []
    judge = summary.get("judge", "")
    label = " (offline judge: a lexical baseline, not an LLM verdict)" if judge == "offline" else f" (judge: {judge})"
    lines.append(f"Leaderboard{label}")
    if rows is not None:
        lines += _board_lines(summary, rows, seed, resamples)
    else:
        lines += _summary_lines(summary)
    lines.append(_totals_line(summary))
    return "\n".join(lines)


def _board_lines(summary: dict[str, Any], rows: Iterable[ScoreRow] | BoardFold, seed: int,
                 resamples: int | None) -> list[str]:
    from drscore.engine.reporting.tables import BoardFold, comparison_note, leaderboard, task_sets_differ
    from drscore.engine.stats.bootstrap import DEFAULT_RESAMPLES

    skipped = {(r["method"], r["agent"]): r.get("skipped", 0) for r in summary.get("per_agent_method", [])}
    board = leaderboard(rows, resamples=resamples or DEFAULT_RESAMPLES, seed=seed)
    decisions = summary.get("decisions")
    if decisions is None:  # a summary from before paired comparisons: compute them from the rows
        import msgspec

        from drscore.engine.stats.paired import decide

        # (folded rows cannot be paired again; a `drscore run` summary always carries them)
        decisions = {} if isinstance(rows, BoardFold) else {
            m: msgspec.to_builtins(d) for m, d in decide(list(rows), seed=seed).items()}
    lines: list[str] = []
    for method in sorted(board):
        entries = board[method]
        differ = task_sets_differ(entries)
        lines.append(f"\n  {method}")
        shared_head = f"{'shared':>9}{'95% CI':>20}" if differ else ""
        sd_head = f"{'judge sd':>9}" if any(e.samples > 1 for e in entries) else ""
        lines.append(f"    {'rank':<5}{'agent':<32}{'mean':>9}{'95% CI':>20}{shared_head}{sd_head}{'n':>6}{'failed':>8}"
                     f"{'skipped':>9}{'cost $':>10}{'uncached $':>12}{'judge s':>10}{'wait s':>10}")
        for e in entries:
            shared = ""
            if differ:
                shared = f"{_fmt(e.shared_score):>9}{_ci(e.shared_ci_low, e.shared_ci_high):>20}"
            sd = f"{_fmt(e.judge_sd, 4):>9}" if sd_head else ""
            lines.append(f"    {e.rank or '-'!s:<5}{terminal(e.agent)[:31]:<32}{_fmt(e.score):>9}{_ci(e.ci_low, e.ci_high):>20}"
                         f"{shared}{sd}{e.tasks_scored:>6}{e.failed:>8}{skipped.get((method, e.agent), 0):>9}"
                         f"{cost_text(e.cost_usd):>10}{cost_text(e.cost_usd_uncached):>12}"
                         f"{e.judge_s:>10.1f}{e.quota_wait_s:>10.1f}")
        for e in entries:
            if e.unranked_reason:
                lines.append(f"    not ranked: {terminal(e.agent)} ({terminal(e.unranked_reason)})")
        note = comparison_note(entries)
        if note:
            lines.append(f"    note: {terminal(note)}")
        lines += decision_lines(decisions.get(method))
        lines += _method_extras(summary, method)
    return lines


def decision_lines(decision: dict[str, Any] | None, limit: int = 12) -> list[str]:
    """The paired comparisons of one method (``summary["decisions"][method]``): each pair
    as ``A - B: +0.31 [0.12, 0.50]`` with its p-values, then P(first)."""
    if not decision or not decision.get("pairs"):
        return []
    pct = f"{decision.get('confidence', 0.95) * 100:g}%"
    lines = [f"    paired differences on shared tasks ({pct} interval over tasks"
             + (" and judge samples" if decision.get("samples", 1) > 1 else "")
             + "; p Holm-adjusted over the pairs; * = differs):"]
    pairs = decision["pairs"]
    for p in pairs[:limit]:
        if p.get("delta") is None:
            lines.append(f"      {terminal(p['a'])} - {terminal(p['b'])}: no shared task")
            continue
        ci = f" [{p['ci'][0]:.2f}, {p['ci'][1]:.2f}]" if p.get("ci") else ""
        pv = "" if p.get("p_holm") is None else f"  p {_p(p['p_value'])} (Holm {_p(p['p_holm'])})"
        noise = "" if p.get("judge_noise_share") is None else f"  judge noise {p['judge_noise_share']:.0%}"
        star = " *" if p.get("significant") else ""
        lines.append(f"      {terminal(p['a'])} - {terminal(p['b'])}: {p['delta']:+.2f}{ci}{pv}  "
                     f"n {p['n']}{noise}{star}")
    if len(pairs) > limit:
        lines.append(f"      ... and {len(pairs) - limit} more pairs (summary.json 'decisions')")
    first = decision.get("p_first")
    if first:
        shown = ", ".join(f"{terminal(a)} {v:.2f}" for a, v in sorted(first.items(), key=lambda kv: -kv[1]))
        lines.append(f"    P(ranks first, over the {decision.get('first_tasks')} tasks all scored): {shown}")
    return lines


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value >= 0.001 else "<0.001"


def _ci(low: float | None, high: float | None) -> str:
    return f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None else "-"


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    """The table from the summary alone (no rows at hand): its own means and intervals."""
    rows = summary.get("per_agent_method", [])
    lines: list[str] = []
    for method in sorted({r["method"] for r in rows}):
        block = sorted((r for r in rows if r["method"] == method),
                       key=lambda r: (r["mean"] is None or bool(r.get("unranked_reason")), -(r["mean"] or 0.0)))
        lines.append(f"\n  {method}")
        lines.append(f"    {'rank':<5}{'agent':<32}{'mean':>9}{'95% CI':>20}{'n':>6}{'failed':>8}{'skipped':>9}"
                     f"{'cost $':>10}{'uncached $':>12}{'judge s':>10}{'wait s':>10}")
        for i, r in enumerate(block, 1):
            ci = f"[{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]" if r.get("ci95") else "-"
            rank = "-" if r.get("unranked_reason") or r["mean"] is None else str(i)
            lines.append(f"    {rank:<5}{terminal(r['agent'])[:31]:<32}{_fmt(r['mean']):>9}{ci:>20}{r['n']:>6}"
                         f"{r['failed']:>8}{r.get('skipped', 0):>9}{cost_text(r['cost_usd']):>10}"
                         f"{cost_text(r.get('cost_usd_uncached')):>12}{_seconds(r.get('judge_s')):>10}"
                         f"{_seconds(r.get('quota_wait_s')):>10}")
        for r in block:
            if r.get("unranked_reason"):
                lines.append(f"    not ranked: {terminal(r['agent'])} ({terminal(r['unranked_reason'])})")
        lines += decision_lines((summary.get("decisions") or {}).get(method))
        lines += _method_extras(summary, method)
    return lines


def _seconds(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.1f}"


def _method_extras(summary: dict[str, Any], method: str) -> list[str]:
    """A method's own suite figures (e.g. FACT's pooled valid rate) and its notes."""
    lines = []
    for r in summary.get("per_agent_method", []):
        if r["method"] != method:
            continue
        for convention, figures in (r.get("suite") or {}).items():
            shown = ", ".join(f"{k} {_fmt(v)}" for k, v in figures.items())
            lines.append(f"      {terminal(r['agent'])[:31]} · {terminal(convention)}: {shown}")
    for note in (summary.get("notes") or {}).get(method, []):
        lines.append(f"    NOTE: {terminal(note)}")
    return lines


def _totals_line(summary: dict[str, Any]) -> str:
    t = summary.get("totals", {})
    lines = [
        f"\n  items {t.get('items', 0)} (failed {t.get('items_failed', 0)}, not applicable "
        f"{t.get('items_skipped', 0)}, inputs skipped "
        f"{t.get('inputs_skipped', 0)}) · calls {t.get('calls', 0)} · cache hits {t.get('cache_hits', 0)} · "
        f"retries {t.get('retries', 0)} · 429s {t.get('rate_limited_429', 0)} · tokens "
        f"{t.get('input_tokens', 0)}+{t.get('output_tokens', 0)} · cost {_dollars(t.get('cost_usd', 0.0))} · "
        f"{t.get('wall_time_s', 0):.1f}s"]
    lines += money_lines(t)
    if t.get("reasoning_tokens") or t.get("truncated_answers"):
        lines.append(f"  thinking: {t.get('reasoning_tokens', 0)} of {t.get('output_tokens', 0)} output tokens were "
                     f"reasoning (billed as output); answers cut off at the cap {t.get('truncated_answers', 0)}, "
                     f"retried with a larger cap {t.get('truncation_retries', 0)}"
                     + (f" (cut-off answers cost {_dollars(t.get('truncated_cost_usd'))})"
                        if t.get("truncated_answers") else "")
                     + (f"; later calls started {t['learned_output_room']} tokens above the answer cap"
                        if t.get("learned_output_room") else "")
                     + ("; the model was found to think and given room" if t.get("thinking_learned") else ""))
    lines.extend(_judge_notes(t))
    if t.get("cached_input_tokens"):
        share = t["cached_input_tokens"] / max(1, t.get("input_tokens", 0))
        lines.append(f"  prompt cache: {t['cached_input_tokens']} of {t.get('input_tokens', 0)} input tokens "
                     f"({share:.0%}) billed at the cached price; without it {_dollars(t.get('cost_usd_uncached'))}")
    if t.get("batched_calls") or "batches" in t:
        b = t.get("batches", {})
        lines.append(f"  batch API: {t.get('batched_calls', 0)} of {t.get('calls', 0)} calls batched, at batch prices; "
                     f"batches submitted {b.get('submitted', 0)}, re-attached {b.get('reattached', 0)}, "
                     f"completed {b.get('completed', 0)}, failed {b.get('failed', 0)}, expired {b.get('expired', 0)}")
    return "\n".join(lines)


def money_lines(totals: dict[str, Any]) -> list[str]:
    """The run ledger's lines: this invocation's spend beside the run's (when the run took
    more than one invocation), what calls lost in flight may have cost, and answers reused
    from a cache the run did not pay for."""
    ledger = totals.get("ledger") or {}
    lines = []
    if ledger.get("invocations", 1) > 1:
        lines.append(f"  money: {money_line(ledger)}; every paid call is in {ledger.get('file', 'ledger.jsonl')}")
    lost = may_have_billed(ledger)
    if lost:
        lines.append(f"  {lost}")
    reused = totals.get("reused") or {}
    if reused.get("answers"):
        lines.append(f"  reused: {reused['answers']} answers from a cache this run did not pay for (about "
                     f"{_dollars(reused.get('cost_usd_list'))} at list price), not counted as spend")
    return lines


def _dollars(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def failures_text(summary: dict[str, Any]) -> str | None:
    """``failed items by reason: budget 12, auth 3`` (None when nothing failed)."""
    reasons = summary.get("totals", {}).get("failure_reasons") or {}
    if not reasons:
        return None
    return "failed items by reason: " + ", ".join(f"{terminal(r)} {n}" for r, n in reasons.items())


def stop_text(summary: dict[str, Any]) -> str | None:
    """Why the run stopped early, as one line (None when it ran to the end)."""
    stop = summary.get("stopped")
    if not stop:
        return None
    return ("drscore: error: " if stop.get("fatal") else "drscore: stopped: ") + terminal(stop["message"])


def only_the_stop(summary: dict[str, Any]) -> bool:
    """True when the stop explains the whole run: nothing was scored and every item
    failed for the stop's reason (a broken endpoint met at the first call, say). The
    terminal then shows that one message and nothing else."""
    stop, t = summary.get("stopped"), summary.get("totals", {})
    if not stop:
        return False
    return t.get("items", 0) > 0 and t.get("items_failed") == t.get("items") and \
        t.get("failure_reasons") == {stop["reason"]: t["items"]}


def team_text(summary: dict[str, Any]) -> str | None:
    """The team Redis's failure that makes the run incomplete (out of memory), as one line."""
    team = summary.get("team") or {}
    if not team.get("out_of_memory"):
        return None
    return f"drscore: team: {terminal(team.get('degraded_reason', 'Redis out of memory'))} (exit 3)"


def team_incomplete(summary: dict[str, Any]) -> bool:
    """True when the team Redis refused writes for lack of memory: the run exits 3."""
    return bool((summary.get("team") or {}).get("out_of_memory"))


def end_of_run_lines(summary: dict[str, Any]) -> list[str]:
    """What the terminal's error stream shows after every run: the failure reasons with
    their counts, then why the run stopped (or only the latter, see :func:`only_the_stop`),
    then a team Redis that ran out of memory."""
    stop = stop_text(summary)
    if only_the_stop(summary):
        n = summary["totals"]["items"]
        return [f"{stop} — all {n} items failed for this reason"]
    return [line for line in (failures_text(summary), stop, team_text(summary)) if line]


def _pair_totals(summary: dict[str, Any]) -> dict[str, int]:
    """Total ``pairs`` subscore per method (claim-level methods report it per report)."""
    totals: dict[str, float] = {}
    for r in summary.get("per_agent_method", []):
        mean = r.get("subscores", {}).get("pairs")
        if mean is not None:
            totals[r["method"]] = totals.get(r["method"], 0.0) + mean * r["n"]
    return {m: round(v) for m, v in sorted(totals.items())}


def dry_run_text(summary: dict[str, Any], price_model: str | None) -> str:
    t = summary["totals"]
    lines = [f"Dry run: nothing was sent, fetched or paid (priced as {price_model or summary.get('judge')})."]
    lines.append(f"  {'method':<14}{'calls':>9}{'cached':>9}{'in tokens':>13}{'out tokens':>12}{'cost $':>11}  statuses")
    for name, m in summary.get("per_method", {}).items():
        statuses = ", ".join(f"{k}={v}" for k, v in sorted(m["statuses"].items()))
        lines.append(f"  {name:<14}{m['planned']:>9}{m['cache_hits']:>9}{m['input_tokens']:>13}"
                     f"{m['output_tokens']:>12}{cost_text(m['cost_usd']):>11}  {statuses}")
    lines.append(f"  {'total':<14}{t['planned_calls']:>9}{t['cache_hits']:>9}{t['planned_input_tokens']:>13}"
                 f"{t['planned_output_tokens']:>12}{cost_text(t['planned_cost_usd']):>11}")
    if "planned_input_tokens_error_total" in t and t.get("planned_calls"):
        lines.append(f"  input tokens: an estimate; counting the planned text, the total is within about "
                     f"±{t['planned_input_tokens_error_total']:.1%} (one call: ±{t['planned_input_tokens_error']:.0%}, "
                     f"{t['planned_input_tokens_basis']})")
        by_template = t.get("planned_input_by_template", {})
        if len({(p["error"], p["basis"]) for p in by_template.values()}) > 1:  # else the line above says it all
            for template, p in by_template.items():
                lines.append(f"    {template}: {p['tokens']:,} in {p['calls']:,} calls, ±{p['error']:.1%} ({p['basis']})")
    for template, f in t.get("planned_follow_ups", {}).items():
        lines.append(f"  {template}: {f['answers_planned']:,} planned with {f['per_answer']:g} {f['field']} each, "
                     f"the calls that follow {f['error_low']:+.0%}/{f['error_high']:+.0%} ({f['basis']})")
    reasoning = t.get("planned_reasoning_tokens_estimate", 0)
    if reasoning:
        source = ("the mean of this run's answered calls" if t.get("reasoning_estimate_source") == "learned"
                  else "the model family's documented prior, see docs/judges.md")
        lines.append(f"  reasoning (estimate): about {reasoning:,} of the {t['planned_output_tokens']:,} output tokens "
                     f"would be the judge's hidden thinking, billed as output ({source})")
    over = t.get("planned_over_quota")
    if over:
        lines.append(f"  warning: {over['calls']:,} planned call(s) are each larger than the token quota's whole minute "
                     f"({over['tpm']:,.0f} tokens): an endpoint that refuses such a call outright (OpenAI's \"Request too "
                     "large\") fails them alone (over_quota); raise the quota or shorten the inputs")
    lines.extend(_judge_notes(t))
    items = max(1, t["items"])
    lines.append(f"  {t['items']} report x method items; {t['planned_calls'] / items:.2f} calls per item")
    samples = (summary.get("overview") or {}).get("samples", 1)
    if samples > 1:
        lines.append(f"  --samples {samples}: every judge call is asked {samples} times as distinct requests "
                     "(counted above); answers already cached are not asked again")
    if t.get("priced_as") == "batch":
        lines.append("  priced at batch rates (--batch); answers arrive within the provider's 24h window")
    cached = t.get("planned_cached_input_tokens_estimate", 0)
    if cached:
        lines.append(f"  prompt cache (estimate): about {cached:,} of {t['planned_input_tokens']:,} input tokens "
                     f"({cached / max(1, t['planned_input_tokens']):.0%}) would be read from the provider's prefix "
                     "cache, priced at its cached-input rate; the real share depends on the provider")
    for method, pairs in _pair_totals(summary).items():
        lines.append(f"  {method}: {pairs:,} claim/statement pairs to judge")
    pages = summary.get("pages")
    if pages:
        n, held = pages.get("distinct_urls", 0), pages.get("in_page_cache", 0)
        if pages.get("offline_missing"):
            lines.append(f"  pages: {n} cited, {held} in the page cache; --offline-pages: the other "
                         f"{pages['offline_missing']} would not be fetched and count as unreachable")
        else:
            lines.append(f"  pages: {n} cited, {held} in the page cache; would be fetched: {pages.get('would_fetch', n)}")
        if n > held and not pages.get("offline_missing"):
            lines.append(f"    the {n - held} not in the page cache are planned with stand-ins of a typical length "
                         "(the stored pages' mean, else 12,000 characters): the input tokens' bar above does not cover "
                         "their real length")
    if t.get("inputs_skipped"):
        lines.append(f"  inputs skipped: {t['inputs_skipped']}")
    return "\n".join(lines)


def _judge_notes(t: dict[str, Any]) -> list[str]:
    """What a run and its dry run both warn of: an unknown price, a fatal stop after every
    item had its answer, rate-limit delays that could not be believed."""
    lines: list[str] = []
    if t.get("price_unknown"):
        lines.append(f"  warning: {unknown_price_message(t['price_unknown'])}")
    late = t.get("stop_after_all_items")
    if late and late.get("fatal"):  # every item had its answer, but what stopped the judge still matters
        lines.append(f"  note: {terminal(late['message'])}")
    fitted = t.get("output_caps_fitted")
    if fitted:
        cut = (f"; {fitted['cut']} answers ran past it and were asked again at the template's cap "
               f"(they cost {_dollars(fitted.get('cut_cost_usd'))})") if fitted["cut"] else "; no answer ran past it"
        lines.append(f"  note: the endpoint reserves each call's output cap against its token quota: calls went out "
                     f"with a cap fitted to their template's answers, {fitted['reserved_less']:,} tokens of quota "
                     f"not reserved{cut} (--fixed-output-cap sends the templates' own)")
    shortened = t.get("prompts_cut")
    if shortened:
        lines.append(f"  note: the judge's server cut {shortened['prompts']:,} prompt(s) to {shortened['read_to']:,} tokens, its "
                     "context, and answered about that part alone (Ollama does so past its num_ctx): those items "
                     "failed (context_length) and nothing of them was cached, and prompts clearly longer were not "
                     "sent. Raise the server's context (Ollama: OLLAMA_CONTEXT_LENGTH=32768, or num_ctx in a "
                     "Modelfile) and run again")
        if shortened.get("scored_before_known"):
            lines.append(f"  note: {shortened['scored_before_known']} answer(s) scored before that count showed read "
                         "exactly it: they were probably cut too, and their scores are suspect")
    unread = (t.get("judge_server") or {}).get("vocabulary_not_used")
    if unread:
        lines.append(f"  note: Ollama's vocabulary counted no prompt ({unread}): prompts were estimated, and one "
                     "near its context may have been cut; --tokenizer hf:PATH (the model's tokenizer.json) counts "
                     "them instead")
    gateway = t.get("gateway_quota")
    if gateway:
        paced = [f"{gateway[k]:,} {unit}/min" for k, unit in (("tokens_per_minute", "tokens"),
                                                              ("requests_per_minute", "requests")) if gateway.get(k)]
        window = f", up to {gateway['window_s']:g} s of it at once (its window)" if gateway.get("window_s") else ""
        pace = (f"paced at {' and '.join(paced)}{window}" if paced else
                "its headers gave no window of a minute or less to pace by, so the pace was learned from its refusals")
        refusals = f"; {gateway['refusals']} refusal(s), each waited out" if gateway["refusals"] else ""
        lines.append(f"  note: an AI gateway keeps the quota ({gateway['headers']} headers): {pace}{refusals}")
    split = t.get("split_token_quota")
    if split:
        paced = [f"prompts at {split['input_tokens_per_minute']:,} input tokens/min"] \
            if split.get("input_tokens_per_minute") else []
        if split.get("output_tokens_per_minute"):
            waited = (f", {split['waited_for_output']} call(s) waited {split['output_wait_s']:g} s for it"
                      if split["waited_for_output"] else "")
            paced.append(f"output caps held against {split['output_tokens_per_minute']:,} output tokens/min{waited}")
        lines.append(f"  note: the endpoint limits input and output tokens apart: {'; '.join(paced)}")
    named = t.get("quota_named_by_429")
    if named:
        following = ", and the next run against this endpoint starts from it (kept in the cache)" if named["kept"] else ""
        lines.append(f"  note: no quota headers, but a 429's body named the quota ({terminal(named['quota'])}): paced "
                     f"at it from then on{following}")
    learned = t.get("learned_quota")
    if learned:
        took = [f"{learned[k]:,} {unit}/min" for k, unit in (("proven_rpm", "requests"), ("proven_tpm", "tokens"))
                if learned.get(k)]
        option, rate = ("--tpm", learned.get("proven_tpm")) if learned.get("binding") == "tokens" else (
            "--rpm", learned.get("proven_rpm"))
        resumed = learned.get("resumed")
        if resumed:
            unit = "tokens" if resumed["binding"] == "tokens" else "requests"
            lines.append(f"  note: no quota headers: the run started from the pace an earlier run's calls proved "
                         f"({resumed['per_minute']:,} {unit}/min, kept in the cache) and went on learning from 429s")
        if took and rate:
            # the binding dimension's proof: telling it paces the next run from its first request
            following = (f"the next run against this endpoint starts from that pace (kept in the cache), or "
                         f"{option} {rate} tells it the quota" if learned.get("kept") else
                         f"{option} {rate} paces the next run from its first request")
            shown = f" (each 429 and how the pace moved: {learned['pacing_file']})" if learned.get("pacing_file") else ""
            lines.append(f"  note: no quota headers, so the pace was learned from 429s ({learned['binding']} bind): "
                         f"the endpoint took at least {' and '.join(took)}; {following}{shown}")
            if learned.get("guessed"):
                # Where no refusal ruled the other dimension out, the sizes chose, and a request
                # quota can look like a token one to them (docs/pacing-notebook.md, bench.headerless at 400
                # requests a minute: 3 runs of 15 paced tokens and left 45% of the quota idle)
                # A run started from such a pace meets no 429 to say so: the earlier run's guess
                earlier = " by the earlier run this one started from" if resumed and not learned.get("votes") else ""
                lines.append(f"  note: which quota binds was guessed from the refused calls' sizes{earlier} (no 429 "
                             "ruled the other out): if you know the endpoint's quota, --rpm or --tpm tells it")
    estimated, refused = t.get("prompts_estimated"), t.get("rate_limited_429", 0)
    if estimated and estimated.get("token_quota") and (
            refused or estimated.get("relative_error", 0.0) >= ESTIMATE_NOTE_ERROR):
        # The token pace keeps two of the estimates' deviations in hand, and a prompt counted
        # above its estimate can still be refused: the model's tokenizer counts them exactly.
        met = f"{refused} 429(s); " if refused else ""
        lines.append(f"  note: {met}the token quota's prompts were estimated on {terminal(estimated['on'])} "
                     f"({estimated['relative_error']:.1%} off a call, learned), not counted: --tokenizer with the "
                     f"judge model's tokenizer counts each one here")
    hints = t.get("unusable_rate_limit_hints")
    if hints:
        lines.append(f"  note: {hints['count']} rate-limit answer(s) gave a delay that cannot be believed "
                     f"({terminal(hints['last'])}); waited --max-rate-limit-wait {hints['waited_s']:g} s instead")
    return lines
