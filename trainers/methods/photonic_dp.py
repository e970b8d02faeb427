"""Photonic DP-DFA (Ohana et al., paper 000, Algorithm 1, eq. 8-9), accounted with eq. 17.

Per layer ``l`` with input width ``n``: the input is offset and clipped element-wise,
``clip_c(offset_nu(h))`` with ``c = tau_h_max / sqrt(n)``, ``nu = tau_h_min / sqrt(n)`` (eq. 9), so
``tau_h_min <= ||h|| <= tau_h_max``; the projected error is scaled to norm ``<= tau_B``; the
update is ``(scale(B e) + g) * phi'(z) clip(offset(h))^T`` averaged over the batch (eq. 8).

The noise ``g`` is the device's own: the trainer reads the ``NoiseReport`` of each projection and
accounts with its ``std_lower`` (torch profile: ``--software-noise-std``, alias ``--sigma``, sets the software noise, the paper's
"DFA"/"TDFA" rows; simulated OPU: the operating point, ``--temperature-c``). The output layer,
which DFA updates with ``e`` itself, gets Gaussian noise of that same ``std_lower`` in software.

Doubts, kept visible (see also :class:`opu_hal.privacy.PhotonicDFAEvent`): the device adds its
noise *inside* the projection, so ``scale_{tau_B}`` acts on ``B e + g`` and shrinks ``g`` with the
signal, whereas eq. 8 adds ``g`` after scaling; and eq. 17 is infinite for tanh/sigmoid without a
positive ``gamma_min`` or when ``tau_h_min = 0``. The run is charged an unbounded event (epsilon
infinity, the only sound statement); eq. 17 composed per step is recorded as
``paper_claim_epsilon_eq17``, the paper's claim. ``dp-dfa --noise-source device`` is the sound photonic
mechanism.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from opu_hal.privacy import Accountant, ComposedEvent, PhotonicDFAEvent
from opu_hal.privacy.paper_events import PHOTONIC_DP_UNBOUNDED_REASON, UnboundedEvent
from opu_hal.randomness.secure_random import SecureGenerator

from ..core.clipping import clip_norm, clip_values, offset
from ..core.errors import TrainingConfigError
from ..core.feedback import DeviceFeedback
from .base import Method, MethodContext, StepOutput, forward_and_error, set_linear_grads

NO_BOUND = PHOTONIC_DP_UNBOUNDED_REASON  # why the charge is infinite (opu_hal.privacy.UnboundedEvent)


#: Why a torchrun run refuses photonic-dp (read through its registration, trainers.methods.registry).
DISTRIBUTED_REFUSAL = (
    "its privacy noise is the OPU's noise on the projection of the batch's error (paper 000, "
    "Ohana et al. bound); with W ranks every shard is projected by a different device with its own "
    "noise, a mechanism that bound does not cover"
)


class PhotonicDP(Method):
    name = "photonic-dp"
    uses_device = True
    private = True
    neighboring = "replace_one"
    sampling = "fixed"
    replayable = False
    default_profile = "torch-cpu"
    defaults = {"inputs": "unit"}

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        config, device = context.config, context.device
        if device is None:
            raise TrainingConfigError("photonic-dp needs a device profile")
        if config.software_noise_std is not None:
            if "noise_std" not in device.capabilities.settable:
                raise TrainingConfigError(
                    f"--software-noise-std (--sigma) sets software noise (option noise_std, e.g. torch profiles); "
                    f"{device.profile.label!r} is an optical device whose noise is set by its operating "
                    "point (--temperature-c)"
                )
            device.set_options(noise_std=config.software_noise_std)
        ternary = device.capabilities.input_kind == "binary" or config.ternarize
        self.feedback = DeviceFeedback(
            device, context.n_classes, model.hidden_widths, ternary=ternary, threshold=config.threshold
        )
        self.std_lower = device.noise_report().std_lower
        self.generator = SecureGenerator()  # the output layer's software noise
        self.paper_claim = Accountant("replace_one")  # eq. 17 composed per step: the paper's claim
        if config.target_epsilon is not None:
            raise TrainingConfigError(
                f"photonic-dp has no proven privacy bound ({NO_BOUND}), so no --target-epsilon can be "
                "met; train without a target to see the paper's claim, or use dp-dfa --noise-source device "
                "for a guarantee"
            )

    def _events_at(self, std_lower: float) -> list[PhotonicDFAEvent]:
        config = self.context.config
        act = self.model.activation
        events = []
        for index, layer in enumerate(self.model.layers):
            hidden = index < len(self.model.layers) - 1
            events.append(
                PhotonicDFAEvent(
                    n_l=layer.out_features,
                    batch_size=config.batch_size,
                    sigma=max(std_lower, 1e-300),
                    gamma_min=act.gamma_min if hidden else 1.0,
                    gamma_max=act.gamma_max if hidden else 1.0,
                    tau_h_min=config.tau_h_min,
                    tau_h_max=config.tau_h_max,
                    tau_b=config.tau_b,
                    columns=layer.in_features,
                    layers=1,
                )
            )
        return events

    def claimed_event(self) -> ComposedEvent:
        """One step as paper 000 accounts it: eq. 17 for every layer (a claim, not a bound)."""
        return ComposedEvent(tuple(self._events_at(self.std_lower)))

    def planned_event(self) -> UnboundedEvent:
        """What is charged: no proven bound, so infinity (see the module docstring)."""
        return UnboundedEvent(NO_BOUND)

    def after_step(self) -> None:
        if self.context.config.clip_pixels:  # eq. 17 assumes every layer's input clipped (eq. 9)
            self.paper_claim.step(self.claimed_event())

    def state_dict(self) -> dict[str, Any]:
        return {"paper_claim": self.paper_claim.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.paper_claim.load_state_dict(state["paper_claim"])

    def describe(self) -> dict[str, Any]:
        config = self.context.config
        claim = self.paper_claim.paper_claim_epsilon(config.delta) if self.paper_claim.steps else None
        return {
            "guarantee": "none: " + NO_BOUND,
            "paper_claim_epsilon_eq17": claim,
            "clipped_inputs": "every layer (eq. 9)"
            if config.clip_pixels
            else "hidden neurons only: the pixels are not clipped, so eq. 17's premise fails and no claim is recorded",
            "generator": f"device noise: the device's own; output layer: {self.generator.name}",
            "std_lower_accounted": self.std_lower,
            "tau_h_min": config.tau_h_min,
            "tau_h_max": config.tau_h_max,
            "tau_b": config.tau_b,
            "bound": "paper 000 eq. 17, per step",
        }

    def clip_input(self, h: torch.Tensor) -> torch.Tensor:
        """``clip_c(offset_nu(h))`` of eq. 9: every row's norm lands in [tau_h_min, tau_h_max]."""
        config = self.context.config
        n = h.shape[1]
        return clip_values(offset(h, config.tau_h_min / math.sqrt(n)), config.tau_h_max / math.sqrt(n))

    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        config = self.context.config
        opening = forward_and_error(self.model, x, y)
        trace, e = opening.trace, opening.error
        with torch.no_grad():
            m = config.batch_size
            projection = self.feedback.project(e)
            self.std_lower = min(self.std_lower, projection.noise.std_lower)
            derivative = self.model.activation.derivative
            deltas = [clip_norm(p, config.tau_b) * derivative(z) for p, z in zip(projection.slices, trace.preacts)]
            noise = self.generator.standard_normal(e.numel(), e.device).view_as(e).to(e.dtype)
            deltas.append(clip_norm(e, config.tau_b) + self.std_lower * noise)
            for index, (layer, delta, h) in enumerate(zip(self.model.layers, deltas, trace.inputs)):
                unclipped_pixels = index == 0 and not config.clip_pixels
                set_linear_grads(layer, delta / m, h if unclipped_pixels else self.clip_input(h))
        return StepOutput(
            opening.loss_sum,
            opening.correct,
            int(y.shape[0]),
            noise=projection.noise,
            privacy_event=UnboundedEvent(NO_BOUND),
        )
