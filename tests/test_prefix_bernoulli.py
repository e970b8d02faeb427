"""Poisson subsampling's inclusions decided on 16-bit prefixes (``KeyedStream.bernoulli_indices``):
the same law as one whole 53-bit uniform per example, checked bit for bit against a reference built
from the plain keystream, ties with the threshold included."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")

from opu_hal.kernels.compiled import chacha
from opu_hal.randomness.keyed_stream import SAMPLING_NONCE, KeyedStream

TWO_53 = 1 << 53


def reference_uniforms(key: int, n: int) -> np.ndarray:
    """Every example's whole 53-bit integer ``r_i = h_i 2^37 + l_i``, read from the keystream as the
    kernel's docstring lays it out (prefixes at nonce (4, 1), the other 37 bits at (4, 2))."""
    words = chacha.key_words(key.to_bytes(32, "little"))
    prefix_blocks = np.empty((-(-n // 32), 16), np.uint32)
    chacha.keystream_words(
        words, np.uint64(0), np.uint32(SAMPLING_NONCE), np.uint32(1), prefix_blocks.shape[0], prefix_blocks
    )
    halves = prefix_blocks.reshape(-1).view("<u2")[:n].astype(np.int64)  # low half first
    tie_blocks = np.empty((n, 16), np.uint32)
    chacha.keystream_words(words, np.uint64(0), np.uint32(SAMPLING_NONCE), np.uint32(2), n, tie_blocks)
    low = (tie_blocks[:, 0].astype(np.int64) << 5) | (tie_blocks[:, 1] >> 27).astype(np.int64)
    return (halves << 37) | low


@pytest.mark.parametrize("key", [1, 2**255 + 12345, 987654321987654321])
def test_prefix_inclusions_are_the_whole_uniforms_below_the_threshold_ties_included(key):
    n = 1 << 18
    threshold = 77 * 2**37 + 2**36  # a tie (prefix 77, probability 2^-16) is settled by the other 37 bits half the time
    rate = threshold / TWO_53
    assert math.ceil(rate * TWO_53) == threshold
    r = reference_uniforms(key, n)
    ties = (r >> 37) == 77
    assert ties.sum() >= 1  # the tie path runs (four expected per key)
    np.testing.assert_array_equal(KeyedStream(key).bernoulli_indices(n, rate), np.flatnonzero(r < threshold))


def test_ties_are_kept_and_dropped_by_their_other_bits():
    """Over a few fixed keys both outcomes of a tie occur and each matches the reference."""
    n, threshold = 1 << 18, 77 * 2**37 + 2**36
    kept = dropped = 0
    for key in range(3, 11):
        r = reference_uniforms(key, n)
        ties = np.flatnonzero((r >> 37) == 77)
        got = set(KeyedStream(key).bernoulli_indices(n, threshold / TWO_53).tolist())
        for i in ties:
            assert (i in got) == (r[i] < threshold)
            kept, dropped = kept + (i in got), dropped + (i not in got)
    assert kept >= 1 and dropped >= 1


def test_the_threshold_is_the_whole_uniforms_comparison():
    """``u < rate`` with ``u = r / 2^53`` holds exactly when ``r < ceil(rate 2^53)``: the prefix stream keeps
    the law of the whole-uniform stream it replaces."""
    for rate in (256 / 54_000, 0.1, 1 / 3, 2**-40, 1 - 2**-53):
        threshold = math.ceil(rate * TWO_53)
        for r in (threshold - 1, threshold):
            assert (r / TWO_53 < rate) == (r < threshold)


def test_edge_rates_keep_nothing_or_everything_and_bad_rates_are_refused():
    stream = KeyedStream(5)
    assert stream.bernoulli_indices(1000, 0.0).size == 0
    np.testing.assert_array_equal(stream.bernoulli_indices(1000, 1.0), np.arange(1000))
    assert stream.bernoulli_indices(0, 0.5).size == 0
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            stream.bernoulli_indices(10, bad)


def test_consecutive_draws_read_fresh_blocks_and_keep_the_rate():
    stream, n, rate = KeyedStream(6), 54_000, 256 / 54_000
    draws = [stream.bernoulli_indices(n, rate) for _ in range(400)]
    assert not any(np.array_equal(draws[0], d) for d in draws[1:])
    sizes = np.array([d.size for d in draws])
    assert abs(sizes.mean() - n * rate) < 5 * math.sqrt(n * rate / len(draws))
    counts = np.bincount(np.concatenate(draws) % 32, minlength=32)  # each prefix slot of a block alike
    expected = sizes.sum() / 32
    assert ((counts - expected) ** 2 / expected).sum() < 70  # chi-square, 31 degrees of freedom (p about 1e-4)
