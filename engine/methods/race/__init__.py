"""RACE (DeepResearch Bench): the method (``method``), criteria and weights parsing and
normalisation (``criteria``) and re-scoring of stored judgements (``rescore``), which
shares live scoring's aggregation."""
