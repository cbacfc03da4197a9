"""Which quota a header-less endpoint enforces, requests or tokens: :class:`BindingGuess`, from
its 429s, the sizes of the calls and the rates the calls proved
(:func:`drscore.engine.runtime.calls.learner.strain_of`)."""
from __future__ import annotations

from collections import deque

import msgspec

from drscore.engine.runtime.calls.learner import SENT_KEPT_S


VOTES_KEPT = 16  # the votes a run's summary lists: the ones that set the guess come first
# A strain above this says no bucket of the proven rate would have refused the call: the
# dimension is ruled out (bench.headerless, 269 429s logged at stop 56: the binding
# dimension's strain at most 1.01, the other's up to 2.7; docs/pacing-notebook.md).
STRAIN_RULES_OUT = 1.05
# At the limiter's probe of a request pace, a request strain over this rules requests out: the
# probe grows the requests past what they proved, so a request quota refuses only a call sent
# faster than that (strain under 1), where a token quota refuses while they are still within it.
# The request strain at the probe's 429s logged at stops 70-77: 0.966-0.996 at 28 of request
# quotas; at 22 of token quotas 0.979-0.998 in 3 and 1.03-2.28 in 19, 11 of them under 1.05
PROBE_STRAIN_RULES_OUT = 1.02
# Ranks read against the dimension paced when the call was refused (the ranks logged at
# stops 55-56, docs/pacing-notebook.md):
# The start-up 429, nothing paced yet: above this, tokens. A request quota refuses whichever call
# comes next, so the refused call's rank is as likely any of the few sizes sent: over 0.7 it is
# the largest of four or five, one of the two largest of eight, a chance of about a quarter. At
# 0.6 the second largest of four said tokens too, half the start-ups of a request quota whose
# 4th call is refused: at 150 requests a minute the runs so begun paced tokens, 0.935-0.942 of
# the quota against 0.961-0.970 (bench.headerless --case mixed, 3 of 8 runs; 12 of the 14 such runs
# logged at stops 52-81 missed a target), and a guess of tokens can be silent where one of requests
# is not. A token quota's start-up 429 comes later (the 8th to 11th call), on a call ranked
# about 0.83 (docs/pacing-notebook.md, stop 82).
FIRST_RANK_TOKENS = 0.7
LARGE_RANK = 0.7  # requests paced: a call this large refused at a request rate already proven...
PROVEN_STRAIN = 0.95  # ...(strain at least this) says tokens
SMALL_RANK = 0.25  # tokens paced: a call this small refused says requests


# A request pace the ranks chose is probed again (the limiter grows it as after the first cut)
# once it leaves the token quota this idle: the calls' mean size at it, as tokens a second,
# under this share of the token rate the calls proved (the sizes shrank, or the cut that chose
# requests was made on a few large calls). See BindingGuess.hindsight. Against a request quota
# the probe costs one 429 a run; at 0.67, longest first used 0.80-0.81 of a token quota, at
# 0.85 0.91-0.93, where 5 mixed runs of 6 paid that 429 (stop 73, docs/pacing-notebook.md).
UNDER_USED = 0.85
PROBES = 3  # the most such probes a run makes
RECENT_SIZES = 16  # the calls whose mean size the probe reads


