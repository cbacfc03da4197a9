"""Which language a method's judge instructions are written in.

DeepResearch Bench has Chinese and English tasks and instructs its judge in the task's
language. Methods whose templates have a Chinese version (``prompts/<name>_zh.md``:
RACE's weights, criteria, scoring and cleaning, ReportEval's quality and redundancy,
FACT's extraction, de-duplication and support)
pick it per task with :func:`template_for`:

* ``--prompt-language en`` / ``zh`` forces one language;
* ``auto`` (default) reads the task's ``language`` field (``zh``, ``zh-CN``, ``Chinese``,
  ``中文`` ... -> zh; anything else given -> en) and, when the task has none, detects
  it from the prompt (:func:`detect_language`).

The template actually used is recorded with every verdict (its ``template`` field) and
in the row's ``details["prompt_language"]``.
"""
from __future__ import annotations

from drscore import prompts
from drscore.engine.runtime.method import Option
from drscore.engine.runtime.models import Task

LANGUAGE_MODES = ("auto", "en", "zh")
# Share of Han characters among letters above which a text is taken for Chinese.
# Chinese prompts mix in Latin names, numbers and acronyms; English ones have no Han at all.
HAN_SHARE = 0.3
_ZH_NAMES = {"zh", "chinese", "中文", "汉语", "cn"}


def _is_han(ch: str) -> bool:
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF


def detect_language(text: str) -> str:
    """``zh`` when Han characters make up at least :data:`HAN_SHARE` of the letters of
    ``text`` (each Han character counts as one letter, each Latin word as one), else ``en``."""
    han = sum(1 for ch in text if _is_han(ch))
    latin_words = sum(1 for w in "".join(ch if ch.isascii() and ch.isalpha() else " " for ch in text).split())
    if han == 0:
        return "en"
    return "zh" if han / (han + latin_words) >= HAN_SHARE else "en"


def normalize_language(value: str | None) -> str | None:
    """A task's ``language`` field as ``zh`` or ``en``; None when empty."""
    if value is None or not str(value).strip():
        return None
    v = str(value).strip().lower().replace("_", "-")
    return "zh" if v in _ZH_NAMES or v.startswith("zh-") else "en"


def task_language(task: Task, mode: str = "auto") -> str:
    """The instruction language for ``task`` under ``--prompt-language mode``."""
    if mode in ("en", "zh"):
        return mode
    if mode != "auto":
        raise ValueError(f"--prompt-language must be one of {', '.join(LANGUAGE_MODES)}, not {mode!r}")
    return normalize_language(task.language) or detect_language(task.prompt)


def template_for(name: str, language: str) -> str:
    """``name`` or its Chinese version ``name_zh`` when ``language`` is zh and one exists."""
    if language == "zh" and f"{name}_zh" in _available():
        return f"{name}_zh"
    return name


def _available() -> frozenset[str]:
    global _NAMES
    if _NAMES is None:
        _NAMES = frozenset(prompts.names())
    return _NAMES


_NAMES: frozenset[str] | None = None


def language_option() -> Option:
    """``--prompt-language``, shared by every method with Chinese templates (one flag)."""
    return Option("prompt-language", "language of the judge's instructions: auto (the task's language field, "
                  "else detected from its prompt), en or zh", "auto", choices=LANGUAGE_MODES)
