"""What an endpoint's token quota charges a call, so the limiter can charge the same.

Three ways are in use. A server that counts (vLLM or llama.cpp behind a gateway, the mock by
default) charges the prompt and the answer as its usage reports them. OpenAI's and Azure
OpenAI's limiters cannot know the answer's length when a request arrives, and their documents
say what they charge instead: a guess at the prompt from its character count (the request is
not tokenized) plus the whole output cap (``max_tokens``, or the model's context when none is
set); Azure adds that the part of the cap left unused stops weighing on the quota once the
request finishes. Cerebras reserves the cap the same way. Anthropic reserves it too, but from a
quota of output tokens apart from its input-token one (its answers state both, and a ``tokens``
pair that is their sum): its prompts are charged as Gemini's below, its caps held against the
output quota (:mod:`drscore.engine.runtime.calls.output_quota`).
Gemini's token quota counts input tokens only (its rate-limit guide: "tokens per minute
(input)"; its quota is named the GenerateContent input token count), charged at admission: a
request refused with a 400 for its length still used its count. A client that charges such a
server the answer too leaves the answer's share of the quota idle.

A client that charges such a server what the answer will probably use (the template's usual
output) sends more than the quota admits: against a told quota the mock, reserving like
OpenAI, refused 12% of ``bench.pacing``'s requests (docs/providers.md). So against a
reserving endpoint each call is charged a guess at its prompt (:class:`ReservedCharge`: the
character rule until the server's counts teach its own) plus the cap it is sent with, and its
answer corrects the charge to that prompt guess plus the output it used, as the server's own
give-back does.
"""
from __future__ import annotations

import math
from collections import deque
from urllib.parse import urlsplit

TPM_CHARGES = ("auto", "counted", "reserved", "input")

# Hosts whose token limiter reserves the output cap (their documents, see above). ``auto``
# resolves to "reserved" for these (and their subdomains), to "counted" for any other.
RESERVING_HOSTS = (
    "api.openai.com",
    "openai.azure.com",  # Azure OpenAI resources: NAME.openai.azure.com
    "cognitiveservices.azure.com",  # Azure AI services resources serving the same deployments
    "services.ai.azure.com",  # Azure AI Foundry
    "api.cerebras.ai",
)
# Hosts whose token quota counts the prompt alone: ``auto`` resolves to "input" for these.
# Anthropic's input-token quota is one apart from its output-token one, which reserves the cap
# (engine.runtime.calls.output_quota); a server met elsewhere that states them apart is
# charged the same way from its first answer on.
INPUT_HOSTS = ("generativelanguage.googleapis.com", "api.anthropic.com")


def resolve(charge: str, url: str | None) -> str:
    """``counted``, ``reserved`` or ``input`` for ``charge`` (one of :data:`TPM_CHARGES`) at
    ``url``: ``auto`` is ``reserved`` for the hosts of :data:`RESERVING_HOSTS`, ``input`` for
    those of :data:`INPUT_HOSTS`."""
    if charge not in TPM_CHARGES:
        raise ValueError(f"--tpm-charge must be one of {', '.join(TPM_CHARGES)}, got {charge!r}")
    if charge != "auto":
        return charge
    return "reserved" if on_host(url, RESERVING_HOSTS) else "input" if on_host(url, INPUT_HOSTS) else "counted"


def on_host(url: str | None, hosts: tuple[str, ...]) -> bool:
    """Whether ``url``'s host is one of ``hosts`` or under one (``eu.api.anthropic.com``),
    not merely named like one (``api.anthropic.com.example.net``)."""
    host = (urlsplit(url).hostname or "").lower() if url else ""
    return any(host == h or host.endswith("." + h) for h in hosts)


# Granted calls whose prompt charge the server's count has not yet covered, kept at most: a
# server without counts (a told quota) never covers them, and the record must stay bounded.
PENDING_MAX = 4096


class ReservedCharge:
    """What a reserving endpoint charges a prompt, learned from its quota headers.

    Its guess is made from characters: four to a token, as OpenAI documents, for ASCII text.
    How it counts a wide (CJK) character is not documented, and a character rule that is an
    upper bound of every such guess (a wide character as a whole token) charged the Chinese
    half of ``bench.pacing``'s prompts four times what the mock's characters-over-four guess
    did: 0 429s, but the quota a third idle. So the charge starts at the character rule and
    learns the server's ratio for wide characters from its counts: each count followed says
    what the server charged the prompts granted since the previous one
    (:mod:`drscore.engine.runtime.calls.server_bucket`), and what that leaves beyond the ASCII
    part, regressed on their wide characters, is the ratio. The ASCII ratio stays the rule's:
    learned beside it from mostly-Chinese prompts, it settled at 0.92, and an English report's
    prompt was then charged 300-830 tokens under the server's guess, which met 429s in a
    one-second bucket (logged at both ends)."""

    def __init__(self) -> None:
        self.wide = 1.0  # tokens per wide character (the rule's, until a count says otherwise)
        self.windows = 0  # counts learned from
        self._sww = self._swy = 0.0
        # (grant order, ascii part, wide part, prompt charge; refused calls carry nothing)
        self._pending: deque[tuple[int, float, float, float]] = deque()
        self._dropped_through = 0  # calls up to this one were dropped from _pending unlearned
        self._covered_through = 0  # the last call a followed count covered

    def prompt(self, features: tuple[float, float]) -> int:
        """The prompt's charge: the ASCII part by the rule, the wide part at the learned ratio."""
        return max(1, math.ceil(features[0] + self.wide * features[1]))

    def granted(self, seq: int, features: tuple[float, float], charge: float) -> None:
        """Call ``seq`` (the limiter's grant order) was charged ``charge`` for its prompt."""
        if len(self._pending) >= PENDING_MAX:
            self._dropped_through = self._pending[-1][0]
            self._pending.clear()
        self._pending.append((seq, features[0], features[1], charge))

    def refused(self, seq: int) -> None:
        """Call ``seq`` met a 429: the server charged it nothing, and the replay of its bucket
        drops our charge too."""
        for i, (s, _, _, _) in enumerate(self._pending):
            if s == seq:
                self._pending[i] = (s, 0.0, 0.0, 0.0)
                return

    def followed(self, seq: int, diff: float | None) -> None:
        """The server's remaining count that came with call ``seq`` was ``diff`` above what
        the replay of its bucket from the last count followed predicted (below: negative):
        over the calls granted since that count, the server charged that much less than we
        did. None: nothing predicted it, so nothing is learned from these calls."""
        a = w = charged = 0.0
        while self._pending and self._pending[0][0] <= seq:
            _, pa, pw, pc = self._pending.popleft()
            a, w, charged = a + pa, w + pw, charged + pc
        # the difference also holds the misses of calls dropped unrecorded: not a window to learn from
        partial = self._covered_through < self._dropped_through
        self._covered_through = seq
        if diff is None or partial or w <= 0:
            return
        self._sww += w * w
        self._swy += w * (charged - diff - a)
        self.windows += 1
        # A pull towards the rule's ratio for the first windows' noise, worth 1% of one mean
        # window: fading as counts come. Worth 1% of all of them, it never faded and held the
        # ratio 3% over a server's quarter token (0.2574): each Chinese prompt charged 36-165
        # tokens over its guess, the next call larger than the bucket waiting for them.
        pull = 0.01 * self._sww / self.windows
        self.wide = max(0.0, (self._swy + pull) / (self._sww + pull))
