"""Offline (lexical/heuristic) rules for the RACE and ACE prompts.

These are baselines, not judges: deterministic, fast and explainable.

* dimension weights: keyword cues in the task text shift a fixed prior;
* criteria and checklist items: the task prompt's clauses, one criterion per clause
  (generic items fill up short prompts);
* criterion and item scores: how many of the criterion's content terms (the project's
  index terms of :mod:`drscore.engine.text.passages`: words and numbers, character bigrams for
  Chinese/Japanese text) occur in the article, on a square-root
  scale so partial coverage is not crushed; readability criteria also look at structure
  (headings, lists/tables, paragraph length).
"""
from __future__ import annotations

import functools
import math
import re
from typing import Any

import orjson

from drscore.engine.text.citations import strip_citations
from drscore.engine.methods.race.criteria import DIMENSIONS, STATIC_CRITERIA, normalise
from drscore.engine.text.passages import terms as index_terms
from drscore.judge.offline import rule

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
# Words and bigrams that task prompts, criteria and reports all use, whatever the topic:
# counting them would reward every article alike.
_BOILERPLATE = frozenset(
    """report reports article provide provides including include includes based please etc via
    well many must one two analysis analyze analyse 报告 是否 评估 进行 以及 等等 包括 相关 提供
    哪些 什么 如何 一个 这些 我们 目前 需要 请帮 帮我 分析""".split()
)

_SENTENCE = re.compile(r"(?<=[.?!;])\s+|[。？！；\n]+|[?!;](?=\S)")
_COMMA = re.compile(r"[,，、]\s*|\s+and\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s", re.MULTILINE)
_LIST_OR_TABLE = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|\|)", re.MULTILINE)

MAX_CRITERIA_PER_DIMENSION = 6
# Generic checklist items that fill up short prompts, in the task's script so that the
# lexical scorer can find their terms in the report.
GENERIC_CHECKLIST = (
    "Supports its main claims with specific data, examples and named sources",
    "Draws clear, well-founded conclusions that answer the task",
    "Is clearly organised and easy to follow",
)
GENERIC_CHECKLIST_ZH = (
    "用具体数据、案例和明确来源支撑主要观点",
    "得出清晰、有依据并回应任务的结论",
    "结构清晰，层次分明，便于阅读",
)


# ------------------------------------------------------------------ text features

# Bounded: keys are whole articles; a task's reference and target are reused within a task.
@functools.lru_cache(maxsize=64)
def terms(text: str) -> frozenset[str]:
    """Content terms: :func:`drscore.engine.text.passages.terms` (words, numbers, CJK bigrams) without
    topic-free boilerplate."""
    return frozenset(t for t in index_terms(text) if t not in _BOILERPLATE)


def coverage(needle: str, article_terms: frozenset[str]) -> float:
    """Share of ``needle``'s content terms present in the article (0 when it has none)."""
    wanted = terms(needle)
    if not wanted:
        return 0.0
    return len(wanted & article_terms) / len(wanted)


def scale10(share: float) -> float:
    """Map a 0-1 share to 0-10 on a square-root scale, one decimal."""
    return round(10.0 * math.sqrt(max(0.0, min(1.0, share))), 1)


@functools.lru_cache(maxsize=64)
def structure(text: str) -> float:
    """0-1 readability proxy: headings, lists or tables, and moderate paragraph length."""
    headings = len(_HEADING.findall(text))
    lists = len(_LIST_OR_TABLE.findall(text))
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    mean_len = sum(len(p) for p in paragraphs) / len(paragraphs) if paragraphs else 0.0
    # Paragraphs of roughly 150-900 characters read well in both scripts.
    para = 1.0 if 150 <= mean_len <= 900 else 0.5 if mean_len > 0 else 0.0
    return (min(headings, 4) / 4 + min(lists, 5) / 5 + para) / 3


def clauses(prompt: str, limit: int = MAX_CRITERIA_PER_DIMENSION) -> list[str]:
    """The task's requests: sentences, or comma-separated parts when there are few sentences."""
    parts = [p.strip(" \t.,;:，。；：") for p in _SENTENCE.split(prompt)]
    parts = [p for p in parts if _substantial(p)]
    if len(parts) < 3:
        finer = [q.strip(" \t.,;:，。；：") for p in (parts or [prompt]) for q in _COMMA.split(p)]
        finer = [q for q in finer if _substantial(q)]
        if len(finer) > len(parts):
            parts = finer
    out: list[str] = []
    seen: set[str] = set()
    for p in parts:
        key = p.casefold()
        if key not in seen:
            seen.add(key)
            out.append(p[:200])
    return out[:limit]


def _substantial(text: str) -> bool:
    return len(terms(text)) >= 2


# ------------------------------------------------------------------ RACE task-level

_CUES: dict[str, tuple[str, ...]] = {
    "comprehensiveness": ("collect", "list", "overview", "survey", "summar", "review", "landscape",
                          "comprehensive", "all ", "various", "收集", "整理", "梳理", "汇总", "全面",
                          "综述", "列出", "现状"),
    "insight": ("why", "analy", "evaluat", "assess", "predict", "forecast", "trend", "implication",
                "impact", "recommend", "strateg", "future", "分析", "评估", "预测", "趋势", "为什么",
                "原因", "影响", "建议", "前景", "潜力", "未来"),
    "instruction_following": ("must", "include", "should", "specific", "at least", "format", "within",
                              "focus", "需要", "要求", "包括", "必须", "格式", "重点", "特别"),
    "readability": ("mind map", "table", "chart", "structured", "outline", "思维导图", "表格", "图表",
                    "结构", "框架"),
}
_PRIOR = {"comprehensiveness": 0.3, "insight": 0.3, "instruction_following": 0.2, "readability": 0.2}


