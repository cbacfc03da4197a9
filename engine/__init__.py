"""The engine: everything between reading a report and writing its score, in rooms.

- :mod:`drscore.engine.runtime` — the pipeline a judge call and a score row travel
  through: inputs, records, cache, limits, judge pool, runner, run directory, progress.
- :mod:`drscore.engine.text` — text tools shared by several methods: segmentation,
  citation parsing, passage selection, similarity screening.
- :mod:`drscore.engine.stats` — statistics over scores: bootstrap intervals and
  agreement with human scores.
- :mod:`drscore.engine.methods` — one module (or package) per published method, beside
  the formulas it alone uses.
- :mod:`drscore.engine.reporting` — what people read: the HTML report and its charts.

Imports only point down this list's dependency order: ``runtime`` imports nothing else
of drscore but :mod:`drscore.prompts`; ``text`` and ``stats`` import ``runtime`` at
most; ``methods`` import those three; ``reporting`` may import everything in the
engine. Nothing in the engine imports ``drscore.judge`` or ``drscore.fetch``: backends
and page sources are reached through the protocols in
:mod:`drscore.engine.runtime.calls.judging` and :mod:`drscore.engine.runtime.evidence`.
"""
