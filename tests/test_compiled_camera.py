"""The compiled CPU camera (opu_hal.kernels.compiled): Philox, exact Poisson counts, ziggurat normals, the ADC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

numba = pytest.importorskip("numba", reason="Numba is not installed: the compiled camera is not used here")
from numba import njit  # noqa: E402

from opu_hal.backends.simulated.camera import Sensor  # noqa: E402
from opu_hal.kernels.compiled.camera import camera_read, camera_read_flat, digitize  # noqa: E402
from opu_hal.kernels.compiled.normal import ZIGGURAT_R, ZIGGURAT_V, standard_normals, ziggurat_tables  # noqa: E402
from opu_hal.kernels.compiled.philox import philox4x32  # noqa: E402
from opu_hal.kernels.compiled.poisson import LOG_FACTORIALS, flat_counts, poisson_counts, sequential_counts  # noqa: E402

KEY = (np.uint32(0x12345678), np.uint32(0x9ABCDEF0))


@njit
def _philox(k0, k1, c0, c1, c2, c3):
    return philox4x32(k0, k1, c0, c1, c2, c3)


@pytest.mark.parametrize(
    "key, counter, expected",
    [
        # Random123's known-answer vectors for philox4x32_10 (kat_vectors)
        ((0, 0), (0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF,) * 4, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0xA4093822, 0x299F31D0),
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ],
)
def test_philox_matches_random123_known_answers(key, counter, expected):
    words = _philox(*(np.uint32(k) for k in key), *(np.uint32(c) for c in counter))
    assert tuple(int(w) for w in words) == expected


RATE_SETS = {
    "speckle, mean 100": lambda g: torch.empty(60_000).exponential_(1 / 100, generator=g),
    "speckle, mean 8": lambda g: torch.empty(60_000).exponential_(1 / 8, generator=g),
    "zero, tiny, below and at 10": lambda g: torch.tensor([0.0, 1e-12, 1e-3, 0.5, 9.999, 10.0, 10.001] * 2000),
    "near the log k! table's end": lambda g: torch.linspace(3.2e4, 3.4e4, 5000),
    "bright": lambda g: torch.linspace(1e5, 1e6, 2000),
}


@pytest.mark.parametrize("name", RATE_SETS)
def test_passes_give_each_pixel_the_sequential_algorithms_count(name):
    rates = RATE_SETS[name](torch.Generator().manual_seed(1)).double().numpy()
    passes = poisson_counts(rates, *KEY)
    reference = sequential_counts(rates, *KEY, np.empty_like(rates))
    assert np.array_equal(passes, reference)


def test_table_end_sends_proposals_beyond_it_to_the_one_pixel_path():
    rates = np.full(5000, LOG_FACTORIALS.shape[0] - 10.0)
    counts = poisson_counts(rates, *KEY)
    assert (counts >= LOG_FACTORIALS.shape[0]).mean() > 0.3  # the undecided path ran


def _chi_square_p(counts: np.ndarray, distribution) -> float:
    """Goodness of fit of integer draws to a frozen scipy ``distribution``, the tails beyond the
    draws joined to the end bins, bins pooled to expected counts >= 20."""
    values, observed = np.unique(counts.astype(np.int64), return_counts=True)
    support = np.arange(values.min(), values.max() + 1)
    observed_full = np.zeros(support.shape[0])
    observed_full[values - values.min()] = observed
    expected = distribution.pmf(support) * counts.shape[0]
    expected[0] += distribution.cdf(support[0] - 1) * counts.shape[0]
    expected[-1] += distribution.sf(support[-1]) * counts.shape[0]
    obs_bins, exp_bins, o, e = [], [], 0.0, 0.0
    for observed_k, expected_k in zip(observed_full, expected):
        o, e = o + observed_k, e + expected_k
        if e >= 20:
            obs_bins.append(o)
            exp_bins.append(e)
            o = e = 0.0
    obs_bins[-1] += o
    exp_bins[-1] += e
    obs_bins, exp_bins = np.array(obs_bins), np.array(exp_bins)
    statistic = ((obs_bins - exp_bins) ** 2 / exp_bins).sum()
    return float(stats.chi2.sf(statistic, len(obs_bins) - 1))


@pytest.mark.parametrize("rate", [0.3, 4.2, 9.99, 10.0, 57.3, 250.0, 4000.0])
def test_counts_are_poisson_by_chi_square(rate):
    counts = poisson_counts(np.full(200_000, rate), np.uint32(7), np.uint32(rate * 1000))
    assert _chi_square_p(counts, stats.poisson(rate)) > 1e-4


def test_chi_square_check_rejects_a_two_percent_mean_error():
    counts = poisson_counts(np.full(200_000, 255.0), np.uint32(7), np.uint32(1))
    assert _chi_square_p(counts, stats.poisson(250.0)) < 1e-6


@pytest.mark.parametrize("rate, dark", [(202.7, 0.03), (202.7, 4.0), (0.0, 0.5), (35.0, 9.5)])
def test_flat_field_counts_are_poisson_of_signal_plus_dark(rate, dark):
    columns = np.array([dark, dark])
    counts = flat_counts(rate, columns, 100_000, np.uint32(3), np.uint32(int(dark * 100)))
    assert _chi_square_p(counts, stats.poisson(rate + dark)) > 1e-4


def test_ziggurat_layers_have_equal_areas():
    _k, w, f = ziggurat_tables()
    x = w * 2.0**52  # layer widths
    areas = x[1:] * (np.r_[1.0, f[1:-1]] - f[1:])  # rectangle i spans f(x_i) .. f(x_{i-1})
    assert np.allclose(areas[1:], ZIGGURAT_V, rtol=1e-9)
    tail = math.sqrt(math.pi / 2) * math.erfc(ZIGGURAT_R / math.sqrt(2))
    assert x[0] * f[-1] == pytest.approx(ZIGGURAT_R * f[-1] + tail, rel=1e-9)  # base strip + tail
    assert x[0] * f[-1] == pytest.approx(ZIGGURAT_V, rel=1e-9)


def test_normals_are_standard_normal_including_the_tail():
    z = standard_normals(2_000_000, np.uint32(11), np.uint32(12))
    assert stats.kstest(z, "norm").pvalue > 1e-4
    beyond = (np.abs(z) > ZIGGURAT_R).sum()
    expected = 2 * stats.norm.sf(ZIGGURAT_R) * z.shape[0]
    assert abs(beyond - expected) < 5 * math.sqrt(expected)
    assert abs(stats.kurtosis(z)) < 0.02


def test_normals_depend_on_key_and_index_only():
    long = standard_normals(10_000, *KEY)
    assert np.array_equal(standard_normals(1000, *KEY), long[:1000])
    assert not np.array_equal(standard_normals(1000, np.uint32(1), KEY[1]), long[:1000])


def _sensor(**changes) -> Sensor:
    base = dict(
        temperature_c=25.0,
        exposure_us=400.0,
        pixel_pitch_um=5.5,
        dark_fom_na_per_cm2=0.043,
        read_noise_e=6.0,
        gain_e_per_dn=20.0,
        adc_bits=8,
        black_level_dn=10,
        full_well_e=4000.0,
    )
    return Sensor(**{**base, **changes})


def test_digitize_equals_the_eager_sensor_digitization():
    sensor = _sensor()
    g = torch.Generator().manual_seed(5)
    counts = torch.poisson(torch.linspace(0, 6000, 40 * 512).view(40, 512), generator=g)
    state = g.get_state()
    eager, eager_clipped = sensor._digitize(counts, g)
    normals = torch.randn(counts.shape, generator=torch.Generator().set_state(state))
    out = np.empty(counts.numel(), dtype=np.float32)
    clipped = digitize(
        counts.double().reshape(-1).numpy(),
        normals.double().reshape(-1).numpy(),
        np.full(512, sensor.dark_e, dtype=np.float32),
        sensor.full_well_e,
        sensor.read_noise_e,
        sensor.gain_e_per_dn,
        float(sensor.black_level_dn),
        float(sensor.max_dn),
        out,
    )
    assert torch.equal(torch.from_numpy(out).view(40, 512), eager)
    assert clipped == eager_clipped > 0


def test_frames_are_fixed_by_the_generator_seed():
    sensor = _sensor()
    signal = torch.full((64, 256), 150.0)
    first, _ = sensor.read(signal, torch.Generator().manual_seed(3))
    again, _ = sensor.read(signal, torch.Generator().manual_seed(3))
    other, _ = sensor.read(signal, torch.Generator().manual_seed(4))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_flat_frame_with_hot_dark_pixels_takes_the_per_pixel_path():
    dark = torch.tensor([0.02, 15.0, 0.5, 40.0])
    adc = dict(full_well_e=1e6, read_noise_e=0.0, gain_e_per_dn=1.0, black_level_dn=0, max_dn=2**20)
    frame, _ = camera_read_flat(30.0, (50_000, 4), dark, torch.Generator().manual_seed(0), **adc)
    means = (frame + dark).mean(0)
    assert torch.allclose(means.double(), 30.0 + dark.double(), atol=5 * math.sqrt(70 / 50_000))


def test_camera_read_refuses_a_dark_map_of_the_wrong_width():
    with pytest.raises(ValueError, match="dark map has 3 pixels"):
        camera_read(
            torch.ones(2, 4),
            torch.ones(3),
            torch.Generator(),
            full_well_e=1e4,
            read_noise_e=1.0,
            gain_e_per_dn=1.0,
            black_level_dn=0,
            max_dn=255,
        )


@pytest.mark.parametrize(
    "read_noise_e, temperature_c, field", [(6.0, 25.0, 9.0), (0.0, 25.0, 9.0), (6.0, 85.0, 9.0), (6.0, 25.0, 40.0)]
)
def test_fused_linear_frames_equal_three_separate_reads(read_noise_e, temperature_c, field):
    from opu_hal.camera.pixel_maps import dark_signal_map

    dark_map = dark_signal_map(0, 300, 0.1, 0.01, 20.0)  # DSNU and hot pixels: at 85 C some dark means pass 10
    sensor = _sensor(read_noise_e=read_noise_e, temperature_c=temperature_c, exposure_us=4000.0, dark_map=dark_map)
    g = torch.Generator().manual_seed(2)
    real, imag = field * torch.randn(64, 300, generator=g), field * torch.randn(64, 300, generator=g)
    theta = 2 * math.pi * torch.rand(300, generator=g)
    args = (real, imag, torch.cos(theta), torch.sin(theta), 180.0)
    fused, fused_clipped, fused_mean, _ = sensor.read_linear(*args, torch.Generator().manual_seed(9))
    separate, separate_clipped, separate_mean, _ = sensor.read_linear(
        *args, torch.Generator().manual_seed(9), separate=True
    )
    assert torch.equal(fused, separate)
    assert fused_clipped == separate_clipped
    assert fused_mean == pytest.approx(separate_mean, rel=1e-6)
    if temperature_c == 85.0:
        assert float(sensor.pixel_dark_e.max()) >= 10  # the flat frame's per-pixel path ran
    assert (fused_clipped > 0) == (field > 10)  # a bright field saturates some reads


@pytest.mark.parametrize("temperature_c", [25.0, 85.0])
def test_fused_linear_frames_under_a_speckle_reference_equal_three_separate_reads(temperature_c):
    """Each pixel's anchor frame at its own ``anchor_e s_j``; the mean weighs each pixel by ``1 / s_j``."""
    from opu_hal.camera.pixel_maps import dark_signal_map

    dark_map = dark_signal_map(0, 300, 0.1, 0.01, 20.0)
    sensor = _sensor(read_noise_e=6.0, temperature_c=temperature_c, exposure_us=4000.0, dark_map=dark_map)
    g = torch.Generator().manual_seed(3)
    real, imag = 9.0 * torch.randn(64, 300, generator=g), 9.0 * torch.randn(64, 300, generator=g)
    u_re, u_im = torch.randn(300, generator=g) / math.sqrt(2), torch.randn(300, generator=g) / math.sqrt(2)
    intensity = u_re.double() ** 2 + u_im.double() ** 2
    args = (real, imag, u_re, u_im, 180.0)
    fused = sensor.read_linear(*args, torch.Generator().manual_seed(9), reference_intensity=intensity)
    separate = sensor.read_linear(*args, torch.Generator().manual_seed(9), True, intensity)
    assert torch.equal(fused[0], separate[0]) and fused[1] == separate[1]
    assert fused[3] == pytest.approx(separate[3], rel=1e-5)
    flat = sensor.read_linear(*args, torch.Generator().manual_seed(9))
    assert not torch.equal(fused[0], flat[0])  # the anchor frame is not one mean


