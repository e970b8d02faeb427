"""Privacy noise from the simulated camera: differences of summed anchor-only reads (Skellam at a
gain of 1 e-/DN; digitized reads at any gain, :func:`digitized_law` and :func:`draw_digitized`).

An anchor-only frame (signal off, reference beam on) has the same mean at every pixel:
``lambda_read = A^2 + D`` photo-electrons (anchor plus dark signal, see :mod:`.device` and
:mod:`.camera`). A value of privacy noise is ``C1 - C2``, where each ``C`` sums ``n`` pixel reads:
a sum of ``n`` independent Poisson(``lambda_read``) counts IS Poisson(``n lambda_read``), so it is
drawn exactly in one draw, from the secure generator (:mod:`opu_hal.randomness.secure_random`).

Conditions of the analysis (:mod:`opu_hal.privacy.skellam`), each refused with the profile key to
change:

- gain exactly 1 e-/DN: then ``DN = P + round(G) + black`` with ``P`` the count and ``G`` the read
  noise, so the count read in electrons is ``P`` plus independent integer noise (post-processing).
  At other gains the ADC mixes the count with read noise in a way the Skellam bound does not cover;
- no read may clip (full well, ADC top, ADC bottom): the probability that one read clips is bounded
  (Poisson and normal tails, :func:`clip_probability`) and must be below :data:`CLIP_LIMIT`;
- a positive Poisson mean.

The read noise of ``n`` reads, ``sum round(G_i)``, is simulated as one rounded normal of the same
variance: it is independent of the data and of the counts, so this shortcut changes only how much
extra (unaccounted) noise the simulation adds, never the privacy analysis.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy import stats

from ...contract.calibration import ReadBox
from ...contract.errors import DeviceUnavailable
from ...contract.noise import DigitizedReadLaw, NoiseDistribution, PrivacyCounts
from ...randomness.secure_random import SecureGenerator

if TYPE_CHECKING:
    from .camera import Sensor

CLIP_LIMIT = 1e-24


@functools.lru_cache(maxsize=256)
def clip_probability(mean_e: float, sensor: Sensor) -> float:
    """Upper bound on the probability that one read of Poisson(``mean_e``) electrons plus read noise
    leaves the ADC's range (saturation above, black level below)."""
    read = max(sensor.read_noise_e, 1e-12)
    top = sensor.saturation_e
    bottom = -sensor.black_level_dn * sensor.gain_e_per_dn
    if not bottom < mean_e < top:
        return 1.0
    upper_gap, lower_gap = (top - mean_e) / 2, (mean_e - bottom) / 2
    above = stats.poisson.sf(math.floor(mean_e + upper_gap), mean_e) + stats.norm.sf(upper_gap / read)
    below = stats.poisson.cdf(math.ceil(mean_e - lower_gap) - 1, mean_e) + stats.norm.sf(lower_gap / read)
    return float(min(1.0, above + below))


def check_privacy_source(
    sensor: Sensor, read_mean_e: float, label: str, brightest_read_e: float | None = None
) -> float:
    """Refuse an operating point where the Skellam analysis does not hold; returns the clip bound
    (at ``brightest_read_e``, the brightest pixel's read, default ``read_mean_e``)."""
    if abs(sensor.gain_e_per_dn - 1.0) > 1e-12:
        raise DeviceUnavailable(
            f"profile {label!r}: privacy noise needs gain_e_per_dn = 1 (one DN per photo-electron, so "
            f"the ADC reads the count plus independent noise); got {sensor.gain_e_per_dn}"
        )
    if not read_mean_e > 0:
        raise DeviceUnavailable(
            f"profile {label!r}: anchor-only reads carry no photo-electrons; raise anchor_power_uw or exposure_us"
        )
    brightest = read_mean_e if brightest_read_e is None else max(brightest_read_e, read_mean_e)
    p_clip = clip_probability(brightest, sensor)
    if p_clip > CLIP_LIMIT:
        raise DeviceUnavailable(
            f"profile {label!r}: an anchor-only read of {brightest:.4g} e- may clip (probability "
            f"{p_clip:.3g} > {CLIP_LIMIT:g}; saturation at {sensor.saturation_e:.4g} e-): lower "
            "anchor_power_uw or exposure_us, or raise full_well_e / adc_bits"
        )
    return p_clip


def camera_cost(n_values: int, reads: int, pixels_per_frame: int, frame_time_s: float) -> tuple[int, float]:
    """Frames and camera-seconds of ``n_values`` Skellam values of ``reads`` reads per count: two
    counts per value, one read per pixel of an anchor-only frame (the whole sensor)."""
    frames = math.ceil(2 * n_values * reads / pixels_per_frame)
    return frames, frames * frame_time_s


