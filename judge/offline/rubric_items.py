"""Offline (lexical) rules for the ``rubric-items`` prompts: a baseline, not a judge.

A criterion counts as met when at least half of its key terms occur in the report: words
of four or more letters that are not common function words, or, in Chinese, pairs of
adjacent characters. A penalty criterion (something a report must not do) is never
found met: the words of "must not claim X" and of a report that rightly discusses X are
the same, so a lexical rule cannot tell them apart and does not try. The same decision
comes out of one call per item and of several items per call."""
from __future__ import annotations

import re
from typing import Any

from drscore.judge.offline import rule

THRESHOLD = 0.5
_WORD = re.compile(r"[a-z][a-z0-9'’-]{3,}")
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_STOP = frozenset("""about above after again against also among because been before being below between both
could does doing down during each every from further have having here into itself more most much must only other
over same should some such than that their them then there these they this those through under until very were
what when where which while whom will with would your report reports gives give states least such e.g.""".split())
_ITEM = re.compile(r"^(item_\d+)( \(penalty\))?: (.*)$")


def key_terms(text: str) -> set[str]:
    """The criterion's content words (Latin script) and character pairs (Chinese)."""
    low = text.lower()
    terms = {w.strip("'’-") for w in _WORD.findall(low)} - _STOP
    for run in _HAN.findall(text):
        terms.update(run[i:i + 2] for i in range(len(run) - 1))
    return {t for t in terms if t}


def decide(criterion: str, report: str, penalty: bool) -> tuple[bool, str]:
    """``(met, reason)`` for one criterion."""
    if penalty:
        return False, "offline judge: penalty criteria are not checked lexically"
    terms = key_terms(criterion)
    if not terms:
        return False, "offline judge: the criterion has no key terms to look for"
    text = report.lower()
    found = sum(1 for t in terms if t in text)
    met = found / len(terms) >= THRESHOLD
    return met, f"offline judge: {found} of {len(terms)} key terms of the criterion occur in the report"


@rule("rubric_item")
def rubric_item(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    penalty = "must not do" in str(variables.get("polarity", ""))
    met, reason = decide(str(variables["criterion"]), str(variables["report"]), penalty)
    return {"reason": reason, "met": met}


@rule("rubric_items")
def rubric_items(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for line in str(variables["criteria"]).splitlines():
        m = _ITEM.match(line)
        if m:
            met, reason = decide(m.group(3), str(variables["report"]), bool(m.group(2)))
            out[m.group(1)] = {"reason": reason, "met": met}
    return out
