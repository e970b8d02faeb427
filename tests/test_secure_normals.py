"""Privacy normals and uniforms on the CPU: the Marsaglia-Tsang ziggurat on the compiled counter-mode
ChaCha20 keystream (RFC 8439), its layout, law, replay and naming in the secure generator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

pytest.importorskip("numba", reason="Numba is not installed: the secure generator uses randomgen alone")

from opu_hal.contract.errors import OpuHalError
from opu_hal.kernels.compiled import chacha, chacha_normal, chacha_normal32
from opu_hal.kernels.compiled.normal import ZIGGURAT_F, ZIGGURAT_K, ZIGGURAT_R, ZIGGURAT_W
from opu_hal.randomness.secure_random import GENERATOR_NAME, NORMALS_NONCE, UNIFORMS_NONCE, SecureGenerator
from tests.test_triton_kernels import RFC_BLOCK, chacha20_block

RFC_KEY = bytes(range(32))


def test_single_and_lane_blocks_match_the_rfc8439_test_vector():
    # RFC 8439 section 2.3.2: key 00..1f, block count 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00
    key, block = chacha.key_words(RFC_KEY), np.uint64(1 + (0x09000000 << 32))
    words = np.empty(16, np.uint32)
    chacha_normal._block(key, block, np.uint32(0x4A000000), np.uint32(0), words)
    assert words.tolist() == RFC_BLOCK
    lanes = np.empty((16, chacha.LANES), np.uint32)
    blocks = np.array([block, block + np.uint64(5)] + [0] * (chacha.LANES - 2), np.uint64)
    chacha_normal._lane_blocks(key, blocks, 2, np.uint32(0x4A000000), np.uint32(0), lanes)
    assert lanes[:, 0].tolist() == RFC_BLOCK
    assert lanes[:, 1].tolist() == chacha20_block(RFC_KEY, int(block) + 5, 0x4A000000)


def _uniform53(hi: int, lo: int) -> float:
    return ((hi >> 5) * 67108864.0 + (lo >> 6)) / 2.0**53


def _substream(key: bytes, counter: int, nonce: int, i: int, reserved: int):
    """Normal ``i``'s substream as a function returning its next 64-bit pair: pair ``k % 8`` of block
    ``counter + i`` at nonce ``(nonce, 1 + k // 8)``, inside the call's ``reserved`` blocks."""
    pairs, substream = iter([]), 0

    def next_pair():
        nonlocal pairs, substream
        try:
            return next(pairs)
        except StopIteration:
            substream += 1
            block = chacha20_block(key, counter + i, nonce | (substream << 32))
            assert counter <= counter + i < counter + reserved  # within the reservation
            pairs = iter([(block[2 * p], block[2 * p + 1]) for p in range(8)])
            return next(pairs)

    return next_pair


def _reference_normals(key: bytes, counter: int, nonce: int, n: int) -> tuple[np.ndarray, dict[str, int]]:
    """The module's layout in plain Python on :func:`chacha20_block`: numpy's ziggurat
    (``random_standard_normal``), first proposals from the shared blocks, the rest from each
    normal's substream; also how often each branch ran (so the test knows it covered them)."""
    words = np.empty((chacha.blocks_for(n), 16), np.uint32)
    chacha.keystream_words(
        chacha.key_words(key), np.uint64(counter), np.uint32(nonce), np.uint32(0), words.shape[0], words
    )
    out, seen = np.empty(n), {"wedge": 0, "tail": 0, "rejected": 0}
    for i in range(n):
        next_pair = _substream(key, counter, nonce, i, chacha_normal.blocks_for(n))
        hi, lo = int(words[i // 8, 2 * (i % 8)]), int(words[i // 8, 2 * (i % 8) + 1])  # the first proposal
        while True:
            bits = (hi << 32) | lo
            layer, negative, rabs = bits & 0xFF, (bits >> 8) & 1, (bits >> 9) & 0x000FFFFFFFFFFFFF
            x = rabs * float(ZIGGURAT_W[layer])
            if rabs < int(ZIGGURAT_K[layer]):
                break
            if layer == 0:
                seen["tail"] += 1
                while True:
                    xx = -math.log1p(-_uniform53(*next_pair())) / ZIGGURAT_R
                    yy = -math.log1p(-_uniform53(*next_pair()))
                    if yy + yy > xx * xx:
                        break
                x = ZIGGURAT_R + xx
                break
            seen["wedge"] += 1
            if (ZIGGURAT_F[layer - 1] - ZIGGURAT_F[layer]) * _uniform53(*next_pair()) + ZIGGURAT_F[layer] < math.exp(
                -0.5 * x * x
            ):
                break
            seen["rejected"] += 1
            hi, lo = next_pair()  # a new proposal
        out[i] = -x if negative else x
    return out, seen


def test_normals_match_a_python_reference_of_the_layout_including_wedges_tails_and_rejections():
    key, counter, n = bytes(range(7, 39)), 2**32 - 1000, 40_000  # the counter's low word wraps inside
    expected, seen = _reference_normals(key, counter, 5, n)
    assert seen["tail"] > 0 and seen["wedge"] > 100 and seen["rejected"] > 0
    got = chacha_normal.standard_normals(chacha.key_words(key), counter, 5, np.empty(n))
    assert np.array_equal(got, expected)
    single = chacha_normal.standard_normals(chacha.key_words(key), counter, 5, np.empty(n, np.float32))
    assert np.array_equal(single, expected.astype(np.float32))


def _reference_normals32(key: bytes, counter: int, nonce: int, n: int) -> tuple[np.ndarray, dict[str, int]]:
    """The 32-bit kernel's layout in plain Python: first proposals one word each from the shared
    blocks, every later value a pair from the normal's substream (a proposal: its first word)."""
    k32, w32, f32 = chacha_normal32.K32, chacha_normal32.W32, chacha_normal32.F32
    words = np.empty((-(-n // 16), 16), np.uint32)
    chacha.keystream_words(
        chacha.key_words(key), np.uint64(counter), np.uint32(nonce), np.uint32(0), words.shape[0], words
    )
    out, seen = np.empty(n), {"wedge": 0, "tail": 0, "rejected": 0, "outside again": 0}
    for i in range(n):
        next_pair = _substream(key, counter, nonce, i, chacha_normal32.blocks_for(n))
        word = int(words[i // 16, i % 16])
        first_layer, first_rabs = word & 0xFF, (word >> 9) & 0x7FFFFF
        if first_rabs < int(k32[first_layer]):  # inside its rectangle: float32 arithmetic
            y = np.float32(first_rabs) * chacha_normal32.W32F[first_layer]
            out[i] = -y if (word >> 8) & 1 else y
            continue
        while True:
            layer, negative, rabs = word & 0xFF, (word >> 8) & 1, (word >> 9) & 0x7FFFFF
            x = rabs * float(w32[layer])
            if rabs < int(k32[layer]):
                break
            u = _uniform53(*next_pair())
            if layer == 0:
                seen["tail"] += 1
                while True:
                    xx = -math.log1p(-u) / ZIGGURAT_R
                    yy = -math.log1p(-_uniform53(*next_pair()))
                    if yy + yy > xx * xx:
                        break
                    u = _uniform53(*next_pair())
                x = ZIGGURAT_R + xx
                break
            seen["wedge"] += 1
            if (f32[layer - 1] - f32[layer]) * u + f32[layer] < math.exp(-0.5 * x * x):
                break
            seen["rejected"] += 1
            word = next_pair()[0]
            seen["outside again"] += (word >> 9) & 0x7FFFFF >= int(k32[word & 0xFF])
        out[i] = -x if negative else x
    return out, seen


def test_32_bit_normals_match_a_python_reference_of_their_layout_including_wedges_tails_and_rejections():
    key, counter, n = bytes(range(3, 35)), 2**32 - 900, 40_000  # the counter's low word wraps inside
    expected, seen = _reference_normals32(key, counter, 7, n)
    # every path of the kernel: the branch-free second pass (a wedge accepted, or rejected and the next
    # proposal inside its rectangle) and the sequential settling it leaves (the tail; outside again)
    assert seen["tail"] > 0 and seen["wedge"] > 100 and seen["rejected"] > 0 and seen["outside again"] > 0
    got = chacha_normal32.standard_normals(chacha.key_words(key), counter, 7, np.empty(n, np.float32))
    assert np.array_equal(got, expected.astype(np.float32))
    with pytest.raises(ValueError, match="float32"):
        chacha_normal32.standard_normals(chacha.key_words(key), counter, 7, np.empty(n))


@pytest.mark.parametrize("kernel", [chacha_normal, chacha_normal32], ids=["64-bit", "32-bit"])
def test_normals_are_standard_normal_including_the_tail_and_the_check_has_power(kernel):
    out = np.empty(2_000_000, np.float32 if kernel is chacha_normal32 else np.float64)
    z = kernel.standard_normals(chacha.key_words(bytes(range(32))), 0, NORMALS_NONCE, out).astype(np.float64)
    assert stats.kstest(z, "norm").pvalue > 1e-4
    assert stats.kstest(1.01 * z, "norm").pvalue < 1e-6  # a 1 % scale error is caught
    beyond = (np.abs(z) > ZIGGURAT_R).sum()
    expected = 2 * stats.norm.sf(ZIGGURAT_R) * z.shape[0]
    assert abs(beyond - expected) < 5 * math.sqrt(expected)
    assert abs(stats.kurtosis(z)) < 0.02 and abs(z.mean()) < 5 / math.sqrt(z.shape[0])


def test_secure_generator_draws_normals_from_the_counter_stream_at_their_own_nonce():
    generator = SecureGenerator()
    start = generator.secret_state()["cuda"]["block"]
    first = generator.standard_normal(100_000)
    middle = generator.secret_state()["cuda"]["block"]
    second = generator.standard_normal(100_000)
    assert first.dtype == torch.float32 and middle == start + chacha_normal32.blocks_for(100_000)
    assert generator.secret_state()["cuda"]["block"] == middle + chacha_normal32.blocks_for(100_000)
    key = chacha.key_words(bytes.fromhex(generator.secret_state()["cuda"]["key"]))
    again = chacha_normal32.standard_normals(key, middle, NORMALS_NONCE, np.empty(100_000, np.float32))
    assert np.array_equal(second.numpy(), again)
    assert not np.array_equal(first.numpy(), second.numpy())
    assert "float32 normals by the Marsaglia-Tsang ziggurat (32-bit proposals) on a compiled" in generator.name
    assert "Poisson counts" not in generator.name and "uniforms" not in generator.name


def test_a_checkpointed_generator_replays_its_normals_and_a_fresh_one_does_not():
    generator = SecureGenerator()
    generator.standard_normal(77)
    state = generator.secret_state()
    normals = generator.standard_normal(50_000)
    assert torch.equal(SecureGenerator.from_secret_state(state).standard_normal(50_000), normals)
    assert not torch.equal(SecureGenerator().standard_normal(50_000), normals)


def test_uniforms_come_from_the_counter_stream_at_their_own_nonce_and_replay():
    generator = SecureGenerator()
    generator.standard_normal(10)
    state = generator.secret_state()
    u = generator.uniform(5000)
    key = chacha.key_words(bytes.fromhex(state["cuda"]["key"]))
    expected = np.empty(5000)
    chacha.uniforms(key, np.uint64(state["cuda"]["block"]), np.uint32(UNIFORMS_NONCE), np.uint32(0), expected)
    assert np.array_equal(u, expected)
    assert np.array_equal(SecureGenerator.from_secret_state(state).uniform(5000), u)
    assert "ziggurat (32-bit proposals) and uniforms" in generator.name
    assert stats.kstest(generator.uniform(200_000), "uniform").pvalue > 1e-4


def test_without_numba_the_normals_and_uniforms_come_from_randomgen(monkeypatch):
    monkeypatch.setenv("OPU_HAL_NO_NUMBA", "1")
    generator = SecureGenerator()
    start = generator.secret_state()["cuda"]["block"]
    z = generator.standard_normal(100_000).double().numpy()
    generator.uniform(1000)
    assert generator.name == GENERATOR_NAME and generator.secret_state()["cuda"]["block"] == start
    assert stats.kstest(z, "norm").pvalue > 1e-4


def test_a_checkpoint_keeps_its_normals_stream_old_ones_stay_on_randomgen_and_none_switches_silently(monkeypatch):
    generator = SecureGenerator()
    state = generator.secret_state()
    assert state["cpu_stream"] == "counter32"
    legacy = {key: value for key, value in state.items() if key != "cpu_stream"}  # written before this stream
    restored = SecureGenerator.from_secret_state(legacy)
    before = restored.secret_state()["cuda"]["block"]
    normals = restored.standard_normal(1000)
    assert restored.name == GENERATOR_NAME and restored.secret_state()["cuda"]["block"] == before
    assert restored.secret_state()["cpu_stream"] == "randomgen"
    assert torch.equal(SecureGenerator.from_secret_state(legacy).standard_normal(1000), normals)  # replays
    monkeypatch.setenv("OPU_HAL_NO_NUMBA", "1")
    with pytest.raises(OpuHalError, match="needs Numba"):
        SecureGenerator.from_secret_state(state).standard_normal(10)


def test_a_checkpoint_of_the_64_bit_stream_replays_its_64_bit_normals():
    generator = SecureGenerator()
    state = {**generator.secret_state(), "cpu_stream": "counter"}  # written before the 32-bit proposals
    restored = SecureGenerator.from_secret_state(state)
    normals = restored.standard_normal(20_000)
    key = chacha.key_words(bytes.fromhex(state["cuda"]["key"]))
    expected = chacha_normal.standard_normals(key, state["cuda"]["block"], NORMALS_NONCE, np.empty(20_000, np.float32))
    assert np.array_equal(normals.numpy(), expected)
    assert restored.secret_state()["cpu_stream"] == "counter"
    assert "normals by the Marsaglia-Tsang ziggurat on a compiled counter-mode keystream" in restored.name
