"""Digitized speckle counts: one kept pixel per value, accounted per bin of kept means over the calibration's
box, with no unity-gain assumption; drawn at each pixel's true mean (opu_hal.privacy.digitized_bins)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import opu_hal
from opu_hal.backends.simulated.speckle_privacy import sensor_ceiling_e
from opu_hal.calibration.anchor_map import calibrate_anchor_map
from opu_hal.calibration.calibrated import load_calibrated_noise
from opu_hal.calibration.run import calibrate_device
from opu_hal.calibration.schema import write_calibration
from opu_hal.contract.anchor_map import AnchorBoundMap
from opu_hal.contract.errors import CalibrationError, DeviceUnavailable
from opu_hal.contract.noise import DigitizedReadLaw
from opu_hal.contract.speckle_bins import best_threshold, select_binned
from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.digitized_events import DigitizedNoiseEvent, digitized_coefficients
from opu_hal.privacy.events import event_from_dict
from opu_hal.privacy.pmf_rdp import AccountedPMF
from opu_hal.profiles.catalogue import validate_profile
from opu_hal.randomness.secure_random import SecureGenerator
from tests.test_speckle_anchor import SMALL
from trainers.methods.dfa_noise import check_noise_device


def speckle_camera(**changes):
    return opu_hal.load_device(validate_profile({**SMALL, **changes}, "speckle.toml"))


@pytest.fixture(scope="module")
def hidden_1004(tmp_path_factory):
    """A speckle camera at a true 1.004 e-/DN, calibrated (gain interval, per-pixel anchor map)."""
    device = speckle_camera(gain_e_per_dn=1.004)
    calibration = calibrate_device(device, [25.0], [400.0], [100_000.0], frames=16, bootstrap=100)
    path = tmp_path_factory.mktemp("cal") / "cal.json"
    write_calibration(calibration, path)
    calibrate_anchor_map(device, calibration, path, frames=16)
    return device.profile, load_calibrated_noise(path, device.profile)


def test_a_1004_speckle_camera_is_refused_by_skellam_and_accounted_by_the_digitized_route(hidden_1004):
    profile, noise = hidden_1004
    gain = noise.calibration.gain_e_per_dn
    assert gain.lower <= 1.004 <= gain.upper and not noise.proves_unity_gain()
    device = opu_hal.load_device(profile)
    device.attach_calibration(noise)
    assert not device.capabilities.privacy_noise and device.capabilities.digitized_noise
    assert check_noise_device(device) == "digitized"
    with pytest.raises(CalibrationError, match="does not prove unity gain"):
        device.draw_privacy_counts(10, 1000.0)
    law = device.digitized_read_law()
    assert (law.gain_e_per_dn, law.high("gain_e_per_dn")) == (gain.lower, gain.upper)
    assert law.kept_pixels is not None and len(law.mean_bins) >= 1
    bounds = noise.anchor_map(25.0, 400.0)
    truth = device.anchor_means_e()
    kept = select_binned(bounds, noise.clip_ceiling_e()).kept
    assert kept.size == law.kept_pixels
    assert law.mean_e[0] <= truth[kept].min() and truth[kept].max() <= law.mean_e[1]
    draw = device.draw_digitized_counts(5000, 2)
    assert draw.distribution.kind == "digitized-reads" and draw.distribution.reads_per_value == 2


def binned_map(pixels: int = 4000, seed: int = 0) -> tuple[AnchorBoundMap, np.ndarray]:
    """Exponential speckle means with 2 % bounds either side; returns the map and the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.exponential(120.0, pixels) + 1.0
    return AnchorBoundMap(truth * 0.98, truth * 1.02, truth, 0.99, 16, "test map"), truth


def eight_bit_law(bins: tuple[tuple[float, float], ...]) -> DigitizedReadLaw:
    lows, highs = [lo for lo, _ in bins], [hi for _, hi in bins]
    return DigitizedReadLaw(
        mean_e=(min(lows), max(highs)),
        read_noise_e=(2.0, 2.4),
        gain_e_per_dn=3.9,
        adc_bits=8,
        black_level_dn=9.8,
        full_well_e=900.0,
        source="test",
        gain_e_per_dn_high=4.1,
        black_level_dn_high=10.2,
        mean_bins=bins,
        kept_pixels=100,
    )


