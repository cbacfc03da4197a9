"""Judge backends: OpenAI-compatible HTTP (aiohttp), the openai SDK, the offline judge,
and the mock judge server used by tests and benchmarks."""
