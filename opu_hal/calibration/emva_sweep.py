"""EMVA 1288 sweeps as an :class:`~.frames.Acquisition`: frames grouped by exposure and photon
count, as an EMVA 1288 descriptor file lists them (``b exposure photons`` / ``d exposure``).

The standard's exposure-variation sweep keeps one illumination and varies the exposure, so every
level has its own dark series (same exposure, no light): :attr:`~.frames.Acquisition.ptc_darks`
carries them and :func:`~.photon_transfer.estimate` subtracts each level's own dark. The darks,
one per exposure, also give the black level and the dark current (EMVA 1288 sec. 6.4,
``mu_I.mean``: slope of the dark mean against the exposure, over the gain) and the zero-exposure
read noise (:func:`~.emva.zero_exposure_read_noise`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..contract.errors import CalibrationError
from .bootstrap import percentile_estimate
from .dark_lines import dark_ceiling_dn, dark_line
from .frames import Acquisition, SeriesStats
from .photon_transfer import PhotonTransfer
from .schema import Estimate

Sweep = Mapping[float, Mapping[float, np.ndarray]]  # exposure (us) -> photons per pixel (0: dark) -> frames


def series_of(frames: np.ndarray, exposure_us: float, photons: float, max_dn: int, temperature_c: float) -> SeriesStats:
    """Per-pixel mean and temporal variance (``ddof = 1``) of ``frames`` (frames, ...) of one level."""
    dn = np.asarray(frames, dtype=np.float64).reshape(len(frames), -1)
    if dn.shape[0] < 2:
        raise CalibrationError(f"a level needs two frames at least (exposure {exposure_us:g} us, photons {photons:g})")
    return SeriesStats(
        kind="anchor" if photons else "dark",
        temperature_c=temperature_c,
        exposure_us=float(exposure_us),
        frames=int(dn.shape[0]),
        mean=dn.mean(axis=0),
        var=dn.var(axis=0, ddof=1),
        photons_per_pixel=float(photons) if photons else None,
        clipped=int((dn >= max_dn).sum()),
        max_dn=max_dn,
        reads_at_top=int((dn >= max_dn).sum()),
    )


def acquisition_from_sweep(sweep: Sweep, max_dn: int, temperature_c: float = 0.0) -> Acquisition:
    """The acquisition of an EMVA 1288 sweep (exposure-variation or photon-variation): the bright
    levels in order of exposure then photons, each with its exposure's dark series."""
    darks: dict[float, SeriesStats] = {}
    levels: list[SeriesStats] = []
    for exposure in sorted(sweep):
        by_photons = sweep[exposure]
        if 0.0 not in by_photons or len(by_photons) < 2:
            raise CalibrationError(
                f"EMVA sweep: exposure {exposure:g} us needs a dark series (photons 0) and a bright one, "
                f"got photon counts {sorted(by_photons)}"
            )
        darks[exposure] = series_of(by_photons[0.0], exposure, 0.0, max_dn, temperature_c)
        levels += [series_of(by_photons[p], exposure, p, max_dn, temperature_c) for p in sorted(by_photons) if p]
    dark_list = [darks[e] for e in sorted(darks)]
    shortest = dark_list[0]
    return Acquisition(
        reference_temperature_c=temperature_c,
        reference_exposure_us=shortest.exposure_us,
        ptc_dark=shortest,
        ptc=levels,
        dark=dark_list,
        frames_total=sum(s.frames for s in levels + dark_list),
        pixels=int(shortest.mean.size),
        max_dn=max_dn,
        ptc_darks=[darks[s.exposure_us] for s in levels],
    )


def dark_current(acq: Acquisition, pt: PhotonTransfer) -> Estimate:
    """Dark current (e-/s) at the reference temperature: the pixels' dark lines against the
    exposure (each over its unclipped exposures), their mean slope times the gain; pixel bootstrap
    with the gain's draws (EMVA 1288 ``mu_I.mean``)."""
    darks = sorted((s for s in acq.dark if s.temperature_c == acq.reference_temperature_c), key=lambda s: s.exposure_us)
    if len({s.exposure_us for s in darks}) < 2:
        raise CalibrationError("dark current needs dark series at two exposures at least")
    _, slope, _, slope_draws = dark_line(darks, pt.index, dark_ceiling_dn(acq), pt.black.value)
    return percentile_estimate(slope * 1e6 * pt.gain.value, slope_draws * 1e6 * pt.gain_draws, pt.alpha, "e-/s")
