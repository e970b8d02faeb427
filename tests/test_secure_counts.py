"""Privacy counts on the CPU: the compiled ChaCha20 keystream and PTRS at one mean (Skellam noise)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

pytest.importorskip("numba", reason="Numba is not installed: the secure generator uses randomgen alone")

from opu_hal.kernels.compiled import chacha
from opu_hal.kernels.compiled.poisson_constant import constant_mean_counts
from opu_hal.randomness.secure_random import COUNTS_GENERATOR_NAME, GENERATOR_NAME, SecureGenerator
from tests.test_compiled_camera import _chi_square_p
from tests.test_triton_kernels import RFC_BLOCK, chacha20_block


def test_keystream_matches_the_rfc8439_test_vector():
    # RFC 8439 section 2.3.2: key 00..1f, block count 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00
    words = np.empty((1, 16), np.uint32)
    chacha.keystream_words(
        chacha.key_words(bytes(range(32))),
        np.uint64(1 + (0x09000000 << 32)),
        np.uint32(0x4A000000),
        np.uint32(0),
        1,
        words,
    )
    assert words[0].tolist() == RFC_BLOCK


def test_keystream_matches_a_python_reference_across_the_counter_words():
    key = bytes(np.random.default_rng(3).integers(0, 256, 32, dtype=np.uint8))
    start = 2**32 - 3  # the low counter word wraps into the high one inside this run
    words = np.empty((300, 16), np.uint32)
    chacha.keystream_words(chacha.key_words(key), np.uint64(start), np.uint32(7), np.uint32(0), 300, words)
    for index in (0, 2, 3, 4, 17, 299):
        assert words[index].tolist() == chacha20_block(key, start + index, 7)


def test_uniforms_are_the_keystream_words_in_pairs_including_a_partial_chunk():
    key = chacha.key_words(bytes(range(1, 33)))
    n = 1000  # not a multiple of the 128 uniforms of a chunk
    out = np.empty(n)
    chacha.uniforms(key, np.uint64(40), np.uint32(1), np.uint32(0), out)
    words = np.empty((chacha.blocks_for(n), 16), np.uint32)
    chacha.keystream_words(key, np.uint64(40), np.uint32(1), np.uint32(0), words.shape[0], words)
    pairs = words.reshape(-1, 2).astype(np.float64)[:n]
    expected = (np.floor(pairs[:, 0] / 32) * 67108864.0 + np.floor(pairs[:, 1] / 64)) / 2.0**53
    assert np.array_equal(out, expected)


def _uniform_stream():
    key, state = chacha.key_words(bytes(range(32))), {"block": 0}

    def draw(m: int) -> np.ndarray:
        out = np.empty(m)
        chacha.uniforms(key, np.uint64(state["block"]), np.uint32(1), np.uint32(0), out)
        state["block"] += chacha.blocks_for(m)
        return out

    return draw


@pytest.mark.parametrize("mean", [10.0, 57.3, 1.0e4, 4.0e8])
def test_counts_at_one_mean_are_poisson_by_chi_square(mean):
    counts = constant_mean_counts(mean, 200_000, _uniform_stream())
    assert counts.dtype == np.int64
    assert _chi_square_p(counts, stats.poisson(mean)) > 1e-4


def test_counts_check_rejects_a_one_percent_mean_error():
    counts = constant_mean_counts(1.0e4 * 1.01, 200_000, _uniform_stream())
    assert _chi_square_p(counts, stats.poisson(1.0e4)) < 1e-6


def test_constant_mean_counts_refuse_means_below_ten():
    with pytest.raises(ValueError, match="mean >= 10"):
        constant_mean_counts(9.5, 10, _uniform_stream())


def test_secure_generator_draws_counts_from_the_counter_stream_and_never_reuses_a_block():
    generator = SecureGenerator()
    before = generator.secret_state()["cuda"]["block"]
    first = generator.skellam(3.0e5, 50_000)
    middle = generator.secret_state()["cuda"]["block"]
    second = generator.skellam(3.0e5, 50_000)
    assert generator.name == COUNTS_GENERATOR_NAME
    assert middle >= before + 2 * chacha.blocks_for(2 * 50_000)  # two counts a value, two uniforms a round
    assert generator.secret_state()["cuda"]["block"] > middle
    assert not np.array_equal(first, second)
    assert abs(first.var() / (2 * 3.0e5) - 1) < 0.03


def test_a_checkpointed_generator_replays_its_counts_and_a_fresh_one_does_not():
    generator = SecureGenerator()
    generator.poisson(100.0, 10)
    state = generator.secret_state()
    counts = generator.poisson(250.0, 5000)
    assert np.array_equal(SecureGenerator.from_secret_state(state).poisson(250.0, 5000), counts)
    assert not np.array_equal(SecureGenerator().poisson(250.0, 5000), counts)


def test_small_means_and_no_numba_use_randomgens_sampler(monkeypatch):
    generator = SecureGenerator()
    generator.poisson(5.0, 1000)
    assert generator.name == GENERATOR_NAME
    monkeypatch.setenv("OPU_HAL_NO_NUMBA", "1")
    other = SecureGenerator()
    counts = other.poisson(400.0, 20_000)
    assert other.name == GENERATOR_NAME and abs(counts.mean() - 400) < 5 * (400 / 20_000) ** 0.5
    assert torch.from_numpy(counts).dtype == torch.int64


def test_privacy_summary_names_the_counts_generator_and_the_rounding_generator():
    from trainers.cli import privacy_summary

    privacy = {
        "mechanism": "skellam",
        "noise_source": "device",
        "generator": "ChaCha20 (randomgen), k",
        "device_noise": {
            "poisson_mean_lower": 4e8,
            "reads_per_value": 7,
            "mean_source": "model",
            "generator": COUNTS_GENERATOR_NAME,
        },
    }
    line = privacy_summary(privacy, {"name": "opu-sim-dp"})
    assert f"counts from {COUNTS_GENERATOR_NAME}" in line
    assert "lattice rounding from ChaCha20 (randomgen), k" in line
    assert "generator ChaCha20 (randomgen)" in privacy_summary(
        {"mechanism": "gaussian", "generator": "ChaCha20 (randomgen)"}, None
    )


def test_counts_at_varying_means_are_poisson_at_each_mean_and_match_the_constant_kernel():
    from opu_hal.kernels.compiled.poisson_varying import varying_mean_counts

    means = np.repeat([10.0, 57.3, 1.0e4, 4.0e8], 100_000)
    counts = varying_mean_counts(means, _uniform_stream())
    for k, mean in enumerate((10.0, 57.3, 1.0e4, 4.0e8)):
        assert _chi_square_p(counts[k * 100_000 : (k + 1) * 100_000], stats.poisson(mean)) > 1e-4
    shifted = varying_mean_counts(np.full(200_000, 1.0e4 * 1.01), _uniform_stream())
    assert _chi_square_p(shifted, stats.poisson(1.0e4)) < 1e-6  # the check has power
    same = np.full(50_000, 321.0)  # one mean: the same counts as the constant kernel on the same uniforms
    assert np.array_equal(
        varying_mean_counts(same, _uniform_stream()), constant_mean_counts(321.0, 50_000, _uniform_stream())
    )
    with pytest.raises(ValueError, match=">= 10"):
        varying_mean_counts(np.array([50.0, 9.5]), _uniform_stream())


def test_secure_generator_draws_per_value_means_from_the_counter_stream_and_old_states_keep_numpy():
    generator = SecureGenerator()
    means = np.linspace(20.0, 5.0e3, 30_000)
    before = generator.secret_state()
    counts = generator.poisson_at(means)
    assert generator.secret_state()["cuda"]["block"] >= before["cuda"]["block"] + chacha.blocks_for(2 * 30_000)
    assert np.array_equal(SecureGenerator.from_secret_state(before).poisson_at(means), counts)  # replays
    assert abs(((counts - means) / np.sqrt(means)).std() - 1) < 0.03
    legacy = SecureGenerator.from_secret_state({**before, "cpu_stream": "counter"})
    block = legacy.secret_state()["cuda"]["block"]
    legacy.poisson_at(means)
    assert legacy.secret_state()["cuda"]["block"] == block  # numpy's sampler on the randomgen streams
    small = generator.poisson_at(np.array([3.0, 40.0]))  # a mean below 10: numpy's sampler for the call
    assert small.dtype == np.int64


@pytest.mark.parametrize("size", [1, 3, 63, 4096 * 2 + 65, 300_001])
def test_a_first_round_read_from_the_keystream_gives_the_counts_of_uniforms_drawn_first(size):
    from opu_hal.kernels.compiled.poisson_varying import varying_mean_counts

    rng = np.random.default_rng(size)
    means = np.concatenate([rng.uniform(10.0, 60.0, size - size // 3), rng.uniform(1.0e3, 4.0e8, size // 3)])
    generator = SecureGenerator()
    generator.poisson_at(np.full(5, 50.0))  # a counter away from 0
    before = generator.secret_state()
    fused = generator.poisson_at(means)
    replay = SecureGenerator.from_secret_state(before)
    two_pass = varying_mean_counts(means, replay._counter_uniforms)  # round one's uniforms in an array first
    assert np.array_equal(fused, two_pass)
    assert generator.secret_state()["cuda"]["block"] == replay.secret_state()["cuda"]["block"]
