"""The runtime: the path every score row travels, and (in ``calls``) every judge call.

Inputs are read (``io``) into records (``models``); the runner (``runner``) gives each
(report, method) item a context (``context``) whose judge calls go through the call path
in :mod:`drscore.engine.runtime.calls` (pool, cache, quota, pricing, verdict decoding).
Finished rows are aggregated (``aggregate``) and written to the run directory
(``rundir``; read back by ``rundir_read``, joined by ``rundir_merge``) while ``progress``
shows the work.

The runtime imports nothing else of drscore except :mod:`drscore.prompts`: methods,
judges, page fetchers and reports plug in through the protocols defined here and in
``calls.judging``.
"""