def test_exp_neg_is_within_two_ulp_of_libm():
    from opu_hal.kernels.compiled.elementary import EXP_NEG_MAX, exp_neg

    @njit
    def all_exp_neg(values):
        return np.array([exp_neg(v) for v in values])

    values = np.r_[0.0, 1e-300, 1e-12, np.random.default_rng(0).uniform(0, EXP_NEG_MAX, 200_000), EXP_NEG_MAX]
    ours, libm = all_exp_neg(values), np.array([math.exp(-v) for v in values])
    assert np.max(np.abs(ours - libm) / np.spacing(libm)) <= 2


def test_log_positive_is_within_one_ulp_of_libm():
    from opu_hal.kernels.compiled.elementary import log_positive

    @njit
    def all_logs(values):
        return np.array([log_positive(v) for v in values])

    rng = np.random.default_rng(1)
    values = np.r_[
        np.finfo(float).tiny,
        1e-300,
        1e-48,
        0.5,
        1.0,
        1.0 + 2**-52,
        2.0,
        10.0,
        1e300,
        rng.uniform(0, 2, 200_000),
        10 ** rng.uniform(-40, 40, 200_000),
    ]
    ours, libm = all_logs(values), np.log(values)
    assert np.max(np.abs(ours - libm) / np.spacing(np.abs(libm))) <= 1
    assert ours[4] == 0.0


def test_compiled_projections_have_the_eager_paths_distribution(monkeypatch):
    """The same device and input, compiled and eager (``OPU_HAL_NO_NUMBA=1``): the same
    distribution of every output (two-sample KS per output column), different draws."""
    import opu_hal
    from opu_hal.backends.simulated.profile import SimulatedProfile

    profile = SimulatedProfile(backend="simulated", in_features=10, out_features=16, compute="cpu")
    x = torch.tensor([[1, 0, 1, 1, 0, 0, 1, 0, 1, 1]], dtype=torch.float32).expand(20_000, 10)
    compiled = opu_hal.load_device(profile).project(x)
    monkeypatch.setenv("OPU_HAL_NO_NUMBA", "1")
    eager = opu_hal.load_device(profile).project(x)
    assert "Philox" in compiled.noise.distribution.generator
    assert "Philox" not in eager.noise.distribution.generator
    assert not torch.equal(compiled.values, eager.values)
    p_values = [stats.ks_2samp(compiled.values[:, j].numpy(), eager.values[:, j].numpy()).pvalue for j in range(16)]
    assert min(p_values) > 1e-3 / 16
    assert compiled.noise.std == pytest.approx(eager.noise.std, rel=1e-5)
