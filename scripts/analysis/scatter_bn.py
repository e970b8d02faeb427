"""DP-SGD on ScatterNet coefficients standardised per channel by a private release of the training set's
channel means and mean squares (Tramer and Boneh's frozen batch norm, their ``--input_norm=BN``), in
place of the per-image group norm.

    python -m scripts.analysis.scatter_bn train --dataset mnist --features scatter --center-features \
        --centering-noise 8 ...

Runs ``opu-hal train`` (every argument is passed on) with the ScatterNet features' group norm left out
(the raw coefficients, cached under their own version) and the centring (``--center-features``, noise
multiplier ``sigma = --centering-noise``) replaced by this release:

- each training image's coefficients are averaged over the 7 x 7 positions of each channel, a K-vector
  ``m_i`` (K = 81), and so are their squares, ``s_i``;
- each is clipped to an L2 threshold (``T_m``, ``T_s``) and summed; each sum is released with Gaussian
  noise of standard deviation ``sigma T`` (one image moves a sum by at most ``T`` under add/remove, ``2 T``
  under replace-one) and divided by the public training-set size, giving ``m`` and ``s``;
- every split becomes ``(x - m_c) / sqrt(max(s_c - m_c^2, 0) + 1e-5)`` per channel ``c`` (``nn.BatchNorm2d``'s
  epsilon, as in their code).

The two releases are charged as one Gaussian event of multiplier ``sigma / sqrt(2)``: two Gaussian
mechanisms of multiplier ``sigma`` compose to exactly that (Dong, Roth and Su 2022, Corollary 3.3).
The thresholds are the median norms of ``m_i`` and ``s_i`` over the test split, public by the project's
convention (:mod:`trainers.run.public_surface`); Tramer and Boneh take the training split's medians
without charging them. (docs/records.md: measured at epsilon 3.)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import torch

import trainers.core.feature_cache as feature_cache
import trainers.core.scattering as scattering
import trainers.run.dataset as run_dataset
from opu_hal.privacy import GaussianEvent
from opu_hal.randomness.secure_random import SecureGenerator
from trainers.cli import main as cli_main
from trainers.core.centering import Centering
from trainers.core.data import Dataset, Split

CHANNELS = 81  # J = 2, L = 8
EPS = 1e-5
_scatter = run_dataset.cached_scatter_features
_thresholds: dict[str, float] = {}


def raw_coefficients(coefficients: torch.Tensor, groups: int = scattering.GROUPS, eps: float = 1e-6) -> torch.Tensor:
    """The coefficients flattened channel by channel, not normalised (replaces the group norm)."""
    return coefficients.reshape(len(coefficients), -1)


def channel_moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each image's per-channel mean and mean square over the positions, ``(n, K)`` each."""
    per_channel = x.reshape(len(x), CHANNELS, -1).double()
    return per_channel.mean(2), per_channel.square().mean(2)


def clipped_sum(rows: torch.Tensor, threshold: float) -> torch.Tensor:
    """``sum_i r_i min(1, T / ||r_i||)``: each row moves the sum by at most ``T``."""
    norms = rows.norm(dim=1, keepdim=True).clamp_min(1e-300)
    return (rows * torch.clamp(threshold / norms, max=1.0)).sum(0)


def loader(data: Dataset, log: Callable[[str], None], progress: bool = True) -> Dataset:
    """The raw coefficients of ``data``; sets the thresholds from the (public) test split."""
    features = _scatter(data, log=log, progress=progress)
    means, squares = channel_moments(features.test.x)
    _thresholds["mean"], _thresholds["square"] = float(means.norm(dim=1).median()), float(squares.norm(dim=1).median())
    log(f"channel norm: thresholds T_m {_thresholds['mean']:.4g}, T_s {_thresholds['square']:.4g} (test split medians)")
    return features


def release_channel_norm(
    x: torch.Tensor, private: bool, noise_multiplier: float, public_size: int, neighboring
) -> Centering:
    """The release of the module docstring; ``mean`` holds the per-feature shift and scale, ``(2, d)``."""
    means, squares = channel_moments(x.cpu())
    if private:
        generator = SecureGenerator()
        factor = 2.0 if neighboring == "replace_one" else 1.0
        released = []
        for rows, threshold in ((means, _thresholds["mean"]), (squares, _thresholds["square"])):
            noise = generator.standard_normal(CHANNELS).double()
            released.append(
                (clipped_sum(rows, threshold) + noise_multiplier * factor * threshold * noise) / public_size
            )
        m, s = released
        event: GaussianEvent | None = GaussianEvent(noise_multiplier / math.sqrt(2))
        name: str | None = generator.name
        std: float | None = noise_multiplier * factor * _thresholds["mean"]  # on the means' sum
    else:
        m, s, event, name, std = means.mean(0), squares.mean(0), None, None, None
    scale = 1 / torch.sqrt((s - m.square()).clamp_min(0) + EPS)
    positions = x.shape[1] // CHANNELS
    stacked = torch.stack([m.repeat_interleave(positions), scale.repeat_interleave(positions)]).to(x.dtype)
    return Centering(stacked, _thresholds["mean"], noise_multiplier if private else None, std, event, name)


def channel_normalized(data: Dataset, shift_and_scale: torch.Tensor) -> Dataset:
    """Every split standardised per channel by the released moments (post-processing)."""
    shift, scale = shift_and_scale

    def normalize(split: Split) -> Split:
        return Split((split.x - shift.to(split.x)) * scale.to(split.x), split.y)

    return data.with_splits(normalize(data.train), normalize(data.validation), normalize(data.test))


if __name__ == "__main__":
    if "--center-features" not in sys.argv:
        sys.exit("scatter_bn: pass --center-features (the channel norm replaces the centring's release)")
    scattering.group_normalize = raw_coefficients
    feature_cache.SCATTER_VERSION = f"{feature_cache.SCATTER_VERSION}-raw"
    run_dataset.cached_scatter_features = loader
    run_dataset.release_for_run = release_channel_norm
    run_dataset.centered = channel_normalized
    sys.exit(cli_main(sys.argv[1:]))
