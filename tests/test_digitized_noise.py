"""The digitized-read noise source (issue 36): its exact PMF, its accountant, and attacks on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats
from scipy.special import logsumexp

from opu_hal.backends.simulated.camera import Sensor
from opu_hal.backends.simulated.privacy_noise import digitized_reads, draw_digitized_counts
from opu_hal.privacy import Accountant
from opu_hal.privacy.digitized import CameraRead, NoisePMF, difference_pmf, read_pmf
from opu_hal.privacy.digitized_events import DigitizedNoiseEvent
from opu_hal.privacy.mechanisms import randomized_round
from opu_hal.privacy.pmf_rdp import pmf_coefficients
from opu_hal.privacy.rounding import rounding_rdp_coefficient
from opu_hal.randomness.secure_random import SecureGenerator

LIGHTON_8BIT = CameraRead(
    mean_e=490.0, read_noise_e=6.0, gain_e_per_dn=4.0, adc_bits=8, black_level_dn=10, full_well_e=10000.0
)
SATURATING = CameraRead(
    mean_e=224.0, read_noise_e=200.0, gain_e_per_dn=8.0, adc_bits=6, black_level_dn=4, full_well_e=1e5
)  # mean 32 DN, sd 25 DN: clips at both ends


def sensor_of(camera: CameraRead) -> Sensor:
    return Sensor(
        temperature_c=20.0,
        exposure_us=100.0,
        pixel_pitch_um=5.0,
        dark_fom_na_per_cm2=0.0,
        read_noise_e=camera.read_noise_e,
        gain_e_per_dn=camera.gain_e_per_dn,
        adc_bits=camera.adc_bits,
        black_level_dn=camera.black_level_dn,
        full_well_e=camera.full_well_e,
    )


def event(camera: CameraRead, reads: int, shift: float) -> DigitizedNoiseEvent:
    return DigitizedNoiseEvent(
        camera.mean_e,
        camera.read_noise_e,
        camera.gain_e_per_dn,
        camera.adc_bits,
        camera.black_level_dn,
        camera.full_well_e,
        reads,
        shift,
        1,
    )


def law(noise: NoisePMF, t: float, support: np.ndarray) -> np.ndarray:
    """Exact law of ``R(t) + K`` on ``support`` (``R`` the unbiased randomized rounding)."""
    base, frac = math.floor(t), t - math.floor(t)
    p = np.zeros(len(support))
    for shift, weight in ((base, 1 - frac), (base + 1, frac)):
        index = support - shift - noise.offset
        ok = (index >= 0) & (index < len(noise.pmf))
        p[ok] += weight * noise.pmf[index[ok]]
    return p


@pytest.mark.parametrize("camera", [LIGHTON_8BIT, SATURATING], ids=["8bit-4e", "saturating"])
def test_read_pmf_matches_monte_carlo_of_the_camera(camera: CameraRead) -> None:
    draws = 400_000
    dn = digitized_reads(SecureGenerator(), sensor_of(camera), camera.mean_e, draws)
    counts = np.bincount(dn, minlength=camera.max_dn + 1)
    pmf = np.zeros(camera.max_dn + 1)
    r = read_pmf(camera)
    pmf[r.offset : r.offset + len(r.pmf)] = r.pmf
    expected = draws * pmf
    big = expected >= 20
    chi2 = float(np.sum((counts[big] - expected[big]) ** 2 / expected[big]))
    assert stats.chi2.sf(chi2, int(big.sum()) - 1) > 1e-4
    assert counts[~big].sum() <= expected[~big].sum() + 6 * math.sqrt(expected[~big].sum() + 1)


def test_difference_pmf_matches_monte_carlo_of_summed_reads() -> None:
    draws, reads = 200_000, 3
    k = draw_digitized_counts(SecureGenerator(), sensor_of(LIGHTON_8BIT), LIGHTON_8BIT.mean_e, draws, reads)
    noise = difference_pmf(LIGHTON_8BIT, reads)
    values = noise.support
    assert abs(noise.pmf.sum() - 1) < 1e-9
    assert abs(np.sum(noise.pmf * values**2) - 2 * reads * LIGHTON_8BIT.variance_dn2) < 0.02
    counts = np.array([np.count_nonzero(k == v) for v in values])
    expected = draws * noise.pmf
    big = expected >= 20
    chi2 = float(np.sum((counts[big] - expected[big]) ** 2 / expected[big]))
    assert stats.chi2.sf(chi2, int(big.sum()) - 1) > 1e-4


def skellam_noise(mean: float) -> NoisePMF:
    half = int(60 * math.sqrt(2 * mean) + 200)
    support = np.arange(-half, half + 1)
    return NoisePMF(-half, stats.skellam.pmf(support, mean, mean), 1e-12, 1e-300, len(support))


@pytest.mark.parametrize("mean", [30.0, 300.0])
def test_on_a_skellam_pmf_the_coefficient_is_between_exact_divergence_and_the_skellam_bound(mean: float) -> None:
    kappa, tau = pmf_coefficients(skellam_noise(mean), 3)
    orders = np.arange(2, 33)
    published = rounding_rdp_coefficient(orders.astype(float), mean)
    assert np.all(kappa[orders] <= published * (1 + 1e-6))
    support = np.arange(-400, 401)  # where both log-pmfs are finite in scipy; the rest only adds
    log_p0, log_p1 = stats.skellam.logpmf(support, mean, mean), stats.skellam.logpmf(support - 1, mean, mean)
    for alpha in orders:
        terms = alpha * log_p1 + (1.0 - alpha) * log_p0
        exact = logsumexp(terms[np.isfinite(terms)]) / (alpha - 1)
        assert kappa[alpha] >= exact
    assert tau <= 1e-39


@pytest.mark.parametrize("shift", [1, 2])
def test_accounted_epsilon_is_never_below_the_exact_pld_of_the_same_pmfs(shift: int) -> None:
    reads, delta = 2, 1e-5
    noise = difference_pmf(LIGHTON_8BIT, reads)
    with np.errstate(divide="ignore"):
        log_p = np.log(noise.pmf)
    upper = {int(n): float(v) for n, v in zip(noise.support + shift, log_p) if np.isfinite(v)}
    lower = {int(n): float(v) for n, v in zip(noise.support, log_p) if np.isfinite(v)}
    pld = pld_lib.from_two_probability_mass_functions(lower, upper, value_discretization_interval=1e-4)
    exact = pld.get_epsilon_for_delta(delta)
    accountant = Accountant("replace_one")
    accountant.step(event(LIGHTON_8BIT, reads, float(shift)))
    accounted = accountant.get_epsilon(delta)
    assert exact <= accounted <= 4 * exact  # sound, and within RDP's conversion slack


def empirical_epsilon(noise: NoisePMF, camera: CameraRead, reads: int, t: float, delta: float, draws: int) -> float:
    """Likelihood-ratio attack on ``R(t') + K`` vs ``R(0) + K`` drawn as coded; a 99.99 % lower bound."""
    generator, sensor = SecureGenerator(), sensor_of(camera)
    samples = {}
    for point in (0.0, t):
        rounded = randomized_round(np.full(draws, point), generator).astype(np.int64)
        samples[point] = rounded + draw_digitized_counts(generator, sensor, camera.mean_e, draws, reads)
    lo, hi = min(s.min() for s in samples.values()) - 2, max(s.max() for s in samples.values()) + 2
    support = np.arange(lo, hi + 1)
    with np.errstate(divide="ignore"):
        loss = np.log(law(noise, t, support)) - np.log(law(noise, 0.0, support))
    best = 0.0
    for threshold in np.quantile(loss[np.isfinite(loss)], np.linspace(0.5, 0.999, 40)):
        chosen = support[loss >= threshold]
        hits_alt = int(np.isin(samples[t], chosen).sum())
        hits_null = int(np.isin(samples[0.0], chosen).sum())
        alt_low = stats.beta.ppf(1e-4, hits_alt, draws - hits_alt + 1) if hits_alt else 0.0
        null_high = stats.beta.ppf(1 - 1e-4, hits_null + 1, draws - hits_null)
        if alt_low > delta:
            best = max(best, math.log((alt_low - delta) / null_high))
    return best


def test_likelihood_ratio_attack_stays_below_the_accounted_epsilon() -> None:
    reads, t, delta = 1, 1.5, 1e-3
    accountant = Accountant("replace_one")
    accountant.step(event(LIGHTON_8BIT, reads, t))
    accounted = accountant.get_epsilon(delta)
    found = empirical_epsilon(difference_pmf(LIGHTON_8BIT, reads), LIGHTON_8BIT, reads, t, delta, 300_000)
    assert 0.2 < found <= accounted  # the attack finds real leakage, never more than accounted


def test_saturation_attack_is_caught_by_the_accountant() -> None:
    """A camera that clips at both ends gives ``K`` an edge atom; shifting by one puts mass where the
    other law has none. The attack measures that mass; the accountant refuses a finite epsilon there."""
    reads, draws, delta = 1, 100_000, 1e-3
    edge = SATURATING.max_dn * reads
    generator, sensor = SecureGenerator(), sensor_of(SATURATING)
    beyond = draw_digitized_counts(generator, sensor, SATURATING.mean_e, draws, reads) + 1 > edge
    assert beyond.mean() > 10 * delta  # impossible without the shift: delta >= this at every epsilon
    accountant = Accountant("replace_one")
    accountant.step(event(SATURATING, reads, 1.0))
    assert accountant.get_epsilon(delta) == math.inf
    assert accountant.get_delta(20.0) == 1.0


def test_unlikely_saturation_costs_only_its_coupling_mass() -> None:
    accountant = Accountant("replace_one")
    accountant.step(event(LIGHTON_8BIT, 16, 1.0), 100)
    epsilon = accountant.get_epsilon(1e-5)
    assert math.isfinite(epsilon) and accountant.get_delta(epsilon) <= 1e-5 * (1 + 1e-6)
    assert event(LIGHTON_8BIT, 16, 1.0).total_variation() < 1e-30


def test_planner_finds_a_sound_point_on_an_8bit_4e_camera_and_the_accountant_agrees() -> None:
    """The fewest reads: the found count fits, one fewer does not (a smaller run and read cap than the
    main job's, so the bisection is short; the check is the same)."""
    from opu_hal.privacy.digitized_plan import CameraFacts, RunShape, _epsilon, plan

    facts = CameraFacts(read_noise_e=6.0, gain_e_per_dn=4.0, adc_bits=8, black_level_dn=10, full_well_e=10000.0)
    run = RunShape(
        dataset_size=5000, batch_size=250, steps=20, dimension=1000, resolution=10.0, target_epsilon=2.0, delta=1e-5
    )
    found = plan(facts, run, pixels_per_frame=2040 * 1088, frame_time_s=500e-6, levels=(0.35, 0.5), max_reads=64)
    assert found.epsilon <= run.target_epsilon
    assert found.reads > 1 and _epsilon(found.camera, found.reads - 1, run) > run.target_epsilon
    assert found.frames_per_step == math.ceil(2 * found.reads * run.dimension / (2040 * 1088))


def test_planner_refuses_an_unreachable_target_and_names_why() -> None:
    from opu_hal.privacy.digitized_plan import CameraFacts, DigitizedPlanRefused, RunShape, plan

    facts = CameraFacts(
        read_noise_e=200.0, gain_e_per_dn=8.0, adc_bits=6, black_level_dn=4, full_well_e=2000.0
    )  # small well: cheap read PMFs at 16 bits
    run = RunShape(
        dataset_size=100, batch_size=100, steps=1000, dimension=10, resolution=10.0, target_epsilon=0.01, delta=1e-10
    )
    with pytest.raises(DigitizedPlanRefused, match="6-bit camera at 8.0 e-/DN.*nearest that qualifies: none"):
        plan(facts, run, pixels_per_frame=1000, frame_time_s=1e-3, levels=(0.5,), max_reads=16)


def test_planner_names_the_nearest_camera_that_qualifies() -> None:
    """A saturating 6-bit camera is refused; more bits at the same gain plan, and are named."""
    from opu_hal.privacy.digitized_plan import CameraFacts, DigitizedPlanRefused, RunShape, plan

    facts = CameraFacts(read_noise_e=200.0, gain_e_per_dn=8.0, adc_bits=6, black_level_dn=4, full_well_e=1e5)
    run = RunShape(
        dataset_size=1000, batch_size=100, steps=10, dimension=10, resolution=2.0, target_epsilon=4.0, delta=1e-5
    )
    with pytest.raises(DigitizedPlanRefused, match=r"nearest that qualifies: 8-bit at 8.0 e-/DN \(\d+ reads"):
        plan(facts, run, pixels_per_frame=1000, frame_time_s=1e-3, levels=(0.5,), max_reads=16)
