"""DP-ULR (Feng et al., paper 004; paper 001 is a shorter text of it): forward learning with
likelihood-ratio gradient proxies (eq. 4), batches sampled with rejection (Definition 3.4),
accounted by the SRGM bound (Theorems 3.5-3.6) with ``N-bar = n - 1`` (the smaller neighbour
under add/remove, Theorem B.1 needs ``|D| >= N-bar`` for both datasets).

Two modes (``--opt mode=...``):

- ``controller`` (the paper as stated): the forward-noise std of each layer is chosen by the
  privacy controller (eq. 7) so that the *pre-clipping* covariance of the batch's proxy sum has
  smallest eigenvalue ``>= sigma_0^2 C^2``; where Assumption 3.3 fails (rank-deficient
  covariance, e.g. always-black pixels) the remediation of Appendix A.4 adds Gaussian noise in the
  eigenbasis to lift every direction to ``sigma_0^2 C^2``. Accounted as SRGM with ``sigma_0``.
  Doubts (README, "DP-ULR"): (i) the covariance the controller controls is that of the proxies
  *before* clipping (Proposition 3.2, a small-sigma approximation), while the released sum is of
  *clipped* proxies: each has norm <= C, so the clipped sum's covariance has trace <= |B| C^2 and
  smallest eigenvalue <= |B| C^2 / d; reaching sigma_0^2 C^2 would need |B| >= sigma_0^2 d
  (d ~ 1e5 parameters here), so the eq. 7 variance is not there after clipping; (ii) the proxy
  is treated as Gaussian (central limit in K, Appendix A.3) and Theorem B.1 treats an added
  example as a pure translation although it also brings its own noise (covariance); (iii) the
  other direction of the divergence (eq. 29) is asserted "similar", not shown. So this mode is
  charged :class:`opu_hal.privacy.ControllerClaimEvent` (Theorem 3.5's curve, ``is_guarantee =
  False``): the run plans its noise, stops at a target and reports ``claimed_epsilon`` from the
  paper's claim, and no guaranteed epsilon exists for it (``Accountant.get_epsilon`` refuses).
- ``gaussian`` (default; the sound alternative): same proxies, clipped to overall norm ``C`` and
  summed, then Gaussian noise of std ``sigma_0 C`` is added to the sum: a sampled Gaussian
  mechanism whatever the proxies' distribution (the forward noise is data-independent extra
  randomness). ``--sampling rejection`` accounts it by SRGM (Theorem 3.5, conditions enforced),
  ``--sampling poisson`` (the default in this mode) by the library's Poisson subsampled Gaussian
  (no rejection). Why Poisson by default (issue 35): Theorem 3.5 holds only for ``sigma_0 >= 4``,
  so a planner aiming at epsilon 8 was floored at ``sigma_0 = 4`` and the run spent 0.66 of it.

Forward noise from the optical device (``--noise-source device``) is refused: the estimator
needs the exact density of the forward noise (its score ``z / sigma^2``, eq. 4 and Theorem A.1),
while camera counts are discrete (Poisson shot noise, ADC lattice) with an input-dependent
variance, so ``z / sigma^2`` is not the score of the noise actually applied and eq. 7's
variance argument has no density to stand on; and the controller's noise would have to be
secret and handled on the lattice (DESIGN.md, "Discrete noise"), which the Skellam mechanism
(issue 12) does for additive privacy noise, not for a likelihood-ratio estimator.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from opu_hal.privacy import ControllerClaimEvent, Event, PoissonGaussianEvent, SampledWithRejectionGaussianEvent
from opu_hal.randomness.draws import torch_normal
from opu_hal.randomness.secure_random import new_secret_key

from ..core import ulr
from ..core.errors import TrainingConfigError
from ..core.options import Option, choice, count, parse_options, positive
from ..core.sampling import RANDOMGEN_STREAM, default_stream, keyed_draws, keyed_draws_name
from .base import Method, MethodContext, StepOutput

OPTIONS = {
    "mode": choice("gaussian", "gaussian", "controller"),
    "repeats": count(8),
    "forward_std": positive(None),
    "min_batch": count(None),
    "remediation": Option(bool, True),
    "baseline": Option(bool, None),
}

#: Defaults by mode (issue 35): the sound gaussian mode learns with the clean-loss baseline and a
#: forward std chosen on the validation split (full FashionMNIST, epsilon 8); the controller keeps
#: paper 004's estimator (no baseline) and the remediation's fallback std.
MODE_DEFAULTS = {
    "gaussian": {"baseline": True, "forward_std": 0.5},
    "controller": {"baseline": False, "forward_std": 0.1},
}

DEVICE_REFUSAL = (
    "dp-ulr: --noise-source device is refused: the likelihood-ratio estimator (paper 004, eq. 4) "
    "needs the exact density of the forward noise (score z / sigma^2), but camera noise is discrete "
    "(Poisson shot noise on the ADC lattice) with an input-dependent variance, and the controller's "
    "noise would have to be secret lattice noise; use the default software forward noise"
)

#: Why make_private and a torchrun run refuse dp-ulr (read through its registration).
API_REFUSAL = (
    "its update is not a function of the user's backward pass: the likelihood-ratio proxies "
    "(paper 004, eq. 4) need K extra forward passes per layer with secret noise injected at that "
    "layer and the per-example loss evaluated on each, i.e. the loss as a function and a re-entrant "
    "forward from any layer, which a user's loss.backward() does not give"
)
DISTRIBUTED_REFUSAL = (
    "its rejection-sampled batches and repeated forward passes with noise on the loss (paper 004) are "
    "accounted for one process that sees the whole batch; the split release is not analysed"
)


def default_min_batch(expected: float) -> int:
    """``N_B`` slightly below the mean batch ``q N`` (section 4.1): two binomial stds below."""
    return max(1, int(math.floor(expected - 2 * math.sqrt(expected))))


class DPULR(Method):
    cuda_ready = False  # CPU only for now: its estimator draws on CPU generators
    name = "dp-ulr"
    needs_noise_choice = True
    # Paper 004, section 4.2: MLP 128-64-32-10 GELU, Adam lr 0.01, C = 1, batch 500 (q = 1/120).
    # Paper 004's MLP and batch; issue 35: ScatterNet features, Adam 3e-3 with a cosine schedule and a
    # weight average (decay 0.99), chosen on the validation split (docs/reproductions.md).
    defaults = {
        "inputs": "unit",
        "optimizer": "adam",
        "lr": 3e-3,
        "hidden": (128, 64, 32),
        "activation": "gelu",
        "batch_size": 500,
        "features": "scatter",
        "lr_schedule": "cosine",
        "weight_average": 0.99,
    }
    private = True
    neighboring = "add_remove"
    sampling = "poisson"  # the default mode's; the controller samples with rejection

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        config = context.config
        self.secret_key = new_secret_key()  # keys the per-step noise streams; never recorded
        self.noise_stream = default_stream()  # compiled ChaCha20 where Numba runs (kept in checkpoints)
        if config.noise_source == "device":
            raise TrainingConfigError(DEVICE_REFUSAL)
        self.options = parse_options(self.name, config.extra, OPTIONS)
        for key, value in MODE_DEFAULTS[self.options["mode"]].items():
            if self.options[key] is None:
                self.options[key] = value
        # Default: rejection (paper 004) for the controller, Poisson for the sound gaussian mode, whose
        # SRGM bound would floor sigma_0 at 4 and leave most of a target budget unspent (issue 35).
        self.sampling = config.sampling or ("rejection" if self.options["mode"] == "controller" else "poisson")
        if self.sampling not in ("rejection", "poisson"):
            raise TrainingConfigError(f"dp-ulr: --sampling {self.sampling!r}: choose rejection or poisson")
        if self.options["mode"] == "controller" and self.sampling != "rejection":
            raise TrainingConfigError(
                "dp-ulr: --opt mode=controller is paper 004's mechanism and samples with rejection; drop --sampling"
            )
        self.claim = ControllerClaimEvent.claim_source if self.options["mode"] == "controller" else None
        n = context.dataset_size
        self.sampling_rate = config.batch_size / n
        self.min_batch = (
            self.options["min_batch"] or default_min_batch(config.batch_size) if self.sampling == "rejection" else 0
        )
        if self.sampling == "rejection" and self.min_batch > self.sampling_rate * (n - 1):
            raise TrainingConfigError(
                f"dp-ulr: --opt min_batch={self.min_batch} must be <= q (n - 1) = "
                f"{self.sampling_rate * (n - 1):.1f} (Theorem 3.5: N_B <= q N-bar, N-bar = n - 1)"
            )
        self.noise_multiplier: float | None = None

    # -- accounting ------------------------------------------------------------------------------
    def event_for(self, sigma0: float) -> Event:
        """Theorem 3.5 (SRGM) with ``N-bar = n - 1`` (the controller's: the same curve, as a claim), or
        the Poisson sampled Gaussian."""
        if self.sampling == "rejection":
            kind = ControllerClaimEvent if self.claim else SampledWithRejectionGaussianEvent
            return kind(self.sampling_rate, sigma0, self.min_batch, self.context.dataset_size - 1)
        return PoissonGaussianEvent(self.sampling_rate, sigma0)

    def set_noise_multiplier(self, z: float) -> None:
        self.event_for(z)  # refuses sigma_0 outside Theorem 3.5's range now, not at the first step
        self.noise_multiplier = float(z)

    def planned_event(self) -> Event:
        assert self.noise_multiplier is not None
        return self.event_for(self.noise_multiplier)

    def describe(self) -> dict[str, Any]:
        """Settings and the ledger's constants only: nothing a step computes from its batch (the
        batch size under Poisson sampling, the controller's forward stds from the batch's second
        moment, the lifted directions from its spectrum) is released uncharged (issue 27)."""
        mode = self.options["mode"]
        guarantee = (
            "sampled Gaussian mechanism on the clipped sum (sound)"
            if mode == "gaussian"
            else "none: the epsilon is paper 004's claim (eq. 7 controls the pre-clipping covariance, "
            "not the noise on the released clipped sum; docs/trainers.md, DP-ULR)"
        )
        return {
            "mode": mode,
            "guarantee": guarantee,
            "generator": keyed_draws_name(self.noise_stream),
            "noise_multiplier": self.noise_multiplier,
            "sigma_0": self.noise_multiplier,
            "clip_norm": self.context.config.clip_norm,
            "sampling": self.sampling,
            "sampling_rate": self.sampling_rate,
            "min_batch": self.min_batch,
            "min_dataset_size": self.context.dataset_size - 1,
            "repeats": self.options["repeats"],
            "forward_std": self.options["forward_std"],
            "remediation": self.options["remediation"],
            "baseline": self.options["baseline"],
        }

    # -- one step --------------------------------------------------------------------------------
    @property
    def normalizer(self) -> float:
        """Algorithm 1 divides the sum by ``N_B``; the Poisson variant by the expected batch."""
        return float(self.min_batch if self.sampling == "rejection" else self.context.config.batch_size)

    def _forward_std(self, layer_index: int, moment: torch.Tensor | None) -> tuple[float, Any]:
        """The forward-noise std of one layer: fixed, or the largest eq. 7 allows (``forward_std``
        where eq. 7 allows none, i.e. Assumption 3.3 fails and the remediation takes over)."""
        cap = self.options["forward_std"]
        if moment is None:
            return cap, None
        eigenvalues, eigenvectors = torch.linalg.eigh(moment)
        sigma0 = self.noise_multiplier
        if sigma0 is None:
            raise TrainingConfigError("dp-ulr: the forward-noise controller needs the noise multiplier (eq. 7)")
        allowed = ulr.controller_std(
            float(eigenvalues[0]), self.options["repeats"], self.context.config.clip_norm, sigma0
        )
        if allowed <= 0 and not self.options["remediation"]:
            raise TrainingConfigError(
                f"dp-ulr: Assumption 3.3 fails at step {self.current_step}, layer {layer_index + 1}: the batch "
                f"covariance is rank-deficient (lambda_min = {float(eigenvalues[0]):.3g}); allow the "
                "remediation of Appendix A.4 (--opt remediation=on)"
            )
        return (allowed if allowed > 0 else cap), (eigenvalues, eigenvectors)

    def state_dict(self) -> dict[str, Any]:
        # secret: checkpoints only, for an exact replay on the stream the steps were drawn from
        return {"secret_key": self.secret_key, "noise_stream": self.noise_stream}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.secret_key = state["secret_key"]
        self.noise_stream = state.get("noise_stream", RANDOMGEN_STREAM)  # older checkpoints: randomgen's

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        config, options = self.context.config, self.options
        controller = options["mode"] == "controller"
        sigma0, clip = self.noise_multiplier, config.clip_norm
        assert sigma0 is not None
        forward = keyed_draws(self.noise_stream, self.secret_key, "forward", self.current_step)
        # the controller's remediation draws float64 normals, which only randomgen's stream gives
        noise_stream = RANDOMGEN_STREAM if controller else self.noise_stream
        noise = keyed_draws(noise_stream, self.secret_key, "noise", self.current_step)
        with torch.no_grad():
            trace = self.model.forward_trace(x)
            clean = F.cross_entropy(trace.logits, y, reduction="none")
            factors, stds, spectra = [], [], []
            for index in range(len(self.model.layers)):
                moment = ulr.second_moment(trace.inputs[index], clean) if controller else None
                std, spectrum = self._forward_std(index, moment)
                z, losses = ulr.noisy_losses(self.model, trace, index, y, std, options["repeats"], forward)
                if options["baseline"]:  # E[z L0] = 0: same mean, smaller variance (not in eq. 4)
                    losses = losses - clean
                factors.append(ulr.lr_factor(z, losses, std))
                stds.append(std)
                spectra.append(spectrum)
            sums = ulr.clipped_sum(factors, trace.inputs, clip)
            for layer, total, std, spectrum in zip(self.model.layers, sums, stds, spectra):
                grad = torch.cat([total.weight, total.bias[:, None]], dim=1)
                if not controller:
                    grad = grad + sigma0 * clip * torch_normal(noise, grad.shape, grad.dtype)
                elif options["remediation"]:
                    assert isinstance(noise, np.random.Generator)  # the controller's: randomgen's (float64)
                    eigenvalues, eigenvectors = spectrum
                    variances = ulr.remediation_variances(eigenvalues, std, options["repeats"], clip, sigma0)
                    grad = grad + ulr.remediation_noise(eigenvectors, variances, layer.out_features, noise)
                grad = grad / self.normalizer
                layer.weight.grad = grad[:, :-1].contiguous()
                layer.bias.grad = grad[:, -1].contiguous()
        correct = int((trace.logits.argmax(1) == y).sum())
        return StepOutput(float(clean.sum()), correct, int(y.shape[0]), privacy_event=self.planned_event())
