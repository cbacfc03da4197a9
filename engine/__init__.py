"""Core of drscore: data model, cache, limits, judge pool, runner and aggregation.

Layering: modules here import nothing from ``judge/`` or ``fetch/``; backends and
page sources are reached through the protocols in :mod:`engine.judging` and
:mod:`engine.evidence`.
"""
