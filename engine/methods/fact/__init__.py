"""FACT (DeepResearch Bench): the method (``method``), its aggregation formulas, the
benchmark's convention and the paper's (``tally``), and re-scoring of the benchmark's
stored judgements through that same aggregation (``rescore``). The pair and page steps
it shares with factuality and KAE are in :mod:`drscore.engine.methods.cited_pages`."""
