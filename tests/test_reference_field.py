"""The linear mode's reference field (opu_hal/backends/simulated/reference.py): a speckle anchor through
the medium, as a LightOn OPU has, each pixel divided by its own amplitude; a flat beam only where a
profile declares one. The noise of each pixel follows its own reference intensity, and the bound that
photonic DP accounts with lies below every pixel's noise."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

import opu_hal
from opu_hal.backends.simulated.device import SimulatedDevice
from opu_hal.backends.simulated.profile import SimulatedProfile
from opu_hal.backends.simulated.reference import ReferenceField
from opu_hal.randomness.seeding import stream_seed

IN, OUT, ROWS = 8, 512, 600


def device(reference: str = "speckle", **update) -> SimulatedDevice:
    """``opu-sim`` reading every speckle pixel (no band), at a gain whose ADC step the read noise still
    dithers at the dimmest reference pixel (``opu-sim``'s 20 e-/DN does not: it declares a band)."""
    base = {"in_features": IN, "out_features": OUT, "reference_field": reference, "reference_band": None}
    profile = opu_hal.load_profile("opu-sim").model_copy(update={**base, "gain_e_per_dn": 10.0, **update})
    dev = opu_hal.load_device(profile)
    assert isinstance(dev, SimulatedDevice)
    return dev


def reference_of(name: str) -> str:
    profile = opu_hal.load_profile(name)
    assert isinstance(profile, SimulatedProfile)
    return profile.reference_field


def noise_of_one_input(dev, rows: int = ROWS) -> tuple[torch.Tensor, torch.Tensor]:
    """One binary input repeated ``rows`` times: the projections' errors and the input's field ``z``."""
    x = torch.zeros(rows, IN, device=dev.compute)
    x[:, : IN // 2] = 1.0
    values = dev.project(x).values
    return values - dev.ideal(x), x[:1]


def predicted_variance(dev, x: torch.Tensor) -> torch.Tensor:
    """``Var(g_j)`` of reference.py's docstring for input ``x``, pixel by pixel."""
    real, imag = dev.optics.field(x)
    scale = math.sqrt(dev.signal_e / IN)
    real, imag = (real[0] * scale).double(), (imag[0] * scale).double()
    ref = dev.reference
    a2 = dev.anchor_e * ref.intensity
    amp = math.sqrt(dev.anchor_e)
    with_anchor = (real + amp * ref.field_cos.double()) ** 2 + (imag + amp * ref.field_sin.double()) ** 2
    sensor = dev.sensor
    floor = torch.as_tensor(sensor.pixel_dark_e).double() + sensor.read_noise_e**2 + sensor.quantization_e2
    return (with_anchor + real**2 + imag**2 + a2 + 3 * floor) / (2 * a2 * dev.signal_e)


def test_a_speckle_reference_is_exponentially_distributed_with_mean_one():
    ref = ReferenceField.build("speckle", 3, 20_000, torch.device("cpu"))
    s = ref.intensity.numpy()
    assert stats.kstest(s, "expon").pvalue > 1e-3
    assert abs(s.mean() - 1) < 0.03 and s.min() < 1e-3  # dim pixels exist
    assert torch.allclose(ref.cos**2 + ref.sin**2, torch.ones(20_000), atol=1e-5)


def test_a_flat_reference_keeps_the_seeded_phases_and_unit_amplitude():
    ref = ReferenceField.build("flat", 3, 64, torch.device("cpu"))
    theta = 2 * math.pi * torch.rand(64, generator=torch.Generator().manual_seed(stream_seed(3, "anchor")))
    assert torch.equal(ref.cos, torch.cos(theta)) and torch.equal(ref.sin, torch.sin(theta))
    assert torch.equal(ref.amplitude, torch.ones(64)) and ref.mean_inverse == 1.0


def test_shipped_simulated_profiles_have_a_speckle_reference_unless_they_declare_a_beam():
    assert reference_of("opu-sim") == reference_of("opu-sim-dp") == "speckle"
    assert reference_of("opu-sim-8bit") == "flat"  # it declares a reference beam
    with pytest.raises(Exception, match="reference_field"):
        opu_hal.load_profile("opu-sim").model_validate(
            {**opu_hal.load_profile("opu-sim").model_dump(), "reference_field": "beam"}
        )


def test_the_projection_matrix_does_not_depend_on_the_reference_amplitudes():
    """Each pixel is divided by its own amplitude: the projection is unbiased and ``B`` has i.i.d.
    ``N(0, 1 / n)`` entries, whose row norms do not follow the reference's brightness."""
    dev = device()
    x = torch.eye(IN)
    b = dev.ideal(x) * math.sqrt(IN)  # columns: pixels; n B_jk^2 ~ chi^2_1
    assert abs(float(b.var()) - 1) < 0.05
    s = dev.reference.intensity.float()
    assert abs(float(np.corrcoef(s.numpy(), (b**2).sum(0).numpy())[0, 1])) < 0.15
    errors, _ = noise_of_one_input(dev, 400)
    z_scores = errors.mean(0) / (errors.std(0) / math.sqrt(400))
    assert abs(float(z_scores.mean())) < 0.15 and float(z_scores.std()) < 1.15


def test_each_pixel_has_the_noise_of_its_own_reference_intensity():
    dev = device()
    errors, x = noise_of_one_input(dev)
    ratio = errors.double().var(0) / predicted_variance(dev, x)
    s = dev.reference.intensity
    # where the anchor gives under one DN the rounding is not the independent g^2 / 12 the Gaussian
    # approximation adds (the camera's noise is then below 1 DN): those pixels are left out here
    dithered = ratio[dev.anchor_e * s >= dev.sensor.gain_e_per_dn]
    assert dithered.numel() > 0.85 * OUT  # P(s < 20 / 203) = 9 %
    assert abs(float(dithered.mean()) - 1) < 0.03  # each ratio has a relative sd of sqrt(2 / 600)
    lo, hi = (float(stats.chi2.ppf(q, ROWS - 1)) / (ROWS - 1) for q in (1e-5, 1 - 1e-5))
    assert float(dithered.min()) > lo * 0.97 and float(dithered.max()) < hi * 1.03
    dim, bright = int(s.argmin()), int(s.argmax())
    assert float(errors[:, dim].var()) > 50 * float(errors[:, bright].var())  # a dim reference is a noisy pixel


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device: the GPU's three separate reads run on a GPU only"
)
def test_on_a_gpu_each_pixel_has_the_noise_of_its_own_reference_intensity():
    dev = device(compute="cuda")
    errors, x = noise_of_one_input(dev)
    ratio = (errors.double().var(0) / predicted_variance(dev, x.to(dev.compute)).to(errors.device)).cpu()
    dithered = ratio[(dev.anchor_e * dev.reference.intensity >= dev.sensor.gain_e_per_dn).cpu()]
    assert abs(float(dithered.mean()) - 1) < 0.03


def test_the_reported_std_is_the_mean_of_the_pixels_variances():
    for reference in ("speckle", "flat"):
        dev = device(reference)
        errors, x = noise_of_one_input(dev)
        report = dev.project(x.expand(ROWS, IN)).noise
        empirical = float(errors.double().var(0).mean())
        assert report.std**2 == pytest.approx(empirical, rel=0.06), reference
        real, imag = dev.optics.field(x)
        z2 = (real[0].double() ** 2 + imag[0].double() ** 2) * dev.signal_e / IN
        ref, amp = dev.reference, math.sqrt(dev.anchor_e)
        scale = math.sqrt(dev.signal_e / IN)
        shifted = (real[0].double() * scale + amp * ref.field_cos.double()) ** 2
        shifted += (imag[0].double() * scale + amp * ref.field_sin.double()) ** 2
        frames = float((shifted + z2 + dev.anchor_e * ref.intensity).mean())  # the three frames' electrons
        assert report.distribution is not None
        assert report.distribution.poisson_mean == pytest.approx(frames, rel=1e-4), reference


def test_the_lower_bound_lies_below_every_pixels_least_noise_and_above_the_shot_noise_floor():
    """Photonic DP accounts with ``std_lower``: it must hold at the quietest pixel for the quietest
    input (``z_j = -a_j / 2``), which under speckle is the brightest reference pixel."""
    dev = device()
    lower2 = dev.noise_report().std_lower ** 2
    ref, sensor = dev.reference, dev.sensor
    a2 = dev.anchor_e * ref.intensity
    floor = torch.as_tensor(sensor.pixel_dark_e).double() + sensor.read_noise_e**2  # rounding is not privacy noise
    least = (1.5 * a2 + 3 * floor) / (2 * a2 * dev.signal_e)
    assert lower2 <= float(least.min()) * (1 + 1e-9)
    assert lower2 >= 0.75 / dev.signal_e  # the shot noise of any reference
    flat = device("flat").noise_report().std_lower ** 2
    assert lower2 < flat  # the brightest speckle pixel's bound is below a flat beam's at the mean
    errors, _ = noise_of_one_input(dev)
    assert float(errors.double().var(0).min()) > lower2


def test_a_calibrated_speckle_device_bounds_its_noise_without_the_reference():
    """Under a speckle reference the calibrated bound is ``0.75 / Phi`` at the signal's upper end, which
    no reference intensity can undercut; ``std`` averages this device's own pixels."""
    from pathlib import Path

    from opu_hal.calibration.calibrated import load_calibrated_noise
    from opu_hal.calibration.schema import read_calibration

    data = Path(__file__).parent / "data" / "plots"
    profile = opu_hal.load_profile(data / "opu-unity.toml").model_copy(update={"reference_field": "speckle"})
    calibration = read_calibration(data / "opu-unity-cal.json")
    physics = {**(calibration.device.physics or {}), "reference_field": "speckle"}
    calibration = calibration.model_copy(update={"device": calibration.device.model_copy(update={"physics": physics})})
    flat = load_calibrated_noise(
        read_calibration(data / "opu-unity-cal.json"), opu_hal.load_profile(data / "opu-unity.toml")
    )
    noise = load_calibrated_noise(calibration, profile)
    dev = opu_hal.load_device(profile)
    assert isinstance(dev, SimulatedDevice)
    dev.attach_calibration(noise)
    temperature = calibration.temperatures_c[0]
    report, flat_report = dev.noise_report(), flat.report(temperature)
    assert report.std_lower == pytest.approx(math.sqrt(0.75 / noise._electrons("signal")[1]), rel=1e-12)
    assert report.std_lower < flat_report.std_lower
    assert noise.reference_mean_inverse == dev.reference.mean_inverse > 1
    assert report.std > flat_report.std  # the dim reference pixels' noise is in the mean


def test_a_calibrated_anchor_map_bounds_the_brightest_reference_pixel_and_the_noise_below_every_pixel(tmp_path):
    """With an anchor map the bound keeps the floor's share at the brightest reference pixel's upper
    bound (the projection's pixels are the anchor map's first ``out_features``): below every pixel's
    least noise, above the reference-free ``0.75 / Phi``."""
    from opu_hal.calibration.anchor_map import calibrate_anchor_map
    from opu_hal.calibration.calibrated import CalibratedNoise
    from opu_hal.calibration.run import calibrate_device
    from opu_hal.calibration.schema import write_calibration
    from opu_hal.profiles.catalogue import validate_profile

    small = {"backend": "simulated", "in_features": 10, "out_features": 64, "gain_e_per_dn": 1.0, "adc_bits": 12}
    small |= {"black_level_dn": 64, "sensor_pixels": 20_000, "anchor_power_uw": 0.01}  # brightest of 64 unclipped
    dev = opu_hal.load_device(validate_profile(small, "speckle.toml"))
    assert isinstance(dev, SimulatedDevice)
    calibration = calibrate_device(dev, [25.0, 60.0], [400.0], [100_000.0], frames=16, bootstrap=100)
    dev.set_options(temperature_c=25.0)  # the anchor map is measured here
    cal = tmp_path / "cal.json"
    write_calibration(calibration, cal)
    assert "anchor map" in (calibrate_anchor_map(dev, calibration, cal, frames=16) or "")
    noise = CalibratedNoise(calibration, cal, "linear", 400.0, dev.profile.laser_power_uw, 0.01)
    report = noise.report(25.0)
    # without a device, the std's mean 1 / s_j comes from the map's estimates (3.48 here, truth 3.18)
    assert noise._mean_inverse() == pytest.approx(dev.reference.mean_inverse, rel=0.2)
    phi_up = noise._electrons("signal")[1]
    truth = dev.anchor_e * dev.reference.intensity  # hidden: each projection pixel's reference electrons
    brightest_up = float(noise.anchor_map(25.0, 400.0).upper_e[:64].max())  # type: ignore[union-attr]
    assert brightest_up >= float(truth.max())
    assert report.std_lower > math.sqrt(0.75 / phi_up)
    floor = torch.as_tensor(dev.sensor.pixel_dark_e).double() + dev.sensor.read_noise_e**2
    least = (1.5 * truth + 3 * floor) / (2 * truth * dev.signal_e)
    assert report.std_lower**2 <= float(least.min())
    from opu_hal.calibration.plan import RunShape, plan_gaussian

    shape = RunShape(sampling="poisson", dataset_size=1000, batch_size=100, steps=10, sensitivity=0.01)
    plans = plan_gaussian(calibration, dev.profile, 4.0, 1e-5, shape, lambda *args: 1.0, cal)  # plan reads the map
    assert {p.temperature_c: p.supplied for p in plans}[25.0] == report.std_lower
    hot = noise.report(60.0)  # the map measured at 25 C bounds the light at 60 C too
    assert math.sqrt(0.75 / phi_up) < hot.std_lower and hot.std_lower >= report.std_lower


def test_a_reference_band_reads_only_pixels_whose_reference_lies_in_it_and_the_privacy_anchor_is_the_same_light():
    from opu_hal.backends.simulated.speckle import speckle_intensity

    dev = device(reference_band=[0.5, 1.5], sensor_pixels=20_000)
    s = dev.reference.intensity
    assert float(s.min()) >= 0.5 and float(s.max()) <= 1.5 and s.numel() == OUT
    privacy = speckle_intensity(dev.profile)
    assert np.allclose(privacy[:OUT], s.numpy(), rtol=1e-6)  # one anchor: the projection's reference and privacy's
    assert abs(privacy[OUT:].mean() - 1) < 0.03  # beyond the projection's pixels, the unconditioned law
    everything = device(sensor_pixels=20_000)
    assert dev.noise_report().std_lower > everything.noise_report().std_lower  # no bright pixel sets the bound


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"reference_band": [1.5, 0.5]}, "0 <= low < high"),
        ({"reference_band": [0.5, 1.5], "reference_field": "flat"}, "reference_field = 'speckle'"),
        ({"reference_band": [0.5]}, "reference_band"),
    ],
)
def test_a_bad_reference_band_is_refused_by_name(update, message):
    from opu_hal.profiles.catalogue import validate_profile

    data = {"backend": "simulated", "in_features": 8, "out_features": 16, **update}
    with pytest.raises(Exception, match=message):
        validate_profile(data, "bad.toml")


