"""Digitized-read device noise end to end (issue 36): the 8-bit 4 e-/DN profile as a privacy-noise
source, DP-DFA through it, and the attacks the Skellam mechanism gets (replay, likelihood ratio,
saturation), plus the calibrated box's worst-end check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import opu_hal
from opu_hal import DeviceUnavailable
from opu_hal.contract.noise import DigitizedReadLaw
from opu_hal.privacy import Accountant
from opu_hal.privacy.digitized import CameraRead, difference_pmf
from opu_hal.privacy.digitized_box import box_cameras
from opu_hal.privacy.digitized_events import DigitizedNoiseEvent, digitized_coefficients
from opu_hal.privacy.digitized_lattice import DigitizedLattice, low_camera
from opu_hal.privacy.mechanisms import DigitizedRelease
from opu_hal.privacy.skellam import SkellamLattice
from opu_hal.profiles import load_profile
from tests.test_privacy_attacks import empirical_epsilon

DELTA = 1e-5
TRIALS = 20_000


def point_event(law: DigitizedReadLaw, reads: int, shift: float) -> DigitizedNoiseEvent:
    c = low_camera(law)
    return DigitizedNoiseEvent(
        c.mean_e, c.read_noise_e, c.gain_e_per_dn, c.adc_bits, c.black_level_dn, c.full_well_e, reads, shift, 1
    )


def claimed(event) -> float:
    accountant = Accountant("replace_one")
    accountant.step(event)
    return accountant.get_epsilon(DELTA)


def test_8bit_profile_is_a_digitized_source_and_refuses_the_skellam_route() -> None:
    device = opu_hal.load_device("opu-sim-8bit")
    assert device.capabilities.digitized_noise and not device.capabilities.privacy_noise
    with pytest.raises(DeviceUnavailable, match="gain_e_per_dn = 1"):
        device.draw_privacy_counts(10, 100.0)
    law = device.digitized_read_law()
    assert law.mean_e == (device.anchor_read_e, device.anchor_read_e) and law.gain_e_per_dn == 4.0


def test_a_profile_without_digitized_noise_refuses_the_draw() -> None:
    device = opu_hal.load_device("torch-cpu")
    assert not device.capabilities.digitized_noise
    with pytest.raises(DeviceUnavailable, match="digitized"):
        device.draw_digitized_counts(10, 1)


# -- replay ----------------------------------------------------------------------------------------
def test_two_devices_from_one_profile_draw_different_digitized_counts() -> None:
    first = opu_hal.load_device("opu-sim-8bit").draw_digitized_counts(2000, 2).counts
    second = opu_hal.load_device("opu-sim-8bit").draw_digitized_counts(2000, 2).counts
    assert not torch.equal(first, second)


def test_digitized_counts_are_not_the_profile_seeded_camera_stream() -> None:
    """Counts rebuilt from the profile's seeds (its camera generator, seeds 0..3) never match."""
    device = opu_hal.load_device("opu-sim-8bit")
    counts = device.draw_digitized_counts(512, 1).counts.numpy()
    for seed in range(4):
        rng = np.random.default_rng(seed)
        torch_rng = torch.Generator().manual_seed(seed)
        for rebuilt in (
            rng.poisson(device.anchor_read_e, 512) - rng.poisson(device.anchor_read_e, 512),
            torch.poisson(torch.full((512,), device.anchor_read_e), torch_rng).numpy(),
        ):
            assert np.mean(np.rint(rebuilt / 4) == counts) < 0.2  # chance level of two wide laws


def test_two_dp_dfa_runs_with_the_same_public_settings_release_different_noise() -> None:
    from tests.training_helpers import clusters
    from trainers.run.config import TrainConfig
    from trainers.run.loop import train

    config = TrainConfig.for_method(
        "dp-dfa",
        epochs=1,
        batch_size=50,
        hidden=(16,),
        alignment=False,
        noise_source="device",
        profile="opu-sim-8bit",
        noise_multiplier=1.0,
    )
    runs = [train(config, data=clusters(), progress=False, log=lambda m: None) for _ in range(2)]
    assert runs[0]["epochs"][0]["validation_loss"] != runs[1]["epochs"][0]["validation_loss"]
    privacy = runs[0]["privacy"]
    assert privacy["mechanism"] == "digitized"
    reads = privacy["lattice"]["reads_per_count_accounted"]
    assert privacy["device_noise"]["reads_per_value"] == reads  # the noise accounted is the noise applied
    kinds = {entry["event"]["kind"] for entry in privacy["ledger"]["entries"]}
    assert kinds == {"fixed_size_digitized_noise"}


# -- likelihood ratio, 1-D, through DigitizedRelease -----------------------------------------------
def release_1d(reads: int, k: float = 2.0) -> DigitizedRelease:
    device = opu_hal.load_device("opu-sim-8bit")
    lattice = DigitizedLattice(SkellamLattice(1, 1.0, k, "per-coordinate"), device.digitized_read_law())
    return DigitizedRelease(device, lattice, reads)


