"""The path one judge call travels, from an item's request to a decoded verdict.

In order: the call is asked K times when judge samples are on (``samples``); the
content-addressed cache answers it if it can (``cache``; ``team`` adds a Redis tier and
in-flight claims shared by several processes); otherwise it waits for its share of the
quota (``limits``, with token estimates from ``tokens``), reserves its worst-case cost
against the budget (``budget``), lets a shared prompt prefix warm the provider's cache
first (``prefix``), and goes to the backend through the protocol in ``judging``. The cap it
sends leaves room for a thinking model's reasoning (``thinking``, ``windows``). Faults are
counted per endpoint (``health``), the answer is redacted (``redact``), priced from its
usage (``pricing``, ``meter``) and decoded into the method's Struct (``verdicts``). The pool
(``pool``) runs these steps for every call.

These modules import nothing of drscore above the runtime room.
"""
