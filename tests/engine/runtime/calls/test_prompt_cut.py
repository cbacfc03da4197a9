"""A server that reads only part of a long prompt and answers anyway (Ollama past its
num_ctx): the rule that tells such an answer from an estimate's miss, and what the pool does
with it. Every expected number is worked by hand beside its case."""
from __future__ import annotations

import asyncio
import time

import pytest

from drscore.engine.runtime.calls.judging import ChatResponse, JudgeFailed
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.prompt_cut import PromptCut, SameReads, cut_short
from drscore.engine.runtime.calls.slots import ServerFacts
from drscore.engine.runtime.calls.tokens import estimate_messages
from support.fakes import Verdict, one_line_templates

from .test_local_server_faults import Scripted, _pool


@pytest.fixture(autouse=True)
def template(monkeypatch):
    one_line_templates(monkeypatch)


def test_a_read_under_half_a_learned_estimate_on_characters_is_a_suspect():
    # an estimate's recent error says nothing of a new kind of text: half, whatever it is; and
    # a prefix cache left out of the usage reads short too, so it is not sure
    assert cut_short(10_000, 4_999, error=0.02) == PromptCut(read=4_999, sent=10_000, sure=False)
    assert cut_short(10_000, 5_001, error=0.02) is None


def test_an_estimate_on_a_proxy_tokenizers_counts_allows_four_times_its_error_within_bounds():
    # error 5%: 4 x 5% = 20%, raised to the floor of 30% -> short below 0.7 x 10,000 = 7,000
    assert cut_short(10_000, 6_999, error=0.05, proxied=True) is not None
    assert cut_short(10_000, 7_001, error=0.05, proxied=True) is None
    # error 10%: 40% -> short below 6,000
    assert cut_short(10_000, 5_999, error=0.10, proxied=True) is not None
    assert cut_short(10_000, 6_001, error=0.10, proxied=True) is None
    # error 30%: 120%, capped at 50% -> short below 5,000
    assert cut_short(10_000, 4_999, error=0.30, proxied=True) is not None
    assert cut_short(10_000, 5_001, error=0.30, proxied=True) is None


def test_before_any_answer_only_a_read_under_15_percent_is_short():
    # 15% of 20,000 = 3,000: a tokenizer may read far fewer tokens than the character rule
    # guesses before it learned, never that few
    assert cut_short(20_000, 2_999, error=None) is not None
    assert cut_short(20_000, 3_001, error=None) is None


def test_a_prompt_the_server_counted_is_surely_cut_a_tenth_short():
    # counted 5,000: below 4,500 is a cut, and sure: the server's own count was far larger
    assert cut_short(5_000, 4_499, error=None, counted=True) == PromptCut(read=4_499, sent=5_000, sure=True)
    assert cut_short(5_000, 4_501, error=None, counted=True) is None


def test_a_read_at_the_count_the_server_cuts_to_is_surely_a_cut():
    # the ratio alone (4,096 of about 4,500: over half) says nothing, but the server cuts to
    # 4,095 (it said so, or an earlier cut read it): within 2 tokens of it
    assert cut_short(4_500, 4_096, error=0.02) is None
    assert cut_short(4_500, 4_096, error=0.02, cut_to=4_095) == PromptCut(read=4_096, sent=4_500, sure=True)
    # even one estimated at 2,000: an estimate taught by a cut answer before the cut showed is
    # no guide, and a prompt of another length reads that very count only by chance
    assert cut_short(2_000, 4_096, error=0.02, cut_to=4_095) is not None
    # 3 tokens off that count: not the same cut
    assert cut_short(4_500, 4_099, error=0.02, cut_to=4_096) is None


def test_no_server_cuts_to_under_a_thousand_tokens():
    assert cut_short(10_000, 999, error=0.02) is None and cut_short(10_000, 0, error=None) is None


def test_two_reads_short_to_the_very_same_count_are_cuts():
    reads = SameReads()
    assert not reads.repeated(10_000, 3_000, 10_000)
    assert not reads.repeated(9_000, 3_001, 9_000)  # another count: a prefix cache's shortfall, say
    assert reads.repeated(12_000, 3_000, 12_000)  # the second at 3,000, estimated 12,000 / 10,000 = 1.2 apart
    reads.uncount(3_000)  # it failed as cut: the one before it was scored
    assert reads.forget(3_000) == 1 and reads.forget(3_000) == 0


def test_one_prompt_estimated_anew_between_two_answers_is_one_size():
    # two samples of one prompt: the estimate learned in between (5,744 then 1,962), but its
    # size by the character rule is the same 5,744
    reads = SameReads()
    assert not reads.repeated(5_744, 1_943, 5_744) and not reads.repeated(1_962, 1_943, 5_744)


