"""Per-task rubric items (the shape of HealthBench, PaperBench and similar deep-research
benchmarks): each task carries its own criteria with points; the judge decides met / not
met per criterion. ``items`` reads a task's list, ``tally`` is the arithmetic, ``method``
the :class:`~drscore.engine.runtime.method.Method` (docs/custom-methods.md)."""
