"""The runtime: the path every judge call and score row travels.

Inputs are read (``io``) into records (``models``); the runner (``runner``) gives each
(report, method) item a context (``context``) whose judge calls go through the pool
(``pool``): cache lookup (``cache``), quota pacing (``limits``, ``tokens``), the backend
protocol (``judging``), verdict decoding (``verdicts``), pricing (``pricing``, ``meter``).
Finished rows are aggregated (``aggregate``) and written to the run directory
(``rundir``; read back by ``rundir_read``) while ``progress`` shows the work.

The runtime imports nothing else of drscore except :mod:`drscore.prompts`: methods,
judges, page fetchers and reports plug in through the protocols defined here.
"""
