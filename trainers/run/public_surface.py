"""What a private run may publish: the one declared list (DESIGN.md, "The public surface").

A differential-privacy guarantee covers everything a run publishes, not only the noisy updates.
Every field of a private run's result record, log line and progress bar is listed here with the
reason it may be published; :func:`public_record` keeps exactly these and drops the rest, so a
statistic of the training split reaches the record only if someone declares it here, in review.

Reasons:

- ``setting``: chosen by the user before seeing the data (hyperparameters, profile, versions).
- ``public size``: the training-split size ``n``. Under replace-one adjacency the neighbours share
  ``n``, so it is public by the relation. Under add/remove it is public only by the convention the
  run states (``privacy.dataset_size``): either the user declared a public size
  (``--public-dataset-size``; the run's shape, sampling rate and record then depend on it alone and
  ``n`` stays private) or the run says that it took ``n`` from the data and treats it as public.
- ``ledger``: a function of the privacy events charged, which depend on settings and public sizes
  only (``tests/test_public_surface.py`` checks it on neighbouring datasets).
- ``released``: computed from the released (noised, charged) updates and public data only:
  post-processing. The model is such a function, so metrics of the model on held-out data (the
  validation and test splits, which are not part of the private dataset) are released.
- ``timing``: wall-clock durations. Not covered by the guarantee (a side channel, as in every DP
  library): stated in the README's trust assumptions.

Not published by a private run: training-split loss and accuracy (a per-epoch statistic of the
secret batches, never charged; issue 27), gradient alignment, the spread of a shot-noise device's
std across projections (it follows the projected signal), secrets (keys live in checkpoints,
which are declared as secret as the data).
"""

from __future__ import annotations

from typing import Any

SETTING, PUBLIC_SIZE, LEDGER, RELEASED, TIMING = "setting", "public size", "ledger", "released", "timing"

#: Top-level record fields of a private run and why each may be published.
RECORD_FIELDS: dict[str, str] = {
    "method": SETTING,
    "profile": SETTING,
    "hyperparameters": SETTING,
    "torch": SETTING,
    "dataset": PUBLIC_SIZE,
    "sampling": PUBLIC_SIZE,
    "epochs": RELEASED,
    "noise_reports": SETTING,
    "privacy": LEDGER,
    "final": RELEASED,
    "distributed": SETTING,
}

#: Fields of ``dataset``: sizes of the splits and what the network reads.
DATASET_FIELDS: dict[str, str] = {
    "name": SETTING,
    "features": SETTING,
    "n_features": SETTING,
    "train": PUBLIC_SIZE,
    "validation": RELEASED,
    "test": RELEASED,
}

#: Fields of one per-epoch entry of a private run.
EPOCH_FIELDS: dict[str, str] = {
    "epoch": SETTING,
    "steps": LEDGER,
    "epsilon": LEDGER,
    "claimed_epsilon": LEDGER,
    "validation_loss": RELEASED,
    "validation_accuracy": RELEASED,
    "test_loss": RELEASED,
    "test_accuracy": RELEASED,
    "epoch_time_s": TIMING,
}

#: Fields of ``final`` of a private run.
FINAL_FIELDS: dict[str, str] = {
    "test_accuracy": RELEASED,
    "validation_accuracy": RELEASED,
    "wall_time_s": TIMING,
    "epochs_completed": LEDGER,
    "steps": LEDGER,
    "epsilon": LEDGER,
    "delta": SETTING,
    "claimed_epsilon": LEDGER,
    "claim": SETTING,
    "camera_frames": LEDGER,
    "camera_seconds": LEDGER,
}

#: Fields of a noise-report group: the operating point the device ran at (a setting or a
#: calibration), and how many projections used it (a count fixed by the run's shape).
NOISE_REPORT_FIELDS: dict[str, str] = {"operating_point": SETTING, "count": PUBLIC_SIZE}

#: Record fields that are post-processing of the releases or timings: they differ between two
#: runs of the same settings even on the same data, so a neighbour test compares everything else.
VARYING = frozenset({RELEASED, TIMING})


def _keep(values: dict[str, Any], declared: dict[str, str]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if key in declared}


def public_record(record: dict[str, Any]) -> dict[str, Any]:
    """The part of a private run's ``record`` the declared surface allows, nothing else."""
    out = _keep(record, RECORD_FIELDS)
    out["dataset"] = _keep(record["dataset"], DATASET_FIELDS)
    out["epochs"] = [_keep(epoch, EPOCH_FIELDS) for epoch in record["epochs"]]
    out["final"] = _keep(record["final"], FINAL_FIELDS)
    out["noise_reports"] = [_keep(group, NOISE_REPORT_FIELDS) for group in record["noise_reports"]]
    return out


def invariant_part(record: dict[str, Any]) -> dict[str, Any]:
    """The fields of a public record that must be identical on neighbouring datasets: all but the
    released metrics and the timings (:data:`VARYING`)."""

    def fixed(values: dict[str, Any], declared: dict[str, str]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if declared.get(k, SETTING) not in VARYING}

    out = fixed(record, RECORD_FIELDS)
    out["dataset"] = fixed(record["dataset"], DATASET_FIELDS)
    out["epochs"] = [fixed(epoch, EPOCH_FIELDS) for epoch in record["epochs"]]
    out["final"] = fixed(record["final"], FINAL_FIELDS)
    out["noise_reports"] = record["noise_reports"]
    return out


def epoch_summary(epoch: dict[str, Any]) -> str:
    """A private run's per-epoch log line: built from the public epoch record alone."""
    text = (
        f"epoch {epoch['epoch']:>3}  val {epoch['validation_accuracy']:.4f}  "
        f"test {epoch['test_accuracy']:.4f}  {epoch['epoch_time_s']:.1f}s"
    )
    if "epsilon" in epoch:
        text += f"  eps {epoch['epsilon']:.4g}"
    if "claimed_epsilon" in epoch:  # a published claim's (e.g. DP-ULR's controller), not a guarantee
        text += f"  claimed eps {epoch['claimed_epsilon']:.4g} (not a guarantee)"
    return text
