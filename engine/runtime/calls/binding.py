"""Which quota a header-less endpoint enforces, requests or tokens: :class:`BindingGuess`, from
its 429s, the sizes of the calls and the rates the calls proved
(:meth:`drscore.engine.runtime.calls.learner.RateLearner.strain`)."""
from __future__ import annotations

from collections import deque

import msgspec


VOTES_KEPT = 16  # the votes a run's summary lists: the ones that set the guess come first
# A strain above this says no bucket of the proven rate would have refused the call: the
# dimension is ruled out (bench.headerless, 269 429s logged at stop 56: the binding
# dimension's strain at most 1.01, the other's up to 2.7; docs/providers.md).
STRAIN_RULES_OUT = 1.05
# Ranks read against the dimension paced when the call was refused (the ranks logged at
# stops 55-56, docs/providers.md):
FIRST_RANK_TOKENS = 0.6  # the start-up 429, nothing paced yet: above it, tokens
LARGE_RANK = 0.7  # requests paced: a call this large refused at a request rate already proven...
PROVEN_STRAIN = 0.95  # ...(strain at least this) says tokens
SMALL_RANK = 0.25  # tokens paced: a call this small refused says requests


class GuessVote(msgspec.Struct, frozen=True):
    """One 429's vote on which quota binds: the refused call's ``rank`` among the sizes sent
    before it, the dimension ``paced`` when it came ("none" at the first 429, the start-up
    burst's), the :meth:`RateLearner.strain` of each dimension (``strain``: requests, tokens),
    what decided (``by``: "proofs" where a strain ruled a dimension out, "body" where the 429's
    body named the dimension, else "ranks") and the ``guess`` after it."""

    rank: float
    paced: str
    strain: tuple[float, float]
    by: str
    guess: str


class BindingGuess:
    """Which quota a header-less endpoint enforces, requests or tokens, from its 429s, the
    sizes of what was sent and the rates the calls proved.

    First the proofs: a dimension whose strain at this 429 is over ``STRAIN_RULES_OUT`` (the
    call was refused at a rate of it below one the endpoint had accepted) cannot be the one
    that binds; where exactly one is ruled out, the other binds. The paced dimension is
    rarely ruled out (it runs at its proof), the other often is: a token quota refuses a large
    call while requests go slower than they once did, a request quota a small one while
    tokens do.

    Else the refused call's size, ranked among the sizes sent just before it, read against the
    dimension paced when it came. A vote that agrees with the pace says nothing (paced right,
    the call refused is any call), so only a vote against it moves the guess:

    * requests paced: a large call refused (rank at least ``LARGE_RANK``) at a request rate
      the endpoint had already accepted (strain at least ``PROVEN_STRAIN``) says tokens;
    * tokens paced: a small call refused (rank at most ``SMALL_RANK``) says requests;
    * the first 429, nothing paced yet: the start-up burst drained the server's bucket, where
      a call of any size is refused; a rank above ``FIRST_RANK_TOKENS`` says tokens.

    A wrong guess of requests is loud (the large calls meet 429s that correct it); a wrong
    guess of tokens can be silent (paced by tokens, a request quota meets no 429 while the
    calls are large, and is under-used), so the bar to leave requests is higher. Requests of
    nearly one size cannot tell the two apart, and need not: pacing requests is pacing tokens,
    and requests it is. The limiter asks only at the 429 that opens an episode: one met within
    the pause of the one before met the same drained bucket.
    """

    def __init__(self, sizes: int = 64, alike_cv: float = 0.25) -> None:
        self._sizes: deque[float] = deque(maxlen=sizes)
        self.alike_cv = alike_cv
        self.dimension = "requests"
        self.votes: list[GuessVote] = []  # the first VOTES_KEPT, for the run's summary
        self._refusals = 0  # before the first, nothing was paced
        self._named = False  # a 429's body named the binding dimension

    def sent(self, tokens: float) -> None:
        self._sizes.append(tokens)

    def resume(self, dimension: str) -> None:
        """Start from the dimension an earlier run's 429s found binding: the next 429 is read
        against its pace, not as a start-up burst's."""
        self.dimension = dimension
        self._refusals = max(self._refusals, 1)

    def _alike(self) -> bool:
        n = len(self._sizes)
        if n < 2:
            return True
        mean = sum(self._sizes) / n
        var = sum((x - mean) ** 2 for x in self._sizes) / n
        return mean <= 0 or var ** 0.5 / mean < self.alike_cv

    def refused(self, tokens: float, strain: tuple[float | None, float | None] = (None, None),
                named: str | None = None) -> str:
        """Record a 429 of a request of ``tokens`` (``strain``: :meth:`RateLearner.strain` of
        requests and of tokens, None without a proof); the dimension that binds now.
        ``named``: the dimension the 429's body named without its figure (Azure's "exceeded
        token rate limit"): it binds, whatever the sizes and proofs say, now and after."""
        paced = self.dimension if self._refusals else "none"
        self._refusals += 1
        if named in ("requests", "tokens"):
            self.dimension, self._named = named, True
        if self._named:
            if len(self.votes) < VOTES_KEPT:
                self.votes.append(GuessVote(rank=0.0, paced=paced, strain=(0.0, 0.0), by="body", guess=self.dimension))
            return self.dimension
        if self._alike():
            self.dimension = "requests"
            return self.dimension
        below = sum(1.0 if x < tokens else 0.5 if x == tokens else 0.0 for x in self._sizes)
        rank = below / len(self._sizes)
        r, t = (x if x is not None else 0.0 for x in strain)
        by = "proofs"
        if r > STRAIN_RULES_OUT and t <= STRAIN_RULES_OUT:
            self.dimension = "tokens"
        elif t > STRAIN_RULES_OUT and r <= STRAIN_RULES_OUT:
            self.dimension = "requests"
        else:
            by = "ranks"
            if paced == "none":
                self.dimension = "tokens" if rank > FIRST_RANK_TOKENS else "requests"
            elif paced == "requests" and rank >= LARGE_RANK and r >= PROVEN_STRAIN:
                self.dimension = "tokens"
            elif paced == "tokens" and rank <= SMALL_RANK:
                self.dimension = "requests"
        if len(self.votes) < VOTES_KEPT:
            self.votes.append(GuessVote(rank=round(rank, 3), paced=paced, strain=(round(r, 3), round(t, 3)),
                                        by=by, guess=self.dimension))
        return self.dimension
