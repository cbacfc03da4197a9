"""RACE criteria: the four dimensions, weighted criteria per task, and the criteria file.

A criteria file is DeepResearch Bench's ``criteria.jsonl``: one task a line,
``{id, prompt, dimension_weight{<dim>: w}, criterions{<dim>: [{criterion, explanation,
weight}]}}``. Extra keys on a criterion (the shipped file has ``comment``, ``aspect``,
``rationale_for_weight`` on some tasks) are ignored. Weights are kept exactly as written:
the benchmark's aggregation divides by the sum of matched weights itself, and a
renormalised copy would change which weight a fuzzy-matched criterion text picks up.

The project's static generic criteria (the "static criteria" ablation of RACE) live here
too, so the method and the re-scorer read one definition.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from drscore.engine.runtime.io import as_id, read_jsonl
from drscore.engine.runtime.models import InputError

# Fixed order used everywhere (prompts, outputs, tables).
DIMENSIONS: tuple[str, ...] = ("comprehensiveness", "insight", "instruction_following", "readability")

# One line per dimension, shown to the judge when it writes weights and criteria.
DIMENSION_DESCRIPTIONS: dict[str, str] = {
    "comprehensiveness": "breadth and completeness of coverage: the report addresses every part of "
    "the question with enough relevant facts, data and perspectives",
    "insight": "depth and originality of analysis: causes, implications, trade-offs, well-founded "
    "judgements and conclusions that go beyond restating sources",
    "instruction_following": "how closely the report does what the task asked: the requested scope, "
    "objects, questions, constraints and output form",
    "readability": "clarity of structure and language: logical organisation, fluent wording, "
    "appropriate use of headings, lists and tables, easy to follow",
}

# The same meanings in Chinese, for the Chinese criteria template (project's own wording).
DIMENSION_DESCRIPTIONS_ZH: dict[str, str] = {
    "comprehensiveness": "覆盖面的广度与完整性：报告回应了问题的每个部分，并给出足够的相关事实、数据和视角",
    "insight": "分析的深度与独到程度：原因、影响、取舍，以及超越复述资料、有依据的判断和结论",
    "instruction_following": "报告在多大程度上做了任务要求的事：要求的范围、对象、问题、限制条件和输出形式",
    "readability": "结构与语言的清晰度：组织有条理，表达流畅，标题、列表和表格使用得当，易于阅读",
}


class CriteriaError(ValueError):
    """A criteria file (or record) that cannot be used; the message names file and line."""


class Criterion(msgspec.Struct, frozen=True):
    """One weighted criterion of one dimension."""

    criterion: str
    explanation: str
    weight: float


class TaskCriteria(msgspec.Struct, frozen=True, kw_only=True):
    """Dimension weights and per-dimension criteria of one task."""

    task_id: str
    prompt: str
    dimension_weight: dict[str, float]
    criterions: dict[str, tuple[Criterion, ...]]

    @property
    def n_criteria(self) -> int:
        return sum(len(c) for c in self.criterions.values())


def normalise(weights: Sequence[float]) -> list[float]:
    """Scale non-negative ``weights`` to sum to 1; all zero (or empty sum) gives uniform weights."""
    if not weights:
        return []
    clipped = [w if math.isfinite(w) and w > 0 else 0.0 for w in weights]
    total = sum(clipped)
    if total <= 0:
        return [1.0 / len(weights)] * len(weights)
    return [w / total for w in clipped]


def normalise_dimension_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Renormalise a ``{dimension: weight}`` map over :data:`DIMENSIONS` (missing = 0)."""
    values = normalise([float(weights.get(d, 0.0)) for d in DIMENSIONS])
    return dict(zip(DIMENSIONS, values))