class GuessVote(msgspec.Struct, frozen=True):
    """One 429's vote on which quota binds: the refused call's ``rank`` among the sizes sent
    before it, the dimension ``paced`` when it came ("none" at the first 429, the start-up
    burst's), the strain of each dimension (``strain``: requests, tokens; see
    :func:`~drscore.engine.runtime.calls.learner.strain_of`),
    what decided (``by``: "alike" where the calls sent were of about one size, so requests;
    "proofs" where a strain ruled a dimension out; "hindsight" where the requests the calls
    proved since ruled out an earlier refusal's; "body" where the 429's body named the
    dimension; "echo" where nothing did and the 429 came in the echo of a proven cut, whose rank
    says nothing; "held" where both dimensions were paced, the token bucket held the call and
    the lower strain decided; else "ranks") and the ``guess`` after it."""

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
    tokens do. At the limiter's probe of a request pace the bar for requests is lower,
    ``PROBE_STRAIN_RULES_OUT``: the probe runs the requests past their proof, so a request quota
    refuses only beyond it.

    Else the refused call's size, ranked among the sizes sent just before it, read against the
    dimension paced when it came. A vote that agrees with the pace says nothing (paced right,
    the call refused is any call), so only a vote against it moves the guess:

    * requests paced: a large call refused (rank at least ``LARGE_RANK``) at a request rate
      the endpoint had already accepted (strain at least ``PROVEN_STRAIN``) says tokens;
    * tokens paced: a small call refused (rank at most ``SMALL_RANK``) says requests;
    * the first 429, nothing paced yet: the start-up burst drained the server's bucket, where
      a call of any size is refused; a rank above ``FIRST_RANK_TOKENS`` says tokens;
    * both paced (the limiter's hedge on a start-up guess of requests), the token bucket holding
      the refused call: the rank says little (paced so, a token quota refuses a small call as
      often as a large one), and the dimension with the lower strain binds, the one whose
      bucket had the more room to refuse it (by "held").

    A 429 in the echo of a proven cut (within a few seconds of the end of its pause: the
    bucket that episode drained may still be in debt) is refused at the proven rate whichever
    quota binds, so its rank moves nothing; only the proofs do.

    A wrong guess of requests is loud (the large calls meet 429s that correct it); a wrong
    guess of tokens can be silent (paced by tokens, a request quota meets no 429 while the
    calls are large, and is under-used), so the bar to leave requests is higher. Requests of
    nearly one size cannot tell the two apart, and need not: pacing requests is pacing tokens,
    and requests it is (a vote by "alike", listed as the others are, so a run's record says
    why). The limiter asks only at the 429 that opens an episode: one met within the pause of
    the one before met the same drained bucket.

    In hindsight, too: each refusal bounds the request rate a bucket that refused it could have
    (:meth:`bounded`), and a request rate the calls prove later above that bound, by more than
    ``STRAIN_RULES_OUT``, says no request quota refused it (:meth:`hindsight`). Requests are
    counted exactly, so this bound is as sharp as the proofs; a token count is an estimate
    until the answer, and is not read so. A request pace the ranks chose meets no 429 while
    the calls shrink under it and the token quota goes unused; the limiter then probes it
    (grows it again, see ``UNDER_USED``), and a proof past an earlier refusal's bound turns
    the guess to tokens without a 429 (:meth:`turn_to_tokens`), where a request quota meets
    one 429 at its limit. The token pace then starts from that refusal
    (:meth:`token_evidence`), not from what the token learner kept while requests were paced.
    A 429 that kept requests on the proofs (tokens ruled out), or that the probe met before
    its proofs ruled requests out, ends the probing.
    """

    def __init__(self, sizes: int = 64, alike_cv: float = 0.25) -> None:
        self._sizes: deque[float] = deque(maxlen=sizes)
        self.alike_cv = alike_cv
        self.dimension = "requests"
        self.votes: list[GuessVote] = []  # the first VOTES_KEPT, for the run's summary
        self._refusals = 0  # before the first, nothing was paced
        self._named = False  # a 429's body named the binding dimension
        self._ruled: set[str] = set()  # dimensions a refusal's evidence chose, not the calls' sizes
        # (when, request bound, token evidence: see bounded) of recent refusals
        self._request_bounds: deque[tuple[float, float, tuple[float, float] | None]] = deque()

    def sent(self, tokens: float) -> None:
        self._sizes.append(tokens)

    def resume(self, dimension: str, guessed: bool = False) -> None:
        """Start from the dimension an earlier run's 429s found binding (``guessed``: by the
        calls' sizes alone, see :attr:`guessed`): the next 429 is read against its pace, not as
        a start-up burst's."""
        self.dimension = dimension
        self._refusals = max(self._refusals, 1)
        if not guessed:
            self._ruled.add(dimension)

    @property
    def guessed(self) -> bool:
        """The binding dimension rests on the calls' sizes alone: no refusal's proofs, turn in
        hindsight or body chose it (whatever :attr:`votes` kept), in this run or, for a dimension
        resumed from an earlier run (:meth:`resume`), in that one."""
        return self.dimension not in self._ruled

    @property
    def named(self) -> bool:
        """A 429's body named the binding dimension: nothing else moves the guess."""
        return self._named

    def recent_size(self) -> float | None:
        """The mean size of the last ``RECENT_SIZES`` calls sent (None before any)."""
        recent = list(self._sizes)[-RECENT_SIZES:]
        return sum(recent) / len(recent) if recent else None

    def bounded(self, at: float, bound: float | None, tokens: tuple[float, float] | None = None) -> None:
        """A refusal at ``at`` allows a request bucket of at most ``bound`` a second
        (:meth:`RateLearner.bound`); ``tokens``: the token rate the calls had proved before it
        and the most a token bucket that refused it could have, for :meth:`token_evidence`."""
        if bound is not None:
            self._request_bounds.append((at, bound, tokens))

    def token_evidence(self, now: float) -> tuple[float, float] | None:
        """The token proof and bound of the refusal with the lowest request bound (see
        :meth:`bounded`): where :meth:`hindsight` rules that one out for requests, a token bucket
        of a rate between the two refused it. None without one."""
        lowest = min(self._recent_refusals(now), key=lambda r: r[1], default=None)
        return None if lowest is None else lowest[2]

    def lowest_bound(self, now: float) -> float | None:
        """The lowest request bound of the refusals of the last ``SENT_KEPT_S`` seconds (the
        span a proof covers); None without one."""
        return min((b for _, b, _ in self._recent_refusals(now)), default=None)

    def _recent_refusals(self, now: float) -> deque[tuple[float, float, tuple[float, float] | None]]:
        """The refusals kept (:meth:`bounded`), less those older than the span a proof covers."""
        while self._request_bounds and self._request_bounds[0][0] < now - SENT_KEPT_S:
            self._request_bounds.popleft()
        return self._request_bounds

    def hindsight(self, proof: float | None, now: float) -> float | None:
        """The request rate ``proof`` (calls a second) over :meth:`lowest_bound`: above
        ``STRAIN_RULES_OUT``, some refusal was not a request quota's. None without either."""
        lowest = self.lowest_bound(now)
        return None if proof is None or lowest is None else proof / lowest

    def turn_to_tokens(self, strain: float) -> None:
        """The requests proved since ruled an earlier refusal's request bucket out (``strain``,
        :meth:`hindsight`): tokens bind."""
        self.dimension = "tokens"
        self._ruled.add("tokens")
        if len(self.votes) < VOTES_KEPT:
            self.votes.append(GuessVote(rank=0.0, paced="requests", strain=(round(strain, 3), 0.0), by="hindsight",
                                        guess="tokens"))

    def _alike(self) -> bool:
        n = len(self._sizes)
        if n < 2:
            return True
        mean = sum(self._sizes) / n
        var = sum((x - mean) ** 2 for x in self._sizes) / n
        return mean <= 0 or var ** 0.5 / mean < self.alike_cv

    def refused(self, tokens: float, strain: tuple[float | None, float | None] = (None, None),
                named: str | None = None, probing: bool = False, echo: bool = False,
                held_by: str | None = None) -> str:
        """Record a 429 of a request of ``tokens`` (``strain``: the
        :func:`~drscore.engine.runtime.calls.learner.strain_of` of
        requests and of tokens, None without a proof); the dimension that binds now.
        ``named``: the dimension the 429's body named without its figure (Azure's "exceeded
        token rate limit"): it binds, whatever the sizes and proofs say, now and after.
        ``probing``: met by the limiter's probe of the request pace, which ran the requests
        past what they had proved: only the proofs move the guess (a large call refused at the
        top of a probe says nothing of tokens), a request strain over ``PROBE_STRAIN_RULES_OUT``
        ruling requests out. ``echo``: met in the echo of a proven cut of the
        paced dimension (:meth:`RateLearner.echoes`): only the proofs move the guess.
        ``held_by``: where both dimensions were paced (the limiter paces tokens too while a
        start-up guess of requests rests on one rank), the one whose bucket held the refused
        call, read as the dimension paced; where that was tokens and the proofs rule neither
        out, the one with the lower strain binds."""
        paced = (held_by or self.dimension) if self._refusals else "none"
        self._refusals += 1
        if named in ("requests", "tokens"):
            self.dimension, self._named = named, True
            self._ruled.add(named)
        if self._named:
            if len(self.votes) < VOTES_KEPT:
                self.votes.append(GuessVote(rank=0.0, paced=paced, strain=(0.0, 0.0), by="body", guess=self.dimension))
            return self.dimension
        below = sum(1.0 if x < tokens else 0.5 if x == tokens else 0.0 for x in self._sizes)
        rank = below / len(self._sizes) if self._sizes else 0.0
        r, t = (x if x is not None else 0.0 for x in strain)
        by = "proofs"
        if self._alike():
            by, self.dimension = "alike", "requests"
        elif r > STRAIN_RULES_OUT and t <= STRAIN_RULES_OUT:
            self.dimension = "tokens"
        elif t > STRAIN_RULES_OUT and r <= STRAIN_RULES_OUT:
            self.dimension = "requests"
        elif probing and r > PROBE_STRAIN_RULES_OUT and t <= STRAIN_RULES_OUT:
            self.dimension = "tokens"
        else:
            by = "ranks"
            if paced == "none":
                self.dimension = "tokens" if rank > FIRST_RANK_TOKENS else "requests"
            elif echo:
                by = "echo"
            elif paced == "requests" and rank >= LARGE_RANK and r >= PROVEN_STRAIN and not probing:
                self.dimension = "tokens"
            elif held_by == "tokens":
                by, self.dimension = "held", "tokens" if t <= r else "requests"
            elif paced == "tokens" and rank <= SMALL_RANK:
                self.dimension = "requests"
        if by == "proofs":
            self._ruled.add(self.dimension)
        if len(self.votes) < VOTES_KEPT:
            self.votes.append(GuessVote(rank=round(rank, 3), paced=paced, strain=(round(r, 3), round(t, 3)),
                                        by=by, guess=self.dimension))
        return self.dimension