def event_of(law: DigitizedReadLaw, reads: int = 1, k: float = 2.0) -> DigitizedNoiseEvent:
    return DigitizedNoiseEvent(
        law.mean_e[0],
        law.read_noise_e[0],
        law.gain_e_per_dn,
        law.adc_bits,
        law.black_level_dn,
        law.full_well_e,
        reads,
        k,
        10,
        mean_e_high=law.mean_e[1],
        read_noise_e_high=law.read_noise_e[1],
        gain_e_per_dn_high=law.gain_e_per_dn_high,
        black_level_dn_high=law.black_level_dn_high,
        mean_bins=law.mean_bins,
    )


ORDERS = np.arange(2, 33, dtype=np.float64)
BINS = ((60.0, 95.0), (90.0, 140.0))


def test_the_charged_curve_is_the_pointwise_maximum_of_the_bins_curves():
    both = event_of(eight_bit_law(BINS)).base_rdp(ORDERS)
    each = [event_of(eight_bit_law((b,))).base_rdp(ORDERS) for b in BINS]
    assert np.array_equal(both, np.maximum(*each))
    assert not np.array_equal(each[0], each[1])  # the bins differ: neither alone is the charge


def test_exact_divergences_inside_every_bins_box_never_exceed_the_charged_curve():
    """An attack: cameras at kept pixels' true means and at random interior points of each bin's box (mean,
    read noise, gain, black level), and their exact Renyi divergences at integer shifts, against the charge."""
    bounds, truth = binned_map()
    selection = select_binned(bounds, 200.0, threshold_e=60.0)
    event = event_of(eight_bit_law(selection.bins), k=2.0)
    charged = event.base_rdp(ORDERS) / event.l2_sensitivity**2  # kappa_alpha charged
    rng = np.random.default_rng(3)
    pixels = rng.choice(selection.kept, 3, replace=False)
    points = [(float(truth[p]), 2.2, 4.0, 10.0) for p in pixels]  # the kept pixels' truth, a camera inside the box
    for mean_low, mean_high in selection.bins:
        draws = rng.uniform((mean_low, 2.0, 3.9, 9.8), (mean_high, 2.4, 4.1, 10.2), (2, 4))
        points += [tuple(float(x) for x in row) for row in draws]
    for mean, noise, gain, black in points:
        camera = CameraRead(mean, noise, gain, 8, black, 900.0)
        kappa, tau = digitized_coefficients(camera, 1, 2)
        assert np.all(kappa[2:33] <= charged * (1 + 1e-9)) and tau < 1e-30
        model = AccountedPMF(difference_pmf(camera, 1), 2)
        for shift in (1, 2):
            divergence = model.shift_log_moments(ORDERS, shift) / (ORDERS - 1)
            assert np.all(divergence <= shift**2 * charged * (1 + 1e-9))


def test_an_event_with_bins_survives_the_ledger():
    event = event_of(eight_bit_law(BINS))
    restored = event_from_dict(__import__("json").loads(__import__("json").dumps(event.to_dict())))
    assert restored == event and hash(restored) == hash(event)


def test_frames_are_two_reads_per_pass_over_the_kept_pixels():
    bounds, _ = binned_map()
    selection = select_binned(bounds, 1e9, threshold_e=100.0)
    law = dataclasses.replace(eight_bit_law(selection.bins), kept_pixels=selection.kept_pixels)
    kept = selection.kept_pixels
    assert law.frames(kept, 3) == 6 and law.frames(kept + 1, 3) == 12 and law.frames(2 * kept, 1) == 4
    pixels = selection.value_pixels(2 * kept + 5)
    assert np.array_equal(pixels[:kept], selection.kept) and np.array_equal(pixels[kept : 2 * kept], selection.kept)


def test_kept_pixels_clear_the_threshold_and_bins_hold_their_bounds():
    bounds, _ = binned_map()
    selection = select_binned(bounds, 400.0, threshold_e=50.0, ratio=2.0)
    lower, upper = bounds.lower_e[selection.kept], bounds.upper_e[selection.kept]
    assert lower.min() >= 50.0 and upper.max() <= 400.0
    assert len(selection.bins) == 3  # [50, 100), [100, 200), [200, ...) on the lower bounds
    for value_low, value_high in zip(lower, upper, strict=True):
        assert any(lo <= value_low and value_high <= hi for lo, hi in selection.bins)
    with pytest.raises(ValueError, match="bin ratio"):
        select_binned(bounds, 400.0, ratio=1.0)