def test_prompts_of_one_length_reading_the_same_count_are_not_cuts():
    # the same report with two criteria of a similar length: one true length, estimates
    # 10,000 and 11,900 (under 1.2 apart), both read short by a server's own counting
    reads = SameReads()
    assert not reads.repeated(10_000, 3_000, 10_000) and not reads.repeated(11_900, 3_000, 11_900)


def test_reads_over_their_estimates_are_no_cuts_whatever_they_repeat():
    # a server (or a test's stand-in) reporting one count for prompts estimated 400 to 900
    reads = SameReads()
    assert not any(reads.repeated(sent, 1_000, sent) for sent in (400, 600, 900, 650))
    assert reads.forget(1_000) == 4  # all counted: were 1,000 shown to be a cut, all four read to it


def test_a_count_some_answer_read_past_is_no_cut():
    # an answer read 5,000 tokens: a server cutting at 3,000 would not have
    reads = SameReads()
    assert not reads.repeated(4_000, 5_000, 4_000)  # read whole (over its estimate)
    assert not reads.repeated(10_000, 3_000, 10_000) and not reads.repeated(12_000, 3_000, 12_000)
    assert reads.read_past(3_000) and not reads.read_past(4_998)


def _cutting_server(window: int, facts: ServerFacts | None = None):
    """Reads every prompt as the estimator's character rule counts it, up to ``window``."""
    return Scripted(lambda r: ChatResponse(text='{"score": 1}', output_tokens=3,
                                           input_tokens=min(window, estimate_messages(r.messages))), facts)


async def test_a_cut_shows_by_its_repeated_count_then_fails_and_refuses_the_next_unsent():
    backend = _cutting_server(2_048)
    pool = _pool(backend)
    await pool.ask("t", Verdict, {"i": "word " * 100})  # read whole: the estimate learns the server's counting
    # about 10,000 tokens, read 2,048: a suspect (a prefix cache could explain it), scored
    assert (await pool.ask("t", Verdict, {"i": "word " * 8_000})).value.score == 1
    assert pool.stats.suspect_reads == 1 and pool.tokens.observations == 2
    learned = pool.tokens.weights
    # about 15,000 by the character rule, read to the very same 2,048: the count a server cuts to
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": "word " * 12_000})
    assert e.value.reason == "context_length" and "read 2,048 tokens of a prompt of about" in e.value.detail
    assert "not cached" in e.value.detail
    assert pool.tokens.weights == learned and pool.tokens.observations == 2  # the cut taught nothing
    assert pool.stats.prompts_cut == 1 and pool.stats.cut_before_known == 1  # the suspect before it
    assert (pool.window, pool.window_source, pool.cut_to) == (2_048, "cut", 2_048)
    # a prompt of about 5,000 tokens: the suspect taught the estimate its cut ratio, so it is
    # sent, and read to the very same 2,048, it fails as cut whatever its estimate
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": "word " * 4_000})
    assert "read 2,048 tokens" in e.value.detail and pool.stats.prompts_cut == 2
    # one clearly over the window even by that estimate is failed before it is sent
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": "word " * 40_000})
    assert "not sent" in e.value.detail and "the server cut an earlier prompt to it" in e.value.detail
    assert len(backend.sent) == 4 and pool.stats.refused_over_window == 1
    # one that fits is scored
    assert (await pool.ask("t", Verdict, {"i": "word " * 1_000})).value.score == 1


async def test_a_count_taken_for_a_cut_is_dropped_once_an_answer_reads_past_it():
    # two prompts that happen to read 2,048 short of their estimates, then one read whole to
    # 3,000: no server cutting at 2,048 reads that
    reads = iter([2_048, 2_048, 3_000])
    backend = Scripted(lambda r: ChatResponse(text='{"score": 1}', output_tokens=3, input_tokens=next(reads)))
    pool = _pool(backend)
    await pool.ask("t", Verdict, {"i": "word " * 8_000})
    with pytest.raises(JudgeFailed):
        await pool.ask("t", Verdict, {"i": "word " * 12_000})
    assert (pool.cut_to, pool.window_source) == (2_048, "cut")
    assert (await pool.ask("t", Verdict, {"i": "word " * 1_500})).value.score == 1  # about 1,900: sent, read 3,000
    assert (pool.cut_to, pool.window, pool.window_source) == (None, None, None) and pool.stats.cuts_refuted == 1


async def test_a_server_that_counts_the_prompt_shows_a_cut_at_once():
    class Counting(Scripted):
        counts_prompts = True
        counted_by = "server"

        async def count_prompt(self, request):
            return estimate_messages(request.messages)
    backend = Counting(lambda r: ChatResponse(text='{"score": 1}', output_tokens=3,
                                              input_tokens=min(2_048, estimate_messages(r.messages))))
    pool = _pool(backend, limiter=RateLimiter(tpm=60_000_000))  # a told token quota: its calls are counted first
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": "word " * 8_000})
    assert "read 2,048 tokens of a prompt counted at 10,0" in e.value.detail


