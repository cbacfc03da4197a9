"""Elo ratings with soft outcomes, for ranking candidate tasks (DeepResearch Arena).

Every task starts at 1200. Each round pairs the tasks at random into disjoint pairs; a
judge names the better task with a confidence C in [0.5, 1], which becomes the soft
outcome s_winner = C, s_loser = 1 - C. Ratings move by K * (s - e) with
e_a = 1 / (1 + 10^((r_b - r_a) / 400)). Pure functions only; the judge calls live in
:mod:`drscore.engine.methods.tasks.tools`.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

import msgspec

START_RATING = 1200.0
K_FACTOR = 32.0
DEFAULT_ROUNDS = 2


class Pairing(msgspec.Struct, frozen=True):
    """One comparison of a round. ``first`` is shown to the judge as "A", ``second``
    as "B" (the order is drawn at random to spread position bias evenly)."""

    round: int
    first: str
    second: str


class Outcome(msgspec.Struct, frozen=True):
    """A judged comparison: ``winner`` is a task id, ``confidence`` in [0.5, 1]."""

    round: int
    first: str
    second: str
    winner: str
    confidence: float


def expected_score(r_a: float, r_b: float) -> float:
    """Probability that a task rated ``r_a`` beats one rated ``r_b``."""
    return 1.0 / (1.0 + 10.0 ** ((r_b - r_a) / 400.0))


def update(r_a: float, r_b: float, s_a: float, k: float = K_FACTOR) -> tuple[float, float]:
    """New ratings after a comparison where ``a`` scored ``s_a`` (and ``b`` 1 - s_a)."""
    if not 0.0 <= s_a <= 1.0:
        raise ValueError(f"outcome must be in [0, 1], got {s_a}")
    e_a = expected_score(r_a, r_b)
    return r_a + k * (s_a - e_a), r_b + k * ((1.0 - s_a) - (1.0 - e_a))


def soft_outcome(confidence: float) -> tuple[float, float]:
    """(winner's, loser's) outcome from the judge's confidence, clamped to [0.5, 1]."""
    c = min(max(confidence, 0.5), 1.0)
    return c, 1.0 - c


def schedule(task_ids: Sequence[str], rounds: int, rng: random.Random) -> list[list[Pairing]]:
    """Random disjoint pairs for each round (an odd task out sits the round out), with
    the A/B presentation order drawn per pair. Pairings do not depend on ratings, so the
    whole schedule can be drawn up front and its comparisons asked concurrently."""
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    ids = list(task_ids)
    plan: list[list[Pairing]] = []
    for r in range(rounds):
        order = ids[:]
        rng.shuffle(order)
        pairs = []
        for i in range(0, len(order) - 1, 2):
            a, b = order[i], order[i + 1]
            if rng.random() < 0.5:
                a, b = b, a
            pairs.append(Pairing(round=r, first=a, second=b))
        plan.append(pairs)
    return plan


def apply_outcomes(
    ratings: dict[str, float], outcomes: Sequence[Outcome], k: float = K_FACTOR
) -> dict[str, float]:
    """Apply outcomes in order and return the new ratings (the input is not changed).
    Within one round pairs are disjoint, so the order inside a round does not matter;
    rounds must come in order."""
    new = dict(ratings)
    for o in outcomes:
        if o.winner not in (o.first, o.second):
            raise ValueError(f"winner {o.winner!r} is neither {o.first!r} nor {o.second!r}")
        s_win, _ = soft_outcome(o.confidence)
        s_first = s_win if o.winner == o.first else 1.0 - s_win
        new[o.first], new[o.second] = update(new[o.first], new[o.second], s_first, k)
    return new


def ranking(ratings: dict[str, float]) -> list[tuple[str, float]]:
    """Task ids by rating, highest first; ties broken by task id for stable output."""
    return sorted(ratings.items(), key=lambda kv: (-kv[1], kv[0]))