def draw_counts(
    generator: SecureGenerator,
    sensor: Sensor,
    read_mean_e: float,
    n_values: int,
    poisson_mean: float,
    label: str,
    read_mean_lower_e: float | None = None,
    mean_source: str = "model (the profile's declared camera)",
    pixels_per_frame: int = 1,
    frame_time_s: float = 0.0,
    brightest_read_e: float | None = None,
) -> PrivacyCounts:
    """Skellam noise whose counts have Poisson mean ``>= poisson_mean``, from summed anchor reads.

    ``read_mean_e`` is the true mean of one read (the simulation draws with it);
    ``read_mean_lower_e`` the figure the number of reads is planned with (a calibration's lower
    bound; default: the model's value)."""
    p_clip = check_privacy_source(sensor, read_mean_e, label, brightest_read_e)
    if not (math.isfinite(poisson_mean) and poisson_mean > 0):
        raise DeviceUnavailable(f"requested Poisson mean must be finite and > 0, got {poisson_mean}")
    lower = read_mean_e if read_mean_lower_e is None else min(read_mean_lower_e, read_mean_e)
    if read_mean_lower_e is not None and read_mean_e < read_mean_lower_e:  # say which figure planned the reads
        mean_source = (
            f"model (the profile's declared camera: {read_mean_e:.4g} e- per read, below the bound "
            f"{read_mean_lower_e:.4g} e- of {mean_source})"
        )
    if not lower > 0:
        raise DeviceUnavailable(
            f"profile {label!r}: the anchor read's lower bound is {lower:.4g} e- ({mean_source}); "
            "no positive Poisson mean can be guaranteed: raise anchor_power_uw or calibrate with more frames"
        )
    reads = max(1, math.ceil(poisson_mean / lower))
    while reads * lower < poisson_mean:
        reads += 1
    applied = reads * read_mean_e
    counts = generator.skellam(applied, n_values)
    read_var = 2 * reads * (sensor.read_noise_e**2 + 1 / 12) if sensor.read_noise_e > 0 else 0.0
    if read_var > 0:
        counts = counts + np.rint(math.sqrt(read_var) * generator.standard_normal(n_values).numpy()).astype(np.int64)
    frames, seconds = camera_cost(n_values, reads, pixels_per_frame, frame_time_s)
    distribution = NoiseDistribution(
        kind="poisson-counts",
        generator=generator.name,
        poisson_mean=applied,
        frames=frames,
        camera_seconds=seconds,
        poisson_mean_lower=poisson_mean,
        reads_per_value=reads,
        read_noise_e=sensor.read_noise_e,
        gain_e_per_dn=sensor.gain_e_per_dn,
        lattice_step=1.0,
        clip_probability=p_clip,
        mean_source=mean_source,
    )
    return PrivacyCounts(counts=torch.from_numpy(counts), distribution=distribution)


def digitized_reads(generator: SecureGenerator, sensor: Sensor, read_mean_e: float, n: int) -> np.ndarray:
    """``n`` anchor-only reads in DN exactly as :meth:`Sensor._digitize` makes them (eq. 1 of
    :mod:`opu_hal.privacy.digitized`): Poisson electrons, full well, read noise, ADC gain, black
    level and clip, every draw from the secure generator."""
    electrons = np.minimum(generator.poisson(read_mean_e, n).astype(np.float64), sensor.full_well_e)
    electrons += sensor.read_noise_e * generator.standard_normal(n).numpy().astype(np.float64)
    dn = np.rint(electrons / sensor.gain_e_per_dn) + sensor.black_level_dn
    return np.clip(dn, 0, sensor.max_dn).astype(np.int64)


