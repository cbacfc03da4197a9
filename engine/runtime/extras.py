"""Optional parts of drscore and the pip extras that install them.

The base install scores reports with any judge; heavier parts that only some users need
are extras (``pip install 'drscore[report,pages]'``). A feature that needs a missing
extra fails at its start with :class:`MissingExtra`, a one-line message naming the extra,
never with an ``ImportError`` from deep inside a run.
"""
from __future__ import annotations

import importlib.util

# extra -> the import names it provides (checked without importing them)
EXTRAS: dict[str, tuple[str, ...]] = {
    "report": ("matplotlib",),
    "pages": ("trafilatura", "lxml_html_clean"),
    "pdf": ("pypdf",),
    "sdk": ("openai",),
    "pandas": ("pandas", "pyarrow"),  # drscore.load_run(...).to_pandas(), export --format parquet
}


class MissingExtra(ImportError):
    """A feature needs an extra that is not installed; the message says which."""


def has_extra(extra: str) -> bool:
    """True when every module of ``extra`` can be imported."""
    return all(importlib.util.find_spec(mod) is not None for mod in EXTRAS[extra])


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` unless ``extra`` is installed; ``feature`` says who needs it."""
    if not has_extra(extra):
        missing = [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]
        raise MissingExtra(f"{feature} needs the '{extra}' extra ({', '.join(missing)} not installed): "
                           f"pip install 'drscore[{extra}]'")