def test_a_calibration_names_the_reference_band_it_was_measured_with_and_refuses_another():
    from opu_hal.calibration.identity import check_matches
    from opu_hal.calibration.run import profile_identity
    from opu_hal.contract.errors import CalibrationError

    banded = opu_hal.load_profile("opu-sim-privacy")
    mine = profile_identity(banded, "linear")
    assert mine.physics is not None and mine.physics["reference_band"] == [0.9, 1.4]
    other = profile_identity(banded.model_copy(update={"reference_band": [0.9, 2.0]}), "linear")
    calibration = type("Cal", (), {"device": other})()
    with pytest.raises(CalibrationError, match="reference_band"):
        check_matches(calibration, mine, "opu-sim-privacy", Path("cal.json"))


def test_rounding_must_be_dithered_at_the_dimmest_reference_pixel_at_the_coldest_allowed_temperature():
    """The quietest frame of a linear projection is the anchor-only frame at the dimmest reference pixel
    read: ``opu-sim``'s 20 e-/DN reading every speckle pixel (dimmest ~5e-4 of the mean, 6 e- of read
    noise: 0.3 DN) is refused; its shipped band passes. ``opu-sim-privacy``'s band passes at 0 C, the
    coldest it allows, and a lower end that passes only where the dark signal helps is refused."""
    from opu_hal.contract.errors import ProfileError

    sim = opu_hal.load_profile("opu-sim")
    with pytest.raises(ProfileError, match=r"gain_e_per_dn.*dimmest reference pixel.*reference_band"):
        opu_hal.load_device(sim.model_copy(update={"reference_band": [0.0, 50.0]}))
    assert opu_hal.load_device(sim).reference.dimmest >= 0.35
    private = opu_hal.load_profile("opu-sim-privacy")
    opu_hal.load_device(private)
    with pytest.raises(ProfileError, match=r"at 0 C \(temperature_min_c\)"):
        opu_hal.load_device(private.model_copy(update={"reference_band": [0.75, 1.4]}))
    opu_hal.load_device(private.model_copy(update={"reference_band": [0.75, 1.4], "temperature_min_c": 25.0}))


