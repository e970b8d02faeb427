"""The private samplers' draws on the compiled counter-mode ChaCha20 keystream: layout against a
pure-Python RFC 8439 block function, disjointness from randomgen's stream under the same key, exact
bounded integers, laws of the draws, and checkpoints that replay from the stream they were drawn on."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

pytest.importorskip("numba", reason="Numba is not installed: private batches come from randomgen")

from randomgen import ChaCha

from opu_hal.kernels.compiled import chacha
from opu_hal.randomness.draws import bernoulli_indices
from opu_hal.randomness.keyed_stream import SAMPLING_NONCE, KeyedStream, keyed_stream
from opu_hal.randomness.secure_random import keyed_generator, new_secret_key, stream_key
from tests.test_triton_kernels import chacha20_block
from trainers.core.errors import TrainingConfigError
from trainers.core.sampling import COMPILED_STREAM, RANDOMGEN_STREAM, Sampler

SECRET = "5e" * 32
TWO_53 = 1 << 53


def reference_values(key: int, first_block: int, n: int) -> list[int]:
    """The 53-bit integers of ``n`` uniforms from ``first_block`` on, in plain Python (RFC 8439)."""
    raw = key.to_bytes(32, "little")
    out = []
    for block in range(first_block, first_block + -(-n // 8)):
        words = chacha20_block(raw, block, SAMPLING_NONCE)
        out += [(words[2 * p] >> 5) * (1 << 26) + (words[2 * p + 1] >> 6) for p in range(8)]
    return out[:n]


def test_uniforms_are_the_rfc8439_keystream_at_the_sampling_nonce_and_never_reread():
    key = stream_key(SECRET, "batch", 7)
    stream = keyed_stream(SECRET, "batch", 7)
    first, second = stream.random(21), stream.random(3)  # 21 values reserve 3 blocks; the next call starts at 3
    assert [int(u * TWO_53) for u in first] == reference_values(key, 0, 21)
    assert [int(u * TWO_53) for u in second] == reference_values(key, 3, 3)
    parallel = np.empty(1000)  # the secure generator's parallel kernel gives the same values
    chacha.uniforms(
        chacha.key_words(key.to_bytes(32, "little")), np.uint64(0), np.uint32(SAMPLING_NONCE), np.uint32(0), parallel
    )
    assert np.array_equal(KeyedStream(key).random(1000), parallel)


def test_the_sampling_nonce_is_out_of_reach_of_randomgens_stream_under_the_same_key():
    key = stream_key(SECRET, "batch", 0)
    words = np.empty((1, 16), np.uint32)
    chacha.keystream_words(
        chacha.key_words(key.to_bytes(32, "little")), np.uint64(0), np.uint32(SAMPLING_NONCE), np.uint32(0), 1, words
    )
    as_64 = [int(words[0, 2 * p]) | int(words[0, 2 * p + 1]) << 32 for p in range(8)]
    # randomgen counts 32-bit words in a 128-bit counter: our block 0 is its block 4 * 2^64
    assert ChaCha(key=key, rounds=20, counter=16 * SAMPLING_NONCE << 64).random_raw(8).tolist() == as_64
    assert ChaCha(key=key, rounds=20).random_raw(8).tolist() != as_64


def test_bounded_integers_are_exact_and_redraw_rejected_values_in_order():
    key = stream_key(SECRET, "batch", 1)
    bound = (1 << 52) + 1  # floor(2^53 / bound) = 1: about half of the values are rejected
    got = KeyedStream(key).integers_below(np.full(40, bound))
    values = iter(reference_values(key, 0, 40))
    expected, block = [], 5  # 40 values reserve blocks 0-4; each redraw reserves a block of its own
    for _ in range(40):
        r = next(values)
        while r >= bound:
            r, block = reference_values(key, block, 1)[0], block + 1
        expected.append(r)
    assert got.tolist() == expected and block > 10  # the rejection path ran
    small = KeyedStream(key).integers_below(np.array([1, 2, 3, 13824]))
    assert small.tolist() == [r % m for r, m in zip(reference_values(key, 0, 4), [1, 2, 3, 13824])]
    with pytest.raises(ValueError, match="bounds must lie in"):
        KeyedStream(key).integers_below(np.array([0]))


def test_fixed_size_batches_are_the_front_of_a_fisher_yates_shuffle_of_the_keystream():
    sampler = Sampler("fixed", 300, 30, seed=0, secret_key=SECRET, stream=COMPILED_STREAM)
    values = reference_values(stream_key(SECRET, "batch", 4), 0, 30)  # no rejection at these bounds
    order = list(range(300))
    for i, r in enumerate(values):
        j = i + r % (300 - i)
        order[i], order[j] = order[j], order[i]
    assert sampler.batch(0, 4).tolist() == order[:30]


def test_draws_follow_their_laws():
    stream = keyed_stream(new_secret_key(), "batch", 0)
    perms = [tuple(stream.permutation(4)) for _ in range(4800)]  # all 24 orders equally likely
    counts = [perms.count(p) for p in set(perms)]
    assert len(counts) == 24 and stats.chisquare(counts).pvalue > 1e-4
    picks = np.concatenate([stream.choice(10, 3) for _ in range(3000)])  # each value in 3/10 of the draws
    assert stats.chisquare(np.bincount(picks, minlength=10)).pvalue > 1e-4
    sizes = [len(bernoulli_indices(stream, 2000, 0.05)) for _ in range(400)]  # Binomial(2000, 0.05)
    assert abs(np.mean(sizes) - 100) < 2.5 and 0.7 < np.var(sizes) / 95 < 1.3  # 5 standard errors
    hits = np.bincount(
        np.concatenate([bernoulli_indices(stream, 50, 0.2).numpy() for _ in range(2000)]), minlength=50
    )  # every example joins with probability 0.2
    assert stats.chisquare(hits).pvalue > 1e-4 and abs(hits.mean() / 2000 - 0.2) < 0.01


def test_a_sampler_state_replays_from_its_own_stream(monkeypatch):
    compiled = Sampler("poisson", 500, 50, seed=0, secret_key=SECRET, stream=COMPILED_STREAM)
    state = compiled.state_dict()
    assert state == {"secret_key": SECRET, "stream": COMPILED_STREAM}
    old = Sampler("poisson", 500, 50, seed=0, secret_key=new_secret_key()).with_state({"secret_key": SECRET})
    assert old.stream == RANDOMGEN_STREAM  # a checkpoint from before the compiled stream
    assert torch.equal(old.batch(0, 2), bernoulli_indices(keyed_generator(SECRET, "batch", 2), 500, 0.1))
    assert not torch.equal(old.batch(0, 2), compiled.batch(0, 2))
    with pytest.raises(TrainingConfigError, match="unknown stream 'philox'"):
        compiled.with_state({"secret_key": SECRET, "stream": "philox"})
    monkeypatch.setenv("OPU_HAL_NO_NUMBA", "1")
    with pytest.raises(TrainingConfigError, match="needs Numba"):
        compiled.batch(0, 0)  # fresh batches from another stream would pair replayed noise with new data
    assert Sampler("poisson", 500, 50, seed=0, secret_key=SECRET).stream == RANDOMGEN_STREAM


def test_keyed_normals_are_the_32_bit_ziggurat_at_their_own_nonce_and_never_reread():
    from opu_hal.kernels.compiled import chacha_normal32
    from opu_hal.randomness.keyed_stream import NORMALS_NONCE

    key = stream_key(SECRET, "noise", 3)
    stream = keyed_stream(SECRET, "noise", 3)
    first, second = stream.standard_normal((4, 5)), stream.standard_normal(7)  # the second starts at block 20
    words = chacha.key_words(key.to_bytes(32, "little"))
    expected = chacha_normal32.standard_normals(words, 0, NORMALS_NONCE, np.empty(27, np.float32))
    assert first.shape == (4, 5) and first.dtype == np.float32
    assert np.array_equal(first.ravel(), expected[:20])
    assert np.array_equal(second, chacha_normal32.standard_normals(words, 20, NORMALS_NONCE, np.empty(7, np.float32)))
    assert not np.array_equal(second, expected[20:])  # blocks 20.. of a fresh call, not the rest of the first
    many = np.empty(20_000, np.float32)  # several tasks: one thread gives the parallel kernel's values
    assert np.array_equal(
        chacha_normal32.standard_normals(words, 5, NORMALS_NONCE, many.copy(), parallel=False),
        chacha_normal32.standard_normals(words, 5, NORMALS_NONCE, many),
    )
    uniforms = keyed_stream(SECRET, "noise", 3).random(8)  # the uniforms' nonce is another keystream
    assert not np.isin(uniforms, keyed_stream(SECRET, "noise", 3).standard_normal(8)).any()
    with pytest.raises(ValueError, match="float32 normals only"):
        stream.standard_normal(3, dtype=np.float64)


def test_keyed_normals_are_standard_normal():
    values = keyed_stream(SECRET, "noise", 0).standard_normal(200_000)
    assert stats.kstest(values, "norm").pvalue > 1e-3
    assert abs(values.mean()) < 0.01 and abs(values.std() - 1) < 0.01
