"""The counter-based normal stream behind the simulated transmission matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from opu_hal.randomness.counter_random import gaussian, splitmix64

MASK = 2**64 - 1


def reference_splitmix64(counter: int, seed: int) -> int:
    """SplitMix64's output function in Python integers (Steele et al. 2014)."""
    z = (counter * 0x9E3779B97F4A7C15 + seed) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def test_the_int64_hash_equals_splitmix64_in_exact_integers():
    counters = [0, 1, 2, 12345, 2**40 + 7, 2**62 + 3]
    got = splitmix64(torch.tensor(counters, dtype=torch.int64), 987654321)
    assert [int(v) & MASK for v in got] == [reference_splitmix64(c, 987654321) for c in counters]


def test_any_slice_equals_the_same_part_of_the_whole_stream():
    whole = gaussian(5, 0, 1001)
    for start, count in [(0, 1), (1, 1), (3, 10), (500, 501), (999, 2)]:
        assert torch.equal(gaussian(5, start, count), whole[start : start + count])


def test_entries_are_standard_normal_and_seeds_give_different_streams():
    x = gaussian(1, 0, 400_000).double().numpy()
    assert stats.kstest(x, "norm").pvalue > 1e-3
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 0.01  # neighbours (a Box-Muller pair) uncorrelated
    assert not torch.equal(gaussian(1, 0, 100), gaussian(2, 0, 100))


def test_a_negative_slice_is_refused():
    with pytest.raises(ValueError, match=">= 0"):
        gaussian(0, -1, 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the stream is compared on a GPU only")
def test_cuda_and_cpu_give_the_same_stream():
    assert torch.allclose(gaussian(9, 17, 100_000), gaussian(9, 17, 100_000, device="cuda").cpu(), atol=1e-6)
