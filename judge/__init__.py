"""Judge backends, the things that answer a :class:`~drscore.engine.runtime.calls.judging.ChatRequest`:
OpenAI-compatible HTTP over aiohttp (``http``, request bodies in ``wire``, rate-limit
headers in ``ratelimit_headers``), the openai SDK (``sdk``, the ``sdk`` extra), the
offline judge (``offline/``) and, as test and benchmark infrastructure, the mock server
(``mock/``). Backends implement the runtime's ``Backend`` protocol and may import the
runtime and the text/method helpers the offline judge mirrors; the engine never imports
this package (only :mod:`drscore.api` wires a backend in)."""
