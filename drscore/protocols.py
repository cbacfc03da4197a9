"""Published judge set-ups as presets (``drscore run --protocol NAME``).

A protocol fills in what its paper states about the judge — the model, its thinking
budget, whether the provider's default temperature is used, method options such as the
number of weight samples — as *defaults*: anything set explicitly (a flag, a config file,
a field of :class:`drscore.api.RunConfig`) wins. What each value is based on, and where
drscore's own defaults differ from the published runs, is in docs/judges.md.
"""
from __future__ import annotations

from typing import Any

import msgspec


class Protocol(msgspec.Struct, frozen=True, kw_only=True):
    """One published judge set-up. ``provider_temperature``: leave temperature to the
    provider (the paper states none, or runs at the default); ``method_options``: defaults
    for method options (option names with underscores, as in ``RunConfig.method_options``)."""

    name: str
    judge_model: str
    source: str  # where the values come from
    thinking_budget: int | None = None
    provider_temperature: bool = False
    method_options: dict[str, Any] = {}


PROTOCOLS: dict[str, Protocol] = {
    "drb": Protocol(
        name="drb", judge_model="gemini-2.5-pro", thinking_budget=16_000, provider_temperature=True,
        method_options={"race_weight_samples": 5, "prompt_language": "auto"},
        source="DeepResearch Bench: RACE judged by Gemini-2.5-Pro (Sec. 4.1.1); a thinking budget of 16,000 "
               "tokens is the paper's setting for thinking models (App. H.2, stated for the evaluated models; "
               "the judge's own is not stated); no judge temperature stated; the benchmark's weight generator "
               "draws 5 samples; Chinese tasks get Chinese instructions"),
    "drb-fact": Protocol(
        name="drb-fact", judge_model="gemini-2.5-flash", provider_temperature=True,
        method_options={"prompt_language": "auto"},
        source="DeepResearch Bench: FACT's extraction and support judgement by Gemini-2.5-Flash "
               "(Sec. 4.1.1); no temperature stated"),
    "reporteval": Protocol(
        name="reporteval", judge_model="gpt-4o", provider_temperature=True,
        source="DeepResearch-ReportEval: every LLM-as-a-judge step uses GPT-4o (Sec. 3); no temperature "
               "stated, so the provider's default"),
    "arena": Protocol(
        name="arena", judge_model="gemini-2.5-flash", provider_temperature=True,
        source="DeepResearch Arena: Gemini-2.5-Flash is the one evaluator of KAE and ACE (experimental setup); no "
               "judge temperature stated"),
    "rigorous": Protocol(
        name="rigorous", judge_model="gpt-4o-2024-11-20",
        source="Rigorous Bench: gpt-4o-2024-11-20 scores each rubric (Sec. 5.1); temperature 0.0 "
               "(drscore's templates already use 0.0)"),
}


def protocol(name: str) -> Protocol:
    """The named protocol; ValueError naming the choices otherwise."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown --protocol {name!r}; choose one of {', '.join(PROTOCOLS)}") from None