def mean_dimension_weights(samples: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Average several judge samples of the dimension weights, each renormalised first
    (so one sample written in percent does not outweigh the others), then renormalise."""
    rows = [normalise_dimension_weights(s) for s in samples]
    if not rows:
        raise ValueError("no dimension weight samples to average")
    return normalise_dimension_weights({d: sum(r[d] for r in rows) / len(rows) for d in DIMENSIONS})


def uniform_dimension_weights(tc: TaskCriteria) -> TaskCriteria:
    """The "no dimension weights" variant: every dimension weighs 1/4."""
    return msgspec.structs.replace(tc, dimension_weight={d: 1.0 / len(DIMENSIONS) for d in DIMENSIONS})


def uniform_criterion_weights(tc: TaskCriteria) -> TaskCriteria:
    """The "no criterion weights" variant: criteria of a dimension weigh equally."""
    return msgspec.structs.replace(
        tc,
        criterions={
            d: tuple(msgspec.structs.replace(c, weight=1.0 / len(cs)) for c in cs)
            for d, cs in tc.criterions.items()
        },
    )


def build_task_criteria(
    task_id: str,
    prompt: str,
    dimension_weight: Mapping[str, float],
    criterions: Mapping[str, Iterable[Criterion]],
) -> TaskCriteria:
    """Assemble judge-generated parts: dimension weights and each dimension's criterion
    weights are renormalised to sum to 1 (METHODS.md §1 steps 1-2)."""
    dims: dict[str, tuple[Criterion, ...]] = {}
    for d in DIMENSIONS:
        items = tuple(criterions.get(d, ()))
        weights = normalise([c.weight for c in items])
        dims[d] = tuple(msgspec.structs.replace(c, weight=w) for c, w in zip(items, weights))
    return TaskCriteria(
        task_id=task_id,
        prompt=prompt,
        dimension_weight=normalise_dimension_weights(dimension_weight),
        criterions=dims,
    )


# The static generic criteria: task-independent, written for this project. Weights per
# dimension sum to 1.
_STATIC: dict[str, tuple[tuple[str, str, float], ...]] = {
    "comprehensiveness": (
        ("Coverage of every part of the question",
         "Each sub-question, object and aspect named in the task is addressed, none skipped.", 0.3),
        ("Supporting facts and data",
         "Claims are backed by concrete figures, dates, examples or named sources rather than generalities.", 0.25),
        ("Range of perspectives",
         "Relevant viewpoints, stakeholders, regions or schools of thought are represented.", 0.2),
        ("Background and context",
         "Definitions, history and context needed to understand the topic are supplied.", 0.15),
        ("Currency of information",
         "Information is recent enough for the question and time-sensitive facts are dated.", 0.1),
    ),
    "insight": (
        ("Analysis beyond description",
         "The report explains causes, mechanisms and relationships instead of listing facts.", 0.3),
        ("Well-founded conclusions",
         "Judgements and recommendations follow from the evidence presented and are stated clearly.", 0.25),
        ("Trade-offs, risks and limitations",
         "Uncertainties, counter-arguments, risks and the limits of the evidence are discussed.", 0.2),
        ("Synthesis across sources",
         "Findings from different sources are compared and combined into a coherent picture.", 0.15),
        ("Originality",
         "The report offers non-obvious observations, frameworks or forward-looking implications.", 0.1),
    ),
    "instruction_following": (
        ("Answers the question that was asked",
         "The central request of the task is answered directly and explicitly.", 0.4),
        ("Respects scope and constraints",
         "Stated limits on topic, time period, region, audience or number of items are kept.", 0.3),
        ("Delivers the requested form",
         "Requested outputs (comparisons, rankings, tables, recommendations, formats) are provided.", 0.2),
        ("Stays on topic",
         "Little material is irrelevant to the task.", 0.1),
    ),
    "readability": (
        ("Logical structure",
         "Sections follow a clear order with informative headings and an introduction and conclusion.", 0.3),
        ("Clear and fluent language",
         "Sentences are precise, grammatical and free of jargon that is not explained.", 0.3),
        ("Effective presentation of data",
         "Lists and tables are used where they make comparisons or figures easier to read.", 0.2),
        ("Concision",
         "The report avoids repetition and padding; paragraphs have one main point each.", 0.2),
    ),
}

STATIC_CRITERIA: dict[str, tuple[Criterion, ...]] = {
    d: tuple(Criterion(criterion=c, explanation=e, weight=w) for c, e, w in items)
    for d, items in _STATIC.items()
}


def static_task_criteria(task_id: str, prompt: str, dimension_weight: Mapping[str, float]) -> TaskCriteria:
    """The static generic criteria with the task's own dimension weights."""
    return TaskCriteria(
        task_id=task_id,
        prompt=prompt,
        dimension_weight=normalise_dimension_weights(dimension_weight),
        criterions=dict(STATIC_CRITERIA),
    )


# ---------------------------------------------------------------------------- file parsing

def _weight(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise CriteriaError(f"{where}: weight must be a non-negative number, got {value!r}")
    return float(value)


def parse_criteria_record(obj: Any, origin: str = "<criteria>") -> TaskCriteria:
    """Validate one decoded criteria record; errors name ``origin`` and the field."""
    if not isinstance(obj, dict):
        raise CriteriaError(f"{origin}: expected a JSON object")
    task_id = as_id(obj.get("id", obj.get("task_id")))
    if task_id is None:
        raise CriteriaError(f"{origin}: missing field 'id'")
    prompt = obj.get("prompt", "")
    if not isinstance(prompt, str):
        raise CriteriaError(f"{origin}: field 'prompt' must be a string")
    dw = obj.get("dimension_weight")
    if not isinstance(dw, dict):
        raise CriteriaError(f"{origin}: missing object field 'dimension_weight'")
    crits = obj.get("criterions")
    if not isinstance(crits, dict):
        raise CriteriaError(f"{origin}: missing object field 'criterions'")
    dimension_weight: dict[str, float] = {}
    criterions: dict[str, tuple[Criterion, ...]] = {}
    for d in DIMENSIONS:
        if d not in dw:
            raise CriteriaError(f"{origin}: dimension_weight lacks {d!r}")
        dimension_weight[d] = _weight(dw[d], f"{origin}: dimension_weight.{d}")
        items = crits.get(d)
        if not isinstance(items, list) or not items:
            raise CriteriaError(f"{origin}: criterions.{d} must be a non-empty list")
        parsed = []
        for k, item in enumerate(items):
            where = f"{origin}: criterions.{d}[{k}]"
            if not isinstance(item, dict):
                raise CriteriaError(f"{where}: expected an object")
            text = item.get("criterion")
            if not isinstance(text, str) or not text.strip():
                raise CriteriaError(f"{where}: missing or empty 'criterion'")
            explanation = item.get("explanation", "")
            if not isinstance(explanation, str):
                raise CriteriaError(f"{where}: 'explanation' must be a string")
            parsed.append(Criterion(criterion=text, explanation=explanation,
                                    weight=_weight(item.get("weight"), where)))
        criterions[d] = tuple(parsed)
    return TaskCriteria(task_id=task_id, prompt=prompt, dimension_weight=dimension_weight, criterions=criterions)


def load_criteria(path: str | Path) -> dict[str, TaskCriteria]:
    """Read a DeepResearch Bench criteria JSONL into ``{task_id: TaskCriteria}``.

    The file is an input the whole run depends on, so any bad line is an error
    (:class:`CriteriaError` naming file and line) rather than a skipped task.
    """
    path = Path(path)
    if not path.is_file():
        raise CriteriaError(f"criteria file not found: {path}")
    out: dict[str, TaskCriteria] = {}
    malformed: list[InputError] = []
    for origin, obj in read_jsonl(path, malformed):
        if malformed:
            break
        tc = parse_criteria_record(obj, origin)
        if tc.task_id in out:
            raise CriteriaError(f"{origin}: duplicate task id {tc.task_id!r}")
        out[tc.task_id] = tc
    if malformed:
        raise CriteriaError(str(malformed[0]))
    if not out:
        raise CriteriaError(f"{path}: no criteria records")
    return out


def find_task_criteria(table: Mapping[str, TaskCriteria], task_id: str, prompt: str) -> TaskCriteria | None:
    """Look a task up by id, else by its exact prompt text (the benchmark keys by prompt)."""
    tc = table.get(task_id)
    if tc is not None:
        return tc
    wanted = prompt.strip()
    return next((c for c in table.values() if c.prompt.strip() == wanted and wanted), None)
