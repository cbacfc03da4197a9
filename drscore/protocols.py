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


# DeepResearch Bench's judge client (utils/api.py, AIClient.generate) sends every call,
# RACE's and FACT's alike, with thinking_config thinking_budget=16000 and no output cap
# (no max_output_tokens); one published version pins gemini-2.5-pro-preview-06-05 (RACE)
# and gemini-2.5-flash-preview-05-20 (FACT), a later one reads GEMINI_MODEL_NAME /
# GEMINI_FACT_MODEL with gemini-2.5-pro / gemini-2.5-flash as defaults. No temperature is
# set anywhere in it.
_DRB_CLIENT = ("the authors' client (utils/api.py) sends thinking_budget=16000 on every call, no output cap and "
               "no temperature, and pins gemini-2.5-pro-preview-06-05 / gemini-2.5-flash-preview-05-20 in one "
               "published version (gemini-2.5-pro / gemini-2.5-flash by default in a later one)")

PROTOCOLS: dict[str, Protocol] = {
    "drb": Protocol(
        name="drb", judge_model="gemini-2.5-pro", thinking_budget=16_000, provider_temperature=True,
        method_options={"race_weight_samples": 5, "prompt_language": "auto"},
        source="DeepResearch Bench: RACE judged by Gemini-2.5-Pro (Sec. 4.1.1); " + _DRB_CLIENT + "; the "
               "benchmark's weight generator draws 5 samples; Chinese tasks get Chinese instructions"),
    "drb-fact": Protocol(
        name="drb-fact", judge_model="gemini-2.5-flash", thinking_budget=16_000, provider_temperature=True,
        method_options={"prompt_language": "auto"},
        source="DeepResearch Bench: FACT's extraction and support judgement by Gemini-2.5-Flash "
               "(Sec. 4.1.1); " + _DRB_CLIENT),
    "reporteval": Protocol(
        name="reporteval", judge_model="gpt-4o", provider_temperature=True,
        source="DeepResearch-ReportEval: every LLM-as-a-judge step uses GPT-4o (Sec. 3); no temperature "
               "stated, so the provider's default"),
    "arena": Protocol(
        name="arena", judge_model="gemini-2.5-flash", provider_temperature=True,
        source="DeepResearch Arena: Gemini-2.5-Flash is the one evaluator of KAE and ACE (experimental setup); no "
               "judge temperature stated"),
    "rigorous": Protocol(
        name="rigorous", judge_model="gpt-4o-2024-11-20", provider_temperature=True,
        source="Rigorous Bench: gpt-4o-2024-11-20 scores each rubric (Sec. 5.1); the judge's temperature is not "
               "stated (the section's 'temperature=0.0' is that of the thirteen evaluated models, not the judge's), "
               "so the provider's default, as for the other presets"),
}


def protocol(name: str) -> Protocol:
    """The named protocol; ValueError naming the choices otherwise."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown --protocol {name!r}; choose one of {', '.join(PROTOCOLS)}") from None