def cue_weights(prompt: str) -> tuple[dict[str, float], dict[str, int]]:
    """Prior weights shifted by 0.05 per cue found (at most 0.15 per dimension), renormalised."""
    low = prompt.lower()
    hits = {d: sum(1 for c in cues if c in low) for d, cues in _CUES.items()}
    raw = [_PRIOR[d] + 0.05 * min(hits[d], 3) for d in DIMENSIONS]
    return dict(zip(DIMENSIONS, normalise(raw))), hits


@rule("race_weights")
def race_weights(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    weights, hits = cue_weights(variables["task_prompt"])
    cue_text = ", ".join(f"{d}: {n}" for d, n in hits.items())
    return {"rationale": f"offline baseline: prior weights shifted by keyword cues ({cue_text})",
            **{d: round(weights[d], 4) for d in DIMENSIONS}}


_CRITERION_FORMS: dict[str, tuple[str, str]] = {
    "comprehensiveness": ("Coverage of: {c}",
                          "Gathers relevant facts, figures and sources on this part of the task: {c}"),
    "insight": ("Analysis of: {c}",
                "Explains causes, implications and trade-offs and draws supported conclusions about: {c}"),
    "instruction_following": ("Answers the request: {c}",
                              "Directly and explicitly does what the task asks here: {c}"),
}


@rule("race_criteria")
def race_criteria(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    dim = variables["dimension"]
    generic = [{"criterion": c.criterion, "explanation": c.explanation, "weight": c.weight}
               for c in STATIC_CRITERIA.get(dim, STATIC_CRITERIA["readability"])]
    if dim not in _CRITERION_FORMS:
        return {"criteria": generic}
    name, explanation = _CRITERION_FORMS[dim]
    items: list[dict[str, Any]] = [{"criterion": name.format(c=c), "explanation": explanation.format(c=c), "weight": 1.0}
             for c in clauses(variables["task_prompt"])]
    # Short prompts: fill up with generic criteria so every dimension has at least three.
    items += generic[: max(0, 3 - len(items))]
    weights = normalise([i["weight"] for i in items])
    return {"criteria": [{**i, "weight": round(w, 4)} for i, w in zip(items, weights)]}


# ------------------------------------------------------------------ RACE per report

def _criteria_from(variables: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    shown = orjson.loads(variables["criteria_list"])
    return {d: shown.get(d, []) for d in DIMENSIONS}


def criterion_score(dim: str, criterion: dict[str, str], article: str) -> float:
    """0-10 lexical score of one article on one criterion."""
    text = f"{criterion.get('criterion', '')} {criterion.get('explanation', '')}"
    lexical = scale10(coverage(text, terms(article)))
    if dim == "readability":
        return round((lexical + 10.0 * structure(article)) / 2, 1)
    return lexical


@rule("race_score")
def race_score(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    a1, a2 = variables["article_1"], variables["article_2"]
    out: dict[str, Any] = {}
    for dim, items in _criteria_from(variables).items():
        rows = []
        for c in items:
            s1, s2 = criterion_score(dim, c, a1), criterion_score(dim, c, a2)
            rows.append({"criterion": c["criterion"],
                         "analysis": f"offline lexical baseline: criterion term coverage {s1} vs {s2}",
                         "article_1_score": s1, "article_2_score": s2})
        out[dim] = rows
    return out


@rule("race_score_pointwise")
def race_score_pointwise(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    article = variables["article"]
    out: dict[str, Any] = {}
    for dim, items in _criteria_from(variables).items():
        out[dim] = []
        for c in items:
            s = criterion_score(dim, c, article)
            out[dim].append({"criterion": c["criterion"],
                             "analysis": f"offline lexical baseline: criterion term coverage {s}",
                             "target_score": s})
    return out


@rule("race_vanilla")
def race_vanilla(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    article = variables["article"]
    lexical = scale10(coverage(variables["task_prompt"], terms(article)))
    score = round(0.7 * lexical + 3.0 * structure(article), 1)
    return {"analysis": f"offline baseline: task term coverage {lexical}/10, structure "
                        f"{structure(article):.2f}", "score": min(10.0, score)}


@rule("race_clean")
def race_clean(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {"article": strip_citations(variables["article"])}


# ------------------------------------------------------------------ ACE

@rule("ace_checklist")
def ace_checklist(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    asked = clauses(variables["task_prompt"], limit=5)
    # Requests from the task weigh twice a generic item.
    generic = GENERIC_CHECKLIST_ZH if _CJK.search(variables["task_prompt"]) else GENERIC_CHECKLIST
    items = [(c, 2.0) for c in asked] + [(g, 1.0) for g in generic]
    items = items[: max(3, min(6, len(asked) + 1))]
    weights = normalise([w for _, w in items])
    return {"items": [{"item": t, "weight": round(w, 4)} for (t, _), w in zip(items, weights)]}


@rule("ace_item")
def ace_item(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    share = coverage(variables["item"], terms(variables["report"]))
    score = int(round(scale10(share)))
    return {"justification": f"offline lexical baseline: {share:.0%} of the item's terms appear in the report",
            "score": score}