def test_the_threshold_for_a_draw_size_is_the_brightest_within_5_percent_of_the_best_per_pass():
    bounds, _ = binned_map()
    values, lower = 3000, np.sort(bounds.lower_e)[::-1]
    per_pass = {m: lower[math.ceil(values / m) - 1] for m in range(1, 65)}  # m passes keep ceil(values / m) pixels
    best = max(t / m for m, t in per_pass.items())
    chosen = best_threshold(bounds, 1e9, values)
    assert chosen == max(t for m, t in per_pass.items() if t / m >= 0.95 * best)
    assert best_threshold(bounds, 1e9) == max(lower * np.arange(1, lower.size + 1)) / (
        int(np.argmax(lower * np.arange(1, lower.size + 1))) + 1
    )


def test_draws_are_made_at_each_pixels_true_mean():
    """K's second moment per value follows its own pixel's mean (2 reads of variance lambda / g^2 + ...),
    not the dimmest kept pixel's."""
    device = speckle_camera(gain_e_per_dn=2.0, read_noise_e=3.0)
    draw = device.draw_digitized_counts(60_000, 1)
    law = device.digitized_read_law()
    bounds = device.speckle.uncalibrated_bounds(device.anchor_means_e())
    selection = device.speckle.binned_selection(bounds, sensor_ceiling_e(device.sensor))  # the draw's, cached
    lam = device.anchor_means_e()[selection.value_pixels(60_000)]
    predicted = 2 * (lam + 9.0) / 4.0 + 2 / 12
    squares = draw.counts.double().numpy() ** 2
    bright = lam > np.median(lam)
    for part in (bright, ~bright):  # each half's mean square matches its own pixels' means
        assert squares[part].mean() == pytest.approx(predicted[part].mean(), rel=0.03)
    assert squares[bright].mean() > 1.1 * squares[~bright].mean()
    record = draw.distribution
    assert record.mean_bins == len(law.mean_bins) and record.reads_per_value == 1
    assert record.kept_pixels == law.kept_pixels and record.frames == law.frames(60_000, 1)
    assert record.camera_seconds == pytest.approx(record.frames * law.frame_time_s)
    assert record.anchor_checks == 1 and record.poisson_mean_lower <= lam.min()


def test_a_bound_above_a_kept_pixels_true_mean_is_refused():
    from opu_hal.backends.simulated.speckle_digitized import draw_speckle_digitized, speckle_law

    device = speckle_camera()
    truth = device.anchor_means_e()
    lower = truth * 0.99
    ceiling = sensor_ceiling_e(device.sensor)
    selection = select_binned(AnchorBoundMap(lower, truth * 1.01, truth, 0.99, 16, "t"), ceiling)
    lower[selection.kept[0]] = truth[selection.kept[0]] * 1.001  # one kept pixel's bound above its truth
    bounds = AnchorBoundMap(lower, truth * 1.01, truth, 0.99, 16, "inflated")
    law = speckle_law(device.sensor, selection, None, "t", "inflated", 1e-3)
    args = (device.speckle, SecureGenerator(), device.sensor, bounds, selection, law, truth, 100, 1)
    with pytest.raises(DeviceUnavailable, match="1 kept pixel"):
        draw_speckle_digitized(*args, device._camera_generator)


@pytest.mark.parametrize("reads", [1, 2, 3])
def test_the_compiled_adc_gives_numpys_count_differences_with_ties_and_both_clips(reads):
    from types import SimpleNamespace

    from opu_hal.backends.simulated.speckle_digitized import numpy_differences
    from opu_hal.kernels.compiled.digitized_reads import count_differences

    rng = np.random.default_rng(reads)
    for full_well, noise, gain, black, top in ((1.0e4, 6.0, 12.0, 10.0, 255), (3.0e3, 2.5, 0.7, 100.0, 4095)):
        sensor = SimpleNamespace(
            full_well_e=full_well, read_noise_e=noise, gain_e_per_dn=gain, black_level_dn=black, max_dn=top
        )
        electrons = rng.poisson(rng.uniform(0.0, 1.2 * full_well, 2 * reads * 20_001)).astype(np.int64)
        normals = rng.standard_normal(electrons.size).astype(np.float32)
        electrons[:40], normals[:40] = np.arange(40), np.float32(0.0)  # reads at k / gain: halves to round
        normals[40:60] = np.float32(-1e3)  # below the ADC's 0
        out = np.empty(20_001, np.int64)
        count_differences(electrons, normals, reads, full_well, noise, gain, black, float(top), out)
        expected = numpy_differences(electrons, normals, reads, sensor)
        assert np.array_equal(out, expected) and (np.abs(expected) > 0).any()
