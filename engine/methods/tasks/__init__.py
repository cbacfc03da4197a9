"""DeepResearch Arena's task-level tools, which judge tasks rather than reports: Elo
ranking of tasks by pairwise comparison (``elo``), the leakage check (``leakage``) and
the judge-driving glue both share (``tools``)."""