def draw_digitized_counts(
    generator: SecureGenerator, sensor: Sensor, read_mean_e: float, n_values: int, reads: int, chunk: int = 1 << 22
) -> np.ndarray:
    """``n_values`` noise values ``K = C_1 - C_2``, each count the sum of ``reads`` digitized reads
    (eq. 3 of :mod:`opu_hal.privacy.digitized`; black levels cancel, their clipping does not)."""
    out = np.empty(n_values, dtype=np.int64)
    per = max(1, chunk // (2 * reads))
    for start in range(0, n_values, per):
        m = min(per, n_values - start)
        dn = digitized_reads(generator, sensor, read_mean_e, 2 * reads * m).reshape(2, m, reads).sum(axis=2)
        out[start : start + m] = dn[0] - dn[1]
    return out


def digitized_law(
    sensor: Sensor,
    read_mean_e: float,
    label: str,
    pixels_per_frame: int,
    frame_time_s: float,
    box: ReadBox | None = None,
) -> DigitizedReadLaw:
    """The law of one anchor-only read for exact accounting: the profile's camera (a point), or a
    calibration's ``box`` (:meth:`~opu_hal.contract.calibration.NoiseCalibration.digitized_read_box`):
    then every quantity of the law is the calibration's interval, none the profile's; the box must cover
    the simulated camera's truth (the simulation knows it; a box that misses it would account a camera
    that is not the one drawn)."""
    if not read_mean_e > 0:
        raise DeviceUnavailable(
            f"profile {label!r}: anchor-only reads carry no photo-electrons; raise anchor_power_uw or exposure_us"
        )
    if not (6 <= sensor.adc_bits <= 16 and sensor.read_noise_e > 0):
        raise DeviceUnavailable(
            f"profile {label!r}: digitized privacy noise is accounted for adc_bits in [6, 16] "
            f"and read_noise_e > 0; got {sensor.adc_bits} bits, {sensor.read_noise_e} e-"
        )
    if box is None:
        return DigitizedReadLaw(
            mean_e=(read_mean_e, read_mean_e),
            read_noise_e=(sensor.read_noise_e, sensor.read_noise_e),
            gain_e_per_dn=sensor.gain_e_per_dn,
            adc_bits=sensor.adc_bits,
            black_level_dn=sensor.black_level_dn,
            full_well_e=sensor.full_well_e,
            source="model (the profile's declared camera)",
            pixels_per_frame=pixels_per_frame,
            frame_time_s=frame_time_s,
        )
    for name, (low, high), truth in (
        ("anchor read mean [e-]", box.mean_e, read_mean_e),
        ("read noise [e-]", box.read_noise_e, sensor.read_noise_e),
        ("gain [e-/DN]", box.gain_e_per_dn, sensor.gain_e_per_dn),
        ("black level [DN]", box.black_level_dn, sensor.black_level_dn),
    ):
        if not low <= truth <= high:
            raise DeviceUnavailable(
                f"profile {label!r}: the calibration's {name} interval [{low:.4g}, {high:.4g}] "
                f"misses the camera's {truth:.4g} ({box.source}); re-run `opu-hal calibrate`"
            )
    return DigitizedReadLaw(
        mean_e=box.mean_e,
        read_noise_e=box.read_noise_e,
        gain_e_per_dn=box.gain_e_per_dn[0],
        adc_bits=sensor.adc_bits,
        black_level_dn=box.black_level_dn[0],
        full_well_e=box.full_well_e[0],
        source=box.source,
        pixels_per_frame=pixels_per_frame,
        frame_time_s=frame_time_s,
        gain_e_per_dn_high=box.gain_e_per_dn[1],
        black_level_dn_high=box.black_level_dn[1],
        full_well_e_high=box.full_well_e[1],
    )


def draw_digitized(
    generator: SecureGenerator, sensor: Sensor, read_mean_e: float, law: DigitizedReadLaw, n_values: int, reads: int
) -> PrivacyCounts:
    """``n_values`` values ``K = C_1 - C_2`` of ``reads`` digitized anchor reads per count
    (:func:`draw_digitized_counts`), every draw from the secure generator, and how they were made."""
    if not (isinstance(reads, int) and reads >= 1 and isinstance(n_values, int) and n_values >= 1):
        raise DeviceUnavailable(f"need integers n_values >= 1 and reads >= 1, got {n_values!r}, {reads!r}")
    counts = draw_digitized_counts(generator, sensor, read_mean_e, n_values, reads)
    frames, seconds = camera_cost(n_values, reads, law.pixels_per_frame, law.frame_time_s)
    distribution = NoiseDistribution(
        kind="digitized-reads",
        generator=generator.name,
        poisson_mean=read_mean_e,
        poisson_mean_lower=min(law.mean_e[0], read_mean_e),
        reads_per_value=reads,
        read_noise_e=law.read_noise_e[0],  # the accounted (calibrated) low ends, not the simulator's truth
        gain_e_per_dn=law.gain_e_per_dn,
        lattice_step=1.0,
        clip_probability=clip_probability(read_mean_e, sensor),
        mean_source=law.source,
        frames=frames,
        camera_seconds=seconds,
    )
    return PrivacyCounts(counts=torch.from_numpy(counts), distribution=distribution)
