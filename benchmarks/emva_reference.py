"""Issue 36's outside oracle: the photon-transfer estimator against the EMVA 1288 reference code
(``emva1288`` 1.0.2) on datasets from emva1288's own camera simulator.

    python -m benchmarks.emva_reference [--steps 100] [--size 32]

Three simulated cameras (8, 10 and 12 bits; the 12-bit one is full-well limited), an
exposure-variation sweep each (one radiance, a dark per exposure, as the standard and the
simulator's :class:`DatasetGenerator` make it). The same image files go through emva1288's
``ParseEmvaDescriptorFile`` / ``LoadImageData`` / ``Data1288`` / ``Results1288`` and through
:func:`opu_hal.calibration.emva_sweep.acquisition_from_sweep` + :func:`.photon_transfer.estimate`.
Prints, per camera and quantity, emva1288's value, ours with its 95 % interval, the relative
difference and the simulator's truth (where it exposes one). ``emva1288`` needs two shims on
numpy 2 / recent Pillow: ``np.asfarray`` (removed in numpy 2) and TIFF images (Pillow no longer
writes mode-"I" PNGs).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import dataclass

import numpy as np

from opu_hal.calibration.emva_sweep import acquisition_from_sweep, dark_current
from opu_hal.calibration.frames import Acquisition
from opu_hal.calibration.photon_transfer import PhotonTransfer, estimate

if not hasattr(np, "asfarray"):  # emva1288 1.0.2 calls np.asfarray, removed in numpy 2
    np.asfarray = lambda a, dtype=np.float64: np.asarray(a, dtype=dtype)

# bits, camera keywords for emva1288.camera.Camera (K in DN/e-; None: emva1288 picks it)
CAMERAS = {
    8: dict(temperature=40.0, seed=8),  # ADC-limited, K from emva1288's own search (0.1)
    10: dict(K=0.3, temperature=45.0, seed=10),  # ADC-limited
    12: dict(K=0.1665, u_esat=20000.0, temperature=40.0, seed=1012),  # full-well limited (20000 e- < 4095 DN / K)
}


@dataclass
class Comparison:
    bits: int
    reference: object  # emva1288 Results1288
    reference_at_argmax: object  # Results1288 with the saturation index forced to the largest variance
    acquisition: Acquisition
    ours: PhotonTransfer
    dark_current: object
    truth: dict[str, float]
    seconds_generate: float
    seconds_reference: float
    seconds_ours: float


def simulator_truth(cam) -> dict[str, float]:
    """What emva1288's camera simulator was built with, in our quantities' definitions: gain
    1/K; read noise sqrt(sigma2_dark_0 + 1/(12 K^2)) (the simulator adds a uniform dither of
    1 DN before rounding: 1/12 DN^2 of noise beyond the rounding that Sheppard's 1/12 removes);
    dark current; QE (the photon-weighted mean over wavelengths, equal photons per wavelength);
    clip level from the zero-exposure black level: (2^bits - 1 - offset) / K - dark_signal_0 at
    the ADC top, u_esat - dark_signal_0 at the full well, whichever is lower."""
    k = float(cam.K)
    adc = (cam.img_max - cam.blackoffset) / k - cam._dark_signal_0
    well = cam._u_esat - cam._dark_signal_0
    return {
        "gain": 1 / k,
        "read_noise": float(np.sqrt(cam._sigma2_dark_0 + 1 / (12 * k * k))),
        "dark_current": float(cam._u_i()),
        "qe": float(cam.qe.qe.mean()),
        "clip": float(min(adc, well)),
        "limited_by": "adc" if adc < well else "full_well",
    }


def compare(bits: int, steps: int = 100, size: int = 32, bootstrap: int = 400, seed: int | None = None) -> Comparison:
    """Generate one camera's dataset with emva1288, process it with emva1288 and with ours."""
    from emva1288.camera.dataset_generator import DatasetGenerator
    from emva1288.process import Data1288, LoadImageData, ParseEmvaDescriptorFile, Results1288
    from emva1288.process.routines import load_image

    start = time.perf_counter()
    generator = DatasetGenerator(
        steps=steps,
        L=4,
        image_format="tiff",
        bit_depth=bits,
        width=size,
        height=size,
        **{**CAMERAS[bits], **({} if seed is None else {"seed": seed})},
    )
    generated = time.perf_counter()
    parsed = ParseEmvaDescriptorFile(generator.descriptor_path, loglevel=logging.WARNING)
    loaded = LoadImageData(parsed.images, path=generator.outdir, loglevel=logging.WARNING)
    data = Data1288(loaded.data, loglevel=logging.WARNING).data
    reference = Results1288(data, loglevel=logging.WARNING)
    reference.index_u_ysat  # noqa: B018 (computed and cached, like every property the table prints)
    at_argmax = Results1288(data, index_u_ysat=int(np.argmax(data["temporal"]["s2_y"])), loglevel=logging.WARNING)
    processed = time.perf_counter()

    # the same files, per pixel: exposure (ns -> us) -> photons -> frames
    sweep = {
        texp / 1000: {
            p: np.stack([load_image(os.path.join(generator.outdir, f.replace("\\", os.sep))) for f in files])
            for p, files in by_photons.items()
        }
        for texp, by_photons in parsed.images["temporal"].items()
    }
    acq = acquisition_from_sweep(sweep, max_dn=2**bits - 1)
    ours = estimate(acq, bootstrap=bootstrap)
    rate = dark_current(acq, ours)
    done = time.perf_counter()
    return Comparison(
        bits,
        reference,
        at_argmax,
        acq,
        ours,
        rate,
        simulator_truth(generator.cam),
        generated - start,
        processed - generated,
        done - processed,
    )


def rows(c: Comparison) -> list[tuple[str, float, float, object, float | None]]:
    """(quantity, emva1288 at its own saturation index, emva1288 at the largest variance, our
    Estimate, the simulator's truth or None), in our units."""
    own, argmax, ours, t = c.reference, c.reference_at_argmax, c.ours, c.truth
    nan = float("nan")
    return [
        ("gain (e-/DN)", 1 / own.K, 1 / argmax.K, ours.gain, t["gain"]),
        ("read noise (e-)", own.sigma_d, argmax.sigma_d, ours.read_noise, t["read_noise"]),
        ("dark current (e-/s)", own.u_I_mean, argmax.u_I_mean, c.dark_current, t["dark_current"]),
        ("QE", own.QE / 100, argmax.QE / 100, ours.quantum_efficiency, t["qe"]),
        ("saturation point (e-)", own.u_e_sat, argmax.u_e_sat, ours.saturation_point, None),
        ("clip level (e-)", nan, nan, ours.saturation, t["clip"]),
    ]


def relative(value: float, reference: float) -> str:
    return f"{value / reference - 1:+.2%}" if np.isfinite(reference) else "-"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=0, help="instead of the table: coverage over this many seeds")
    args = parser.parse_args()
    if args.seeds:
        return coverage(args.seeds, args.steps, args.size)
    print(
        f"emva1288 1.0.2 simulator, exposure variation, {args.steps} steps, {args.size}x{args.size} pixels; "
        "emva1288 at its own saturation index (own) and at the largest variance (max var)"
    )
    print(
        "| bits | quantity | emva1288 own | emva1288 max var | ours [95% CI] | vs own | vs max var | truth | covered |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for bits in CAMERAS:
        c = compare(bits, args.steps, args.size)
        for name, own, argmax, est, truth in rows(c):
            cover = "-" if truth is None else ("yes" if est.lower <= truth <= est.upper else "no")
            print(
                f"| {bits} | {name} | {own:.4g} | {argmax:.4g} | {est.value:.4g} [{est.lower:.4g}, {est.upper:.4g}] | "
                f"{relative(est.value, own)} | {relative(est.value, argmax)} | "
                f"{'-' if truth is None else f'{truth:.4g}'} | {cover} |"
            )
        print(
            f"  {bits}-bit: saturation index emva1288 {c.reference.index_u_ysat}, largest variance "
            f"{c.reference_at_argmax.index_u_ysat}, ours {c.ours.fit_levels} fit levels; clip limited by "
            f"{c.ours.saturation_limited_by} (truth {c.truth['limited_by']}); simulator {c.seconds_generate:.2f} s, "
            f"emva1288 {c.seconds_reference:.2f} s, ours {c.seconds_ours:.2f} s"
        )


def coverage(seeds: int, steps: int, size: int) -> None:
    """Over ``seeds`` simulator seeds per camera: how often our 95 % intervals cover the truth, and
    the largest difference from emva1288 at the largest variance."""
    covered: dict[str, int] = {}
    worst: dict[str, float] = {}
    for seed in range(seeds):
        for bits in CAMERAS:
            for name, _, argmax, est, truth in rows(compare(bits, steps, size, bootstrap=300, seed=1000 + seed)):
                if np.isfinite(argmax):
                    worst[name] = max(worst.get(name, 0.0), abs(est.value / argmax - 1))
                if truth is not None:
                    covered[name] = covered.get(name, 0) + (est.lower <= truth <= est.upper)
    n = seeds * len(CAMERAS)
    print(f"{seeds} seeds x {len(CAMERAS)} cameras, {steps} steps, {size}x{size} pixels (seeds 1000+)")
    for name in worst.keys() | covered.keys():
        print(
            f"  {name:<22} max |ours/emva1288 - 1| {worst.get(name, float('nan')):7.3%}   95% CI covers truth "
            f"{covered.get(name, '-')}/{n if name in covered else '-'}"
        )


if __name__ == "__main__":
    main()
