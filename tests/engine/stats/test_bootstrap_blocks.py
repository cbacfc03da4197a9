"""Resamples drawn in blocks give the numbers a single matrix gave (issue 17)."""
from __future__ import annotations

import numpy as np
import pytest

from drscore.engine.stats.bootstrap import (
    iter_resample_counts,
    mean_ci,
    paired_bootstrap,
    resample_counts,
    weighted_replicates,
)

# PCG64(7).integers(0, 3, size=(5, 3)): the task drawn at each of 3 draws, 5 resamples.
DRAWS_SEED_7 = [[2, 1, 2], [2, 1, 2], [2, 0, 0], [0, 0, 2], [2, 0, 1]]
# ... as multiplicities of tasks 0, 1, 2 (counted by hand from the draws above).
COUNTS_SEED_7 = [[0, 1, 2], [0, 1, 2], [2, 0, 1], [2, 0, 1], [1, 1, 1]]


def test_the_draws_are_numpys_pcg64_stream() -> None:
    rng = np.random.Generator(np.random.PCG64(7))
    assert rng.integers(0, 3, size=(5, 3)).tolist() == DRAWS_SEED_7


@pytest.mark.parametrize("block_cells", [1, 3, 6, 7, 15, 1 << 20])
def test_blocks_concatenate_to_the_hand_counted_multiplicities(block_cells: int) -> None:
    blocks = list(iter_resample_counts(3, 5, 7, block_cells=block_cells))
    assert np.concatenate(blocks).tolist() == COUNTS_SEED_7
    # block_cells // n resamples a block (at least one): 6 cells hold 2 rows of 3 tasks
    assert len(blocks[0]) == max(1, min(5, block_cells // 3))
    assert resample_counts(3, 5, 7).tolist() == COUNTS_SEED_7


def test_mean_replicates_and_interval_by_hand() -> None:
    values = np.array([0.0, 3.0, 6.0])
    # counts . values / 3: [0,1,2] -> 15/3 = 5; [2,0,1] -> 6/3 = 2; [1,1,1] -> 9/3 = 3
    expected = [5.0, 5.0, 2.0, 2.0, 3.0]
    for cells in (3, 6, 1 << 20):
        assert weighted_replicates(values, 5, 7, block_cells=cells).tolist() == expected
    point, ci = mean_ci(values.tolist(), resamples=5, seed=7)
    # sorted replicates 2, 2, 3, 5, 5: the 2.5th percentile interpolates at 0.1 (between
    # 2 and 2), the 97.5th at 3.9 (between 5 and 5)
    assert point == 3.0
    assert ci is not None and (ci.low, ci.high, ci.defined, ci.resamples) == (2.0, 5.0, 5, 5)


def test_paired_bootstrap_uses_the_same_blocks() -> None:
    # differences b - a = 0, 3, 6: the replicates above, so 0 is outside [2, 5]
    result = paired_bootstrap([1.0, 1.0, 1.0], [1.0, 4.0, 7.0], resamples=5, seed=7)
    assert result.delta == 3.0
    assert result.ci is not None and result.ci.as_list() == [2.0, 5.0]
    assert result.significant and result.p_value == 0.0


def test_many_tasks_stay_in_bounded_blocks() -> None:
    n = 300_000  # one matrix of 1,000 x 300,000 int64 would be 2.4 GB
    sizes = [b.shape for b in iter_resample_counts(n, 7, 1)]
    assert sizes == [(3, n), (3, n), (1, n)]  # 2^20 cells // 300,000 tasks = 3 rows a block
    assert all(b.sum() == 3 * n for b in iter_resample_counts(n, 6, 1))