async def test_a_retry_of_the_same_prompt_read_from_the_servers_cache_is_not_a_cut():
    # An answer cut off at its cap is asked again with a larger one; this server leaves the
    # prompt tokens read from its prefix cache out of the second answer's usage.
    answers = iter([ChatResponse(text='{"sco', input_tokens=2_500, output_tokens=20, finish_reason="length"),
                    ChatResponse(text='{"score": 1}', input_tokens=12, output_tokens=5)])
    backend = Scripted(lambda r: next(answers))
    pool = _pool(backend)
    judged = await pool.ask("t", Verdict, {"i": "word " * 2_000})
    assert judged.value.score == 1 and pool.stats.prompts_cut == 0 and len(backend.sent) == 2


class _Ollama(Scripted):
    """Ollama as the pool meets it: it states its context once the model is loaded, and gives
    a vocabulary (``vocabulary``: a counter, or None for a version that gives none)."""

    def __init__(self, script, *, context: int, vocabulary=None):
        super().__init__(script, ServerFacts(server="ollama"))
        self.context, self.vocabulary, self.loaded = context, vocabulary, False

    async def load_model(self):
        self.loaded = True
        return True

    async def loaded_window(self):
        return self.context if self.loaded else None

    async def vocabulary_counter(self):
        return self.vocabulary


def _words(r) -> int:
    """The tokens this stand-in's vocabulary reads: one a word, a third of the character rule."""
    return sum(len(str(m.content).split()) for m in r.messages)


async def test_ollamas_context_is_known_before_the_first_prompt_but_no_guess_refuses_one():
    # The model loads first, so /api/ps states 4,096 before any answer. A prompt of 1,000 words
    # of 26 letters the character rule puts at about 6,750 tokens (27,000 characters over 4),
    # over 1.5 times the context, reads 1,000 here: no estimate taught yet, so it is sent and
    # read whole, not refused on the guess.
    backend = _Ollama(lambda r: ChatResponse(text='{"score": 1}', output_tokens=3, input_tokens=_words(r)),
                      context=4_096)
    pool = _pool(backend)
    assert (await pool.ask("t", Verdict, {"i": "abcdefghijklmnopqrstuvwxyz " * 1_000})).value.score == 1
    assert (pool.window, pool.window_source) == (4_096, "ollama") and backend.loaded
    assert pool.stats.refused_over_window == 0 and len(backend.sent) == 1


async def test_ollamas_vocabulary_counts_each_prompt_and_one_over_the_context_is_never_sent():
    from drscore.judge.local_tokenizer import LocalTokenizer

    # the vocabulary: a token a word; the texts' count plus 3 a message and 3 for the reply
    vocabulary = LocalTokenizer("ollama:local (its stand-in vocabulary)", lambda text: len(text.split()))
    backend = _Ollama(lambda r: ChatResponse(text='{"score": 1}', output_tokens=3, input_tokens=_words(r)),
                      context=2_048, vocabulary=vocabulary)
    pool = _pool(backend)
    # 2,000 words and the one-line template's few: counted 2,000 + a few + 3 + 3, under 2,048: sent
    assert (await pool.ask("t", Verdict, {"i": "word " * 2_000})).value.score == 1
    assert pool.counts_every_prompt and pool.prompt_counts.counted == 1
    # 2,100 words: counted over 2,048 before any quota or estimate says anything, and not sent
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": "word " * 2_100})
    assert e.value.reason == "context_length" and "(ollama:local (its stand-in vocabulary)) exceeds the 2048" \
        in e.value.detail and "not sent" in e.value.detail
    assert len(backend.sent) == 1 and pool.stats.refused_over_window == 1 and pool.stats.prompts_cut == 0


async def test_the_time_ollama_takes_to_load_the_model_is_the_first_calls_wait_not_lost():
    # Loading a model takes seconds on a real Ollama; the first call waits for it before it is
    # sent, as the others wait for the first call: a wait on its row, not time unaccounted.
    class Slow(_Ollama):
        async def load_model(self):
            await asyncio.sleep(0.3)
            return await super().load_model()

    backend = Slow(lambda r: ChatResponse(text='{"score": 1}', output_tokens=3, input_tokens=_words(r)),
                   context=4_096)
    pool = _pool(backend)
    t0 = time.monotonic()
    judged = await pool.ask("t", Verdict, {"i": "word " * 10})
    loading = [b - a for a, b in judged.wait_spans if b - a >= 0.3]
    assert backend.loaded and len(loading) == 1 and loading[0] <= time.monotonic() - t0
