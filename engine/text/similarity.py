"""Local, vectorised screening of all unit pairs before the redundancy judge sees them.

The full redundancy protocol must consider every pair of a report's k units
(k(k-1)/2 pairs: 19,900 for 200 paragraphs) but only pay the judge for pairs that
could repeat each other. This module finds those candidate pairs cheaply:

1. Each unit becomes a TF-IDF vector of hashed character n-grams
   (:func:`featurize`): 1- to 3-grams inside CJK runs, 4- and 5-grams elsewhere.
   Character n-grams need no word segmentation (Chinese) and no vocabulary or
   model download, and tolerate inflection and light rewording. N-grams are hashed
   to 40-bit numbers in flat numpy arrays; only the numbers that occur become
   columns, so nothing is as wide as the hash space.
2. Vectors are L2-normalised, so cosine similarity is a sparse matrix product,
   computed one block of rows at a time against the rows after it
   (:func:`iter_similar_pairs`): memory is bounded by ``block_rows x k`` and no
   Python object is created per pair.
3. Pairs with similarity >= ``threshold`` are *candidates* and go to the judge; the
   rest are *screened out* and scored 4 ("no repetition"), as METHODS.md §3 says
   ("scores the rest as non-redundant").

Threshold: :data:`DEFAULT_THRESHOLD` (0.15) was chosen on the 100 real reports in
``shared/data/drb`` (paragraph segmentation, 116,177 pairs): every pair of
paragraphs that share a whole sentence (our proxy for "some repetition") scores
>= 0.29, while 95% of all pairs score below 0.15 and are screened out (96.8% in the
Chinese reports, 94.4% in the English ones). Paragraphs that restate a single fact
inside otherwise different text can score lower (one such pair: 0.14). The table
of thresholds is in docs/quality-redundancy.md; lower the threshold for recall,
raise it to save judge calls.

Everything here is pure and CPU-bound: the redundancy method runs :func:`screen`
through ``ctx.offload``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import numpy as np
import scipy.sparse as sp

DEFAULT_THRESHOLD = 0.15
# Character n-gram lengths per script. A CJK character is roughly a morpheme, so
# 1- to 3-grams cover words and short phrases; in alphabetic text 4- and 5-grams
# (spaces kept) cover word stems and word pairs. With these lengths the typical
# similarity of two unrelated paragraphs is about the same in Chinese and English
# reports, so one threshold serves both (see docs/quality-redundancy.md).
CJK_NGRAMS: tuple[int, ...] = (1, 2, 3)
OTHER_NGRAMS: tuple[int, ...] = (4, 5)
_CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2FA1F),  # CJK extensions B-F and supplement
)
# n-grams are hashed to 40-bit numbers: 10^5 distinct n-grams (a long report) give
# n^2 / 2^41 = 0.005 expected collisions; only the numbers that occur become columns.
HASH_BITS = 40
UNIT_BITS = 24  # a hashed key packs the n-gram (40 bits) and the unit number (24 bits)
DEFAULT_BLOCK_ROWS = 256

# Citation markers ([3], [1][2], [4, 5]), URLs and markdown punctuation are not
# content: two paragraphs citing the same source should not look alike for it.
_NOISE = re.compile(r"\[\^?\d+(?:\s*[,，\-–]\s*\d+)*\]|https?://\S+|www\.\S+")
_SEPARATOR = 0  # code point placed between units (NUL, replaced inside texts)
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio)
_POLY_BASE = np.uint64(1_000_003)


class ScreenResult(msgspec.Struct, kw_only=True):
    """Outcome of screening all pairs of ``units`` texts.

    ``pairs`` is an ``(m, 2)`` int array of candidate pairs ``(i, j)`` with
    ``i < j``, sorted row-major; ``similarity`` their cosine similarities.
    """

    units: int
    threshold: float
    pairs: Any  # np.ndarray[int64] of shape (m, 2)
    similarity: Any  # np.ndarray[float32] of shape (m,)

    @property
    def total_pairs(self) -> int:
        return pair_count(self.units)

    @property
    def candidates(self) -> int:
        return int(self.pairs.shape[0])

    @property
    def screened_out(self) -> int:
        return self.total_pairs - self.candidates


def pair_count(k: int) -> int:
    """Number of unordered pairs of ``k`` units: k(k-1)/2."""
    return k * (k - 1) // 2 if k > 1 else 0


def pair_at(k: int, p: int) -> tuple[int, int]:
    """The ``p``-th pair (0-based) of ``k`` units in row-major order
    (0,1), (0,2), ..., (0,k-1), (1,2), ...; lets a sampler draw pair numbers
    without listing the pairs."""
    total = pair_count(k)
    if not 0 <= p < total:
        raise IndexError(f"pair {p} out of range for {k} units ({total} pairs)")
    # Row i starts at s(i) = i(2k-i-1)/2; invert the quadratic, then fix rounding.
    b = 2 * k - 1
    i = int((b - math.sqrt(b * b - 8 * p)) // 2)
    while i > 0 and i * (2 * k - i - 1) // 2 > p:
        i -= 1
    while (i + 1) * (2 * k - i - 2) // 2 <= p:
        i += 1
    start = i * (2 * k - i - 1) // 2
    return i, i + 1 + (p - start)


def _word_char_table() -> np.ndarray:
    """``table[cp]`` is True when BMP code point ``cp`` is a letter or digit (what
    n-grams are made of); built once, vectorised lookups afterwards."""
    chars = "".join(map(chr, range(0x10000)))
    return np.array([c.isalnum() for c in chars], dtype=bool)


_WORD_CHAR = _word_char_table()
_SPACE = np.uint32(0x20)


def _codes(texts: Sequence[str]) -> np.ndarray:
    """Normalised code points of ``texts`` joined by :data:`_SEPARATOR`: lower-cased,
    citation markers and URLs removed, every non-alphanumeric character a single
    space (runs collapsed)."""
    # A NUL inside a text would read as a unit boundary: make it a space first.
    joined = _NOISE.sub(" ", "\x00".join(t.replace("\x00", " ") for t in texts).lower())
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype="<u4").copy()
    bmp = codes < 0x10000
    keep = np.where(bmp, _WORD_CHAR[np.where(bmp, codes, 0)], _is_cjk(codes))
    keep |= codes == _SEPARATOR
    codes[~keep] = _SPACE
    # Collapse runs of spaces, and drop spaces next to a separator or the ends.
    prev = np.concatenate([[_SEPARATOR], codes[:-1]])
    nxt = np.concatenate([codes[1:], [_SEPARATOR]])
    space = codes == _SPACE
    drop = space & ((prev == _SPACE) | (prev == _SEPARATOR) | (nxt == _SEPARATOR))
    return codes[~drop]


def normalize(text: str) -> str:
    """The text n-grams are taken from: lower-cased, citation markers and URLs
    dropped, punctuation and markdown symbols turned into single spaces."""
    return _codes([text]).tobytes().decode("utf-32-le").strip(" ")


def _is_cjk(codes: np.ndarray) -> np.ndarray:
    """Boolean mask of code points in CJK ideograph, kana and hangul blocks."""
    mask = np.zeros(codes.shape, dtype=bool)
    for lo, hi in _CJK_RANGES:
        mask |= (codes >= lo) & (codes <= hi)
    return mask


def _hashed_ngrams(
    texts: Sequence[str], cjk_ngrams: Sequence[int], other_ngrams: Sequence[int], bits: int
) -> np.ndarray:
    """One ``bucket << UNIT_BITS | unit`` key per n-gram occurrence of the normalised
    ``texts`` (``bucket``: the n-gram's ``bits``-bit hash). N-grams lie inside one
    text and are either all CJK (lengths ``cjk_ngrams``) or CJK-free (lengths
    ``other_ngrams``, spaces included)."""
    if len(texts) >= 1 << UNIT_BITS:
        raise ValueError(f"at most {(1 << UNIT_BITS) - 1} texts can be compared at once")
    if bits + UNIT_BITS > 64:
        raise ValueError(f"bits must be at most {64 - UNIT_BITS}")
    codes32 = _codes(texts)
    codes = codes32.astype(np.uint64)
    doc = np.cumsum(codes32 == _SEPARATOR).astype(np.uint64)  # unit of each position
    is_cjk = _is_cjk(codes32)
    cjk_before = np.concatenate([[0], np.cumsum(is_cjk)])
    has_cjk, has_other = bool(is_cjk.any()), not bool(is_cjk.all())
    keys = [np.empty(0, dtype=np.uint64)]
    for n in sorted(set(cjk_ngrams) | set(other_ngrams)):
        use_cjk = n in cjk_ngrams and has_cjk
        use_other = n in other_ngrams and has_other
        span = codes.size - n + 1
        if span <= 0 or not (use_cjk or use_other):
            continue
        h = np.full(span, np.uint64(n))  # seeded with n: 2- and 3-grams never share
        for offset in range(n):
            h = h * _POLY_BASE + codes[offset : offset + span]
        # Inside one unit: same unit number at both ends (the number only grows at
        # separators) and no separator at the start.
        valid = (doc[:span] == doc[n - 1 : n - 1 + span]) & (codes32[:span] != _SEPARATOR)
        cjk_in_window = cjk_before[n : n + span] - cjk_before[:span]
        if use_cjk and use_other:
            valid &= (cjk_in_window == n) | (cjk_in_window == 0)
        else:
            valid &= cjk_in_window == (n if use_cjk else 0)
        buckets = (h[valid] * _MULTIPLIER) >> np.uint64(64 - bits)
        keys.append(buckets << np.uint64(UNIT_BITS) | doc[:span][valid])
    return np.concatenate(keys)


def _tfidf_columns(
    texts: Sequence[str],
    cjk_ngrams: Sequence[int],
    other_ngrams: Sequence[int],
    bits: int,
    shared_only: bool,
) -> sp.csc_matrix:
    """The TF-IDF matrix of :func:`featurize` built column by column (one column per
    distinct n-gram). ``shared_only`` keeps only n-grams found in two or more texts:
    the others cannot add to any pair's dot product, so cosines between different
    rows are unchanged (rows are normalised before the columns are dropped)."""
    k = len(texts)
    # One key per distinct (n-gram, unit), sorted by n-gram then unit, with its count.
    key, count = np.unique(
        _hashed_ngrams(texts, cjk_ngrams, other_ngrams, bits), return_counts=True
    )
    if key.size == 0:
        return sp.csc_matrix((k, 0), dtype=np.float32)
    units = (key & np.uint64((1 << UNIT_BITS) - 1)).astype(np.int64)
    bucket = key >> np.uint64(UNIT_BITS)
    first = np.flatnonzero(np.concatenate([[True], bucket[1:] != bucket[:-1]]))
    df = np.diff(np.append(first, key.size))  # units containing each n-gram
    weight = (1.0 + np.log(count)) * np.repeat(np.log((1.0 + k) / (1.0 + df)) + 1.0, df)
    norms = np.sqrt(np.bincount(units, weights=weight * weight, minlength=k))
    weight = (weight / np.where(norms > 0, norms, 1.0)[units]).astype(np.float32)
    if shared_only:
        keep = np.repeat(df >= 2, df)
        weight, units, df = weight[keep], units[keep], df[df >= 2]
    indptr = np.concatenate([[0], np.cumsum(df)])
    return sp.csc_matrix((weight, units, indptr), shape=(k, df.size))


def featurize(
    texts: Sequence[str],
    *,
    cjk_ngrams: Sequence[int] = CJK_NGRAMS,
    other_ngrams: Sequence[int] = OTHER_NGRAMS,
    bits: int = HASH_BITS,
) -> sp.csr_matrix:
    """L2-normalised TF-IDF rows of hashed character n-grams, one row per text
    (one column per distinct n-gram that occurs).

    Texts are :func:`normalize`-d; an n-gram is counted when it lies inside one text
    and is either all CJK (lengths ``cjk_ngrams``) or has no CJK character (lengths
    ``other_ngrams``; spaces included, so word boundaries count). Weights:
    tf = 1 + ln(count), so a phrase repeated inside one unit does not dominate;
    idf = ln((1 + k) / (1 + df)) + 1 over the ``k`` texts (scikit-learn's smoothed
    idf). An empty text gives an all-zero row (similarity 0 with everything).
    """
    return _tfidf_columns(texts, cjk_ngrams, other_ngrams, bits, shared_only=False).tocsr()


def containment(
    a: str,
    b: str,
    *,
    cjk_ngrams: Sequence[int] = (4,),
    other_ngrams: Sequence[int] = (12,),
    bits: int = HASH_BITS,
) -> float:
    """Share of the shorter text's distinct n-grams that also occur in the other
    (0 = nothing shared, 1 = one text's phrasing is wholly inside the other).

    Longer shingles than :func:`featurize` (4 CJK characters, 12 other characters:
    two or three words) so that shared topic words alone do not count as
    repetition. Used by the offline redundancy judge; 0.0 when either text has no
    n-gram.
    """
    key = np.unique(_hashed_ngrams([a, b], cjk_ngrams, other_ngrams, bits))
    unit = key & np.uint64((1 << UNIT_BITS) - 1)
    grams_a = key[unit == 0] >> np.uint64(UNIT_BITS)
    grams_b = key[unit == 1] >> np.uint64(UNIT_BITS)
    if grams_a.size == 0 or grams_b.size == 0:
        return 0.0
    shared = np.intersect1d(grams_a, grams_b, assume_unique=True).size
    return shared / min(grams_a.size, grams_b.size)


def iter_similar_pairs(
    matrix: sp.csr_matrix,
    threshold: float,
    *,
    block_rows: int = DEFAULT_BLOCK_ROWS,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(i, j, sim)`` arrays of the pairs ``i < j`` whose cosine similarity
    (rows of ``matrix`` are unit vectors) is >= ``threshold``, one block of rows at a
    time. Each block ``[r0, r1)`` is multiplied only against rows ``r0..k-1``, so the
    lower triangle is never computed and memory stays ``block_rows x k``."""
    k = matrix.shape[0]
    if block_rows < 1:
        raise ValueError("block_rows must be >= 1")
    for r0 in range(0, k, block_rows):
        r1 = min(k, r0 + block_rows)
        block = (matrix[r0:r1] @ matrix[r0:].T).toarray()
        # Column c of the block is unit r0 + c; keep c > local row (strict upper).
        local = np.arange(r1 - r0)[:, None]
        cols = np.arange(k - r0)[None, :]
        # Rounding can put a self-pair a hair off 1.0; the mask removes it anyway.
        ii, jj = np.nonzero((block >= threshold) & (cols > local))
        if ii.size:
            yield ii + r0, jj + r0, block[ii, jj].astype(np.float32)


def screen(
    texts: Sequence[str],
    threshold: float = DEFAULT_THRESHOLD,
    *,
    block_rows: int = DEFAULT_BLOCK_ROWS,
) -> ScreenResult:
    """Screen all pairs of ``texts``; return the candidates (similarity >=
    ``threshold``) and, through the result, the total and screened-out counts.
    Pure and CPU-bound (run it off the event loop)."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"screen threshold must be within [0, 1], got {threshold}")
    k = len(texts)
    if threshold == 0.0:
        # Everything is a candidate: skip the maths (and float noise below 0).
        ii, jj = np.triu_indices(k, 1)
        return ScreenResult(
            units=k,
            threshold=threshold,
            pairs=np.stack([ii, jj], axis=1).astype(np.int64),
            similarity=np.full(ii.size, np.nan, dtype=np.float32),
        )
    matrix = _tfidf_columns(texts, CJK_NGRAMS, OTHER_NGRAMS, HASH_BITS, shared_only=True).tocsr()
    found_i: list[np.ndarray] = []
    found_j: list[np.ndarray] = []
    found_s: list[np.ndarray] = []
    for ii, jj, ss in iter_similar_pairs(matrix, threshold, block_rows=block_rows):
        found_i.append(ii)
        found_j.append(jj)
        found_s.append(ss)
    if found_i:
        pairs = np.stack([np.concatenate(found_i), np.concatenate(found_j)], axis=1)
        sims = np.concatenate(found_s)
    else:
        pairs = np.empty((0, 2), dtype=np.int64)
        sims = np.empty(0, dtype=np.float32)
    return ScreenResult(units=k, threshold=threshold, pairs=pairs.astype(np.int64), similarity=sims)
