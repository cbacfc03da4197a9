"""A server that cuts a long prompt to its context and answers anyway.

Ollama, by default, keeps the last ``num_ctx`` tokens of a prompt that does not fit (its
context defaults to 2,048-4,096 tokens, shared between parallel slots), answers 200 and
reports only the tokens it read as the usage's ``prompt_tokens``. A report judged so was
judged on its tail, without the instructions: the score is not the report's. The only
trace is that usage, far below what was sent, so each answer's prompt count is checked
against the prompt's own size: the server's count of it where it gave one (exact), else the
estimate, allowing for the estimate's error.

A usage far below an estimate is not proof on its own: a server that leaves the prompt
tokens read from its prefix cache out of the usage (an Ollama release did) reads a prompt
sharing a long first message short too. What only a cut does is read *the same count* for
prompts of different sizes, the context the server cuts to, and never more. So a cut is
sure when the count read is the context the server states (Ollama's ``/api/ps``), the one
earlier cuts read, or the server's own count of the prompt was far larger; a short read
otherwise is a suspect, scored, until the same count repeats (:class:`SameReads`).

Pure functions and a small memory; the pool fails a cut item (``context_length``), keeps its
answer out of the cache, and takes the tokens read as the server's window.
"""
from __future__ import annotations

from collections import OrderedDict

import msgspec

# How far below its prompt's size a usage must fall to be a cut, as a share of that size. An
# estimate's recent error is no bound on the next prompt: learned on characters, estimates
# miss a DeepResearch Bench report by up to 26-30% against tokenizers unlike cl100k
# (bench.proxy_tokens), and the mock's words rule, which reads a run of Chinese characters as
# one token, by more. So on characters, half: a prompt read to under half its learned
# estimate. On a proxy tokenizer's counts (at most 6.7-11% there), four times the recent
# error within these bounds. A prompt cut less than that is caught once a deeper cut, or the
# context the server states, showed the count the server cuts to (below).
LEARNED_MARGIN = 0.5
PROXIED_MARGINS = (0.3, 0.5)
# Before any answer taught the estimate, only a usage under 15% of the character rule's
# guess: the mock's words rule reads 23-48% of it on the Chinese example reports.
UNLEARNED_MARGIN = 0.85
# No server cuts a prompt to fewer tokens than this (Ollama's smallest default context is
# 2,048 tokens; a client asking for 1,024 has been seen): a shorter read is never a cut, so a
# paragraph pair of a few hundred tokens, where estimates miss most, is never judged.
LEAST_CUT = 1000
# A prompt the server counted before the call: the usage adds the chat format's few tokens,
# so even a small shortfall is a cut.
COUNTED_MARGIN = 0.1
# A later answer read to the same count as a cut one, within this many tokens, was cut too
# (a server keeps the same number of tokens each time it cuts).
SAME_CUT_TOKENS = 2


class PromptCut(msgspec.Struct, frozen=True):
    """An answer whose prompt the server did not read in full (``sure``), or read short of
    its estimate by too much to be the estimate's miss, which a prefix cache left out of the
    usage could explain as well (a suspect)."""

    read: int  # the prompt tokens the server reports having read
    sent: int  # what the prompt comes to: the server's count, or the estimate
    sure: bool = True


def cut_short(sent: float, read: int, *, error: float | None, counted: bool = False, proxied: bool = False,
              cut_to: int | None = None) -> PromptCut | None:
    """Whether a prompt of about ``sent`` tokens, reported as ``read``, was cut.

    ``error``: the estimate's recent relative error, None before any answer taught it;
    ``counted``: ``sent`` is the server's own count of the prompt, made before the call;
    ``proxied``: the estimate learned on a proxy tokenizer's counts, not on characters;
    ``cut_to``: the count the server cuts to, where it is known (stated, or read by an
    earlier cut). A short read is sure only against the server's own count or at ``cut_to``."""
    if read < LEAST_CUT or sent <= 0:
        return None
    if counted:
        margin = COUNTED_MARGIN
    elif error is None:
        margin = UNLEARNED_MARGIN
    else:
        margin = min(PROXIED_MARGINS[1], max(PROXIED_MARGINS[0], 4.0 * error)) if proxied else LEARNED_MARGIN
    # Read to the very count the server cuts to: cut, whatever the estimate says (an earlier cut
    # answer may have taught it a wrong ratio before the cut showed).
    if cut_to is not None and abs(read - cut_to) <= SAME_CUT_TOKENS:
        return PromptCut(read=read, sent=round(sent))
    if read < sent * (1.0 - margin):
        return PromptCut(read=read, sent=round(sent), sure=counted)
    return None