def scores(mechanism: DigitizedRelease, accounted_reads: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact LLR of ``R(k) + K`` vs ``R(0) + K`` (``k`` an integer: no rounding) under the accounted law."""
    gamma, k = mechanism.lattice.lattice.gamma, int(mechanism.lattice.lattice.resolution)
    noise = difference_pmf(low_camera(mechanism.lattice.law), accounted_reads)

    def log_law(n: np.ndarray) -> np.ndarray:
        index = n - noise.offset
        ok = (index >= 0) & (index < len(noise.pmf))
        out = np.full(n.shape, -np.inf)
        out[ok] = np.log(np.maximum(noise.pmf[index[ok]], 1e-300))
        return out

    def llr(y: torch.Tensor) -> np.ndarray:
        n = np.rint(y.numpy() * gamma).astype(np.int64)
        return np.clip(log_law(n - k) - log_law(n), -50, 50)

    zero = torch.zeros(TRIALS, dtype=torch.float64)
    return llr(mechanism.release(zero)), llr(mechanism.release(zero + 1.0))


def test_likelihood_ratio_test_stays_within_the_digitized_claim() -> None:
    mechanism = release_1d(reads=1)
    claim = claimed(point_event(mechanism.lattice.law, 1, 2.0))
    s0, s1 = scores(mechanism, 1)
    found = empirical_epsilon(s0, s1, DELTA)
    assert 0 < found <= claim


def test_likelihood_ratio_test_catches_reads_claimed_but_not_applied() -> None:
    """Apply one read per count, claim 64: the test finds more leakage than the claim."""
    mechanism = release_1d(reads=1)
    claim = claimed(point_event(mechanism.lattice.law, 64, 2.0))
    s0, s1 = scores(mechanism, 1)
    assert empirical_epsilon(s0, s1, DELTA) > claim


# -- saturation through the device -----------------------------------------------------------------
def device_with(**keys):
    return opu_hal.load_device(load_profile("opu-sim-8bit").model_copy(update=keys))


def test_a_saturating_anchor_is_accounted_and_the_attack_stays_within_it() -> None:
    """An anchor read at the ADC top (~985 e-, half the reads clip): both counts clipped make an atom at
    ``K = 0``. The accountant charges it (a larger epsilon than the unsaturated profile's), and the
    likelihood-ratio test through the coded path stays within that claim."""
    device = device_with(anchor_power_uw=3.4)
    counts = device.draw_digitized_counts(50_000, 1).counts.numpy()
    assert np.mean(counts == 0) > 3 * np.mean(counts == 1)  # the clip atom
    law = device.digitized_read_law()
    claim = claimed(point_event(law, 1, 2.0))
    assert claim > claimed(point_event(opu_hal.load_device("opu-sim-8bit").digitized_read_law(), 1, 2.0))
    lattice = DigitizedLattice(SkellamLattice(1, 1.0, 2.0, "per-coordinate"), law)
    s0, s1 = scores(DigitizedRelease(device, lattice, 1), 1)
    assert empirical_epsilon(s0, s1, DELTA) <= claim


def test_a_camera_clipping_at_both_ends_is_refused_by_the_numbers() -> None:
    """6 bits, 200 e- of read noise at 8 e-/DN: both clip atoms are likely, a shift puts mass where the
    other law has none; the accountant gives no finite epsilon and no reads plan."""
    from opu_hal.privacy.digitized_lattice import fewest_box_reads

    device = device_with(adc_bits=6, black_level_dn=4, gain_e_per_dn=8.0, read_noise_e=200.0, anchor_power_uw=0.78)
    law = device.digitized_read_law()
    counts = device.draw_digitized_counts(20_000, 1).counts.numpy()
    assert np.mean(np.abs(counts) == 2**law.adc_bits - 1) > 10 * DELTA  # the atoms at the edge of K's support
    assert claimed(point_event(law, 1, 1.0)) == math.inf
    lattice = DigitizedLattice(SkellamLattice(10, 1.0, 2.0, "per-coordinate"), law, max_reads=8)
    assert fewest_box_reads(lattice, 1000, 100, 10, 8.0, DELTA) is None


# -- the calibrated box: a worst-end check over a grid -----------------------------------------------
BOX_LOW = CameraRead(490.0, 5.5, 4.0, 8, 10, 10000.0)


def test_the_box_grid_holds_its_corners_and_collapses_to_a_point() -> None:
    grid = box_cameras(BOX_LOW, 950.0, 7.0, 3)
    corners = {(m, r) for m in (490.0, 950.0) for r in (5.5, 7.0)}
    assert corners <= {(c.mean_e, c.read_noise_e) for c in grid} and len(grid) == 9
    assert box_cameras(BOX_LOW, 490.0, 5.5, 3) == (BOX_LOW,)


def test_the_low_end_is_not_the_worst_so_the_box_event_takes_the_largest_curve() -> None:
    """Near the ADC top a brighter read is worse (more mass in the clip atom): lower ends are not safe."""
    reads, shift, orders = 1, 2, np.arange(2, 33)
    low, _ = digitized_coefficients(BOX_LOW, reads, shift)
    high_camera = CameraRead(950.0, 7.0, 4.0, 8, 10, 10000.0)
    high, _ = digitized_coefficients(high_camera, reads, shift)
    assert np.all(high[orders] > low[orders])
    boxed = DigitizedNoiseEvent(
        490.0, 5.5, 4.0, 8, 10, 10000.0, reads, float(shift), 1, mean_e_high=950.0, read_noise_e_high=7.0
    )
    curve = boxed.base_rdp(orders.astype(float))
    for camera in boxed.cameras:
        kappa, _ = digitized_coefficients(camera, reads, shift)
        assert np.all(curve >= shift**2 * kappa[orders] * (1 - 1e-12))
    assert np.allclose(curve, shift**2 * high[orders]) or np.all(curve >= shift**2 * high[orders])
