"""Test and benchmark infrastructure: an OpenAI-compatible mock judge with real
token-bucket quotas and 429s (``server``, served by ``drscore mock-judge``) and the
schema filler that makes its schema-valid answers (``schema_fill``, also the offline
judge's fallback for templates without a heuristic), and ``scripted``: endpoints that
fail on purpose (bad key, unknown model, echoed secrets, long 429s). Not used by a real run."""