# A server that cuts where it states a larger context (an Ollama release cut at half the
# context /api/ps stated), or states none, shows the count it cuts to by repeating it: two
# answers read short of their estimates to the very same count, from prompts a fifth apart in
# size or more, with no answer ever read to more than that count. The sizes are fixed
# measures (the character rule, a proxy tokenizer's or the server's count), not the learned
# estimate, which moves between one answer and the next: the same prompt asked twice (two
# samples) would look like two sizes. Prompts of one true length read one count too, but
# their sizes are close (the same report with criteria of a similar length); a prefix cache
# left out of the usage makes each prompt read short by its own amount, not all to one count;
# and a server that cuts reads no prompt past its cut, so one answer read longer rules the
# count out.
SAME_READS, SAME_READS_SPREAD = 2, 1.2


class SameReads:
    """Answers read short of their estimates, by the exact prompt count they read (bounded
    memory), and the most any answer read: the count a server cuts to shows as
    :data:`SAME_READS` of them, :data:`SAME_READS_SPREAD` times apart in size, at the top of
    what was ever read."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        # count read -> (answers, of them read short of their estimates, least and most size of those)
        self._reads: OrderedDict[int, tuple[int, int, float, float]] = OrderedDict()
        self.most_read = 0

    def repeated(self, sent: float, read: int, size: float) -> bool:
        """Count this answer (``sent``: its prompt's estimate; ``size``: a fixed measure of
        it); whether its count is one a server cuts to."""
        self.saw(read)
        if read < LEAST_CUT or size <= 0:
            return False
        n, short, least, most = self._reads.pop(read, (0, 0, size, size))
        n += 1
        if read < sent:  # a read over its estimate is no sign of a cut, though it may be one
            short, least, most = short + 1, min(least, size), max(most, size)
        self._reads[read] = (n, short, least, most)
        if len(self._reads) > self.size:
            self._reads.popitem(last=False)
        return read < sent and short >= SAME_READS and most >= least * SAME_READS_SPREAD and not self.read_past(read)

    def saw(self, read: int) -> None:
        """An answer read ``read`` tokens (one shown to be cut, not counted as a repeat)."""
        self.most_read = max(self.most_read, read)

    def read_past(self, cut_to: int) -> bool:
        """Whether some answer read more than ``cut_to``: no server cutting there reads that."""
        return self.most_read > cut_to + SAME_CUT_TOKENS

    def uncount(self, read: int) -> None:
        """Take one answer at ``read`` back (it failed as cut)."""
        n, short, least, most = self._reads.get(read, (0, 0, 0.0, 0.0))
        if n > 1:
            self._reads[read] = (n - 1, max(0, short - 1), least, most)
        else:
            self._reads.pop(read, None)

    def forget(self, read: int) -> int:
        """How many answers read exactly ``read`` (short of their estimates or not); they are
        no longer counted."""
        return self._reads.pop(read, (0, 0, 0.0, 0.0))[0]


def cut_detail(cut: PromptCut, *, counted: bool, server: str) -> str:
    """The item's error for a cut prompt: what was read of what, and what to change."""
    size = f"counted at {cut.sent:,}" if counted else f"of about {cut.sent:,}"
    return (f"{server} read {cut.read:,} tokens of a prompt {size}: it cut the prompt to its "
            "context and answered anyway, so the answer is not about the whole input; not scored, not cached. "
            "Raise the server's context (Ollama: OLLAMA_CONTEXT_LENGTH, or num_ctx in a Modelfile) and run again")
