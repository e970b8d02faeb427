"""The fused GPU kernels: ChaCha20 privacy normals and the one-kernel camera frame.

They run on CUDA with Triton. Without a GPU they also run in Triton's CPU interpreter when Triton is
installed and ``TRITON_INTERPRET=1`` is set before the test run; otherwise they skip and say why.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch
from scipy import stats

from tests.test_poisson import assert_follows_poisson_pmf

HAS_TRITON = importlib.util.find_spec("triton") is not None
INTERPRETED = HAS_TRITON and os.environ.get("TRITON_INTERPRET") == "1" and not torch.cuda.is_available()
pytestmark = pytest.mark.skipif(
    not HAS_TRITON or not (torch.cuda.is_available() or INTERPRETED),
    reason="needs Triton and CUDA (or Triton's interpreter: TRITON_INTERPRET=1)",
)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CUDA_ONLY = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the secure generator uses the kernel on CUDA only"
)


# -- ChaCha20 ------------------------------------------------------------------------------------
def _rotl(x: int, n: int) -> int:
    return ((x << n) | (x >> (32 - n))) & 0xFFFFFFFF


#: RFC 8439 section 2.3.2: the ChaCha20 block for key 00..1f, block count 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00.
RFC_BLOCK = [
    0xE4E7F110, 0x15593BD1, 0x1FDD0F50, 0xC47120A3, 0xC7F4D1C7, 0x0368C033, 0x9AAA2204, 0x4E6CD4C3,
    0x466482D2, 0x09AA9F07, 0x05D7C214, 0xA2028BD9, 0xD19C12B5, 0xB94E16DE, 0xE883D0CB, 0x4E3C50A2,
]  # fmt: skip


def chacha20_block(key: bytes, counter: int, nonce: int) -> list[int]:
    """Pure-Python ChaCha20 block function (RFC 8439 section 2.3, 64-bit counter / 64-bit nonce)."""
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    state += [int.from_bytes(key[4 * i : 4 * i + 4], "little") for i in range(8)]
    state += [counter & 0xFFFFFFFF, counter >> 32, nonce & 0xFFFFFFFF, nonce >> 32]
    x = list(state)

    def quarter(a: int, b: int, c: int, d: int) -> None:
        x[a] = (x[a] + x[b]) & 0xFFFFFFFF
        x[d] = _rotl(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & 0xFFFFFFFF
        x[b] = _rotl(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & 0xFFFFFFFF
        x[d] = _rotl(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & 0xFFFFFFFF
        x[b] = _rotl(x[b] ^ x[c], 7)

    for _ in range(10):
        quarter(0, 4, 8, 12)
        quarter(1, 5, 9, 13)
        quarter(2, 6, 10, 14)
        quarter(3, 7, 11, 15)
        quarter(0, 5, 10, 15)
        quarter(1, 6, 11, 12)
        quarter(2, 7, 8, 13)
        quarter(3, 4, 9, 14)
    return [(a + b) & 0xFFFFFFFF for a, b in zip(x, state)]


def test_chacha_block_matches_the_rfc8439_test_vector():
    from opu_hal.kernels import triton_chacha

    # RFC 8439 section 2.3.2: key 00..1f, block count 1, nonce 00:00:00:09:00:00:00:4a:00:00:00:00
    words = triton_chacha.keystream_words(bytes(range(32)), 1 + (0x09000000 << 32), 0x4A000000, 1, DEVICE)
    assert words[0].tolist() == RFC_BLOCK


def test_chacha_keystream_matches_a_python_reference_across_the_counter_words():
    from opu_hal.kernels import triton_chacha

    key = bytes(np.random.default_rng(3).integers(0, 256, 32, dtype=np.uint8))
    start = 2**32 - 3  # the low counter word wraps into the high one inside this run
    words = triton_chacha.keystream_words(key, start, 7, 300, DEVICE)
    for index in (0, 2, 3, 4, 299):
        assert words[index].tolist() == chacha20_block(key, start + index, 7)


def test_gpu_normals_are_standard_normal_and_consecutive_draws_differ():
    from opu_hal.kernels import triton_chacha

    key = triton_chacha.key_tensor(os.urandom(32), DEVICE)
    z = triton_chacha.standard_normal(key, 0, 0, 200_001).double().cpu().numpy()
    assert z.shape == (200_001,) and np.isfinite(z).all()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.var() - 1) < 0.02
    later = triton_chacha.standard_normal(key, triton_chacha.blocks_for(200_001), 0, 16).cpu().numpy()
    # A shared block would repeat all eight of its values. Two independent float32 normals coincide by
    # chance with probability about 1.9e-8 (the sum over values of P(v)^2, with P(v) about phi(x) |x| 2^-23),
    # so 16 x 200 001 pairs give 0.06 expected coincidences: one failed a run on an H200 (2026-11-28).
    # Three or more has probability below 1e-4.
    assert np.isin(later, z).sum() <= 2


@CUDA_ONLY
def test_secure_generator_draws_privacy_normals_on_the_gpu_and_checkpoints_replay_them():
    from opu_hal.randomness.secure_random import CUDA_GENERATOR_NAME, SecureGenerator

    generator = SecureGenerator()
    first = generator.standard_normal(1000, "cuda")
    assert first.device.type == "cuda" and generator.name == CUDA_GENERATOR_NAME
    state = generator.secret_state()
    after = generator.standard_normal(1000, "cuda")
    assert torch.equal(SecureGenerator.from_secret_state(state).standard_normal(1000, "cuda"), after)
    assert not torch.equal(SecureGenerator().standard_normal(1000, "cuda"), first)  # fresh OS-entropy keys


# -- the camera frame ----------------------------------------------------------------------------
def _read(signal, shape, dark=0.0, seed=0, **overrides):
    from opu_hal.kernels import triton_camera

    settings = dict(full_well_e=1e9, read_noise_e=0.0, gain_e_per_dn=1.0, black_level_dn=0, max_dn=2**40)
    settings.update(overrides)
    generator = torch.Generator(DEVICE).manual_seed(seed)
    out, clipped = triton_camera.camera_read(signal, shape, dark, generator, DEVICE, **settings)
    return out.cpu(), int(clipped)


@pytest.mark.parametrize("rate", [0.3, 3.0, 9.99, 10.0, 37.2, 600.0, 1e5])
def test_fused_counts_follow_the_poisson_pmf(rate):
    n = 200_000 if torch.cuda.is_available() else 20_000
    draws, clipped = _read(torch.full((n,), rate, device=DEVICE), (n,))
    assert clipped == 0
    assert_follows_poisson_pmf(draws.numpy(), rate)


def test_a_flat_field_with_a_dark_map_has_per_pixel_poisson_means():
    dark = torch.linspace(0.05, 4.0, 64, device=DEVICE)
    frame, _ = _read(150.0, (4000, 64), dark=dark)
    # dark-subtracted electrons: each pixel's mean is the flat signal, its variance signal + dark
    assert torch.allclose(
        frame.double().mean(0), torch.full((64,), 150.0, dtype=torch.float64), atol=5 * (154 / 4000) ** 0.5
    )
    variance = frame.double().var(0)
    assert torch.allclose(variance, 150.0 + dark.cpu().double(), rtol=0.1)


def test_fused_digitization_matches_the_eager_sensor():
    """Full well, read noise, gain and ADC range: the kernel against ``Sensor._digitize``."""
    from opu_hal.backends.simulated.camera import Sensor
    from opu_hal.kernels.poisson import poisson

    sensor = Sensor(
        temperature_c=25.0,
        exposure_us=400.0,
        pixel_pitch_um=5.0,
        dark_fom_na_per_cm2=0.0,
        read_noise_e=6.0,
        gain_e_per_dn=2.0,
        adc_bits=8,
        black_level_dn=10,
        full_well_e=470.0,
    )
    n = 100_000 if torch.cuda.is_available() else 20_000
    rates = torch.full((n,), 420.0, device=DEVICE)
    fused, fused_clipped = _read(
        rates,
        (n,),
        full_well_e=sensor.full_well_e,
        read_noise_e=6.0,
        gain_e_per_dn=2.0,
        black_level_dn=10,
        max_dn=sensor.max_dn,
    )
    cpu = torch.Generator().manual_seed(1)
    eager, eager_clipped = sensor._digitize(poisson(rates.cpu(), cpu), cpu)
    assert stats.ks_2samp(fused.numpy(), eager.numpy()).pvalue > 1e-3
    assert fused_clipped == pytest.approx(eager_clipped, rel=0.15, abs=50)
    assert set(np.unique(fused.numpy() % 2)) <= {0.0}  # whole DN steps of 2 electrons (dark 0)


def test_the_same_camera_seed_replays_the_same_frame():
    rates = torch.linspace(0, 300, 5000, device=DEVICE)
    assert torch.equal(_read(rates, (5000,), seed=4)[0], _read(rates, (5000,), seed=4)[0])
    assert not torch.equal(_read(rates, (5000,), seed=4)[0], _read(rates, (5000,), seed=5)[0])


# -- the linear read in one kernel ---------------------------------------------------------------
@pytest.mark.parametrize("dark", ["map", "scalar"])
def test_the_one_kernel_linear_read_gives_the_three_separate_reads(dark):
    """Same keys, counters and digitization as three :func:`camera_read` calls: the same difference,
    clipped count and mean (bit for bit in the interpreter; on a GPU the compiler may fuse the
    intensities' multiply-adds, moving a mean by a float32 bit and, rarely, a count)."""
    from opu_hal.kernels import triton_camera, triton_linear

    rows, columns, anchor_e = 40, 96, 900.0
    fields = torch.Generator().manual_seed(3)
    real, imag = (20 * torch.randn(rows, columns, generator=fields) for _ in range(2))
    theta = 2 * torch.pi * torch.rand(columns, generator=fields)
    real, imag, cos, sin = (t.to(DEVICE) for t in (real, imag, theta.cos(), theta.sin()))
    dark_e = torch.linspace(0.1, 6.0, columns, device=DEVICE) if dark == "map" else 2.5
    adc = dict(full_well_e=2500.0, read_noise_e=3.0, gain_e_per_dn=1.5, black_level_dn=8, max_dn=2047)
    fused, fused_clipped, fused_mean = triton_linear.linear_frames(
        real, imag, cos, sin, anchor_e, dark_e, torch.Generator(DEVICE).manual_seed(9), **adc
    )
    generator = torch.Generator(DEVICE).manual_seed(9)
    amplitude = anchor_e**0.5
    signal = real**2 + imag**2
    with_anchor = (real + amplitude * cos) ** 2 + (imag + amplitude * sin) ** 2
    frames = [
        triton_camera.camera_read(rate, (rows, columns), dark_e, generator, DEVICE, **adc)
        for rate in (signal, with_anchor, anchor_e)
    ]
    (e2, c2), (e1, c1), (e3, c3) = frames
    separate = (e1 - e2 - e3).cpu()
    differing = (fused.cpu() != separate).float().mean().item()
    assert differing <= (0.0 if INTERPRETED else 2e-3)
    assert fused_clipped == int(c1 + c2 + c3) > 0  # the full well clips some bright anchor reads
    assert fused_mean == pytest.approx(float(with_anchor.double().mean() + signal.double().mean()), rel=1e-6)