def test_without_a_band_a_projection_reads_only_the_pixels_its_camera_dithers():
    """No ``reference_band``: the pixels whose anchor-only frame has at least half a DN of random noise
    (:mod:`opu_hal.backends.simulated.dither`); every pixel at 1 e-/DN; refused when too few pass."""
    from opu_hal.backends.simulated.dither import MIN_DITHER_DN, dithered_low, frame_noise_e, profile_band
    from opu_hal.contract.errors import ProfileError

    profile = opu_hal.load_profile("opu-sim").model_copy(update={"reference_band": None})
    low = dithered_low(profile)
    assert 0.2 < low < 0.5 and profile_band(profile) == (low, 50.0)
    dev = opu_hal.load_device(profile)
    assert dev.reference.dimmest >= low
    noise = frame_noise_e(profile, dev.anchor_e * dev.reference.dimmest)
    assert noise >= MIN_DITHER_DN * profile.gain_e_per_dn * (1 - 1e-9)
    assert profile_band(opu_hal.load_profile("opu-sim-dp")) is None  # 1 e-/DN: every pixel is dithered
    with pytest.raises(ProfileError, match="an anchor-only frame at 9 x the mean reference"):
        opu_hal.load_device(profile.model_copy(update={"gain_e_per_dn": 200.0}))


def test_the_privacy_anchor_is_cached_per_band_read_even_when_the_camera_derives_it():
    """Two profiles that differ only in gain derive different bands (no ``reference_band``): each one's
    privacy anchor at the projection's pixels is its own reference, not the other's cached speckle."""
    from opu_hal.backends.simulated.speckle import speckle_anchor

    small = {"in_features": IN, "out_features": OUT, "reference_band": None, "sensor_pixels": 4096}
    profiles = [opu_hal.load_profile("opu-sim").model_copy(update={**small, "gain_e_per_dn": g}) for g in (20.0, 1.0)]
    for profile in profiles * 2:
        light = speckle_anchor(profile).relative_light[:OUT]
        reference = ReferenceField.of_profile(profile, torch.device("cpu")).intensity.numpy()
        assert np.allclose(light / reference, light[0] / reference[0])  # PRNU-free profile: proportional
