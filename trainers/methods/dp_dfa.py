"""DP-DFA (Lee and Kifer, paper 002, Algorithm 1, sections 4.1-4.2).

Feedback matrices ``B^{l+1}`` are Gaussian rescaled to spectral norm ``beta``; the error is
clipped to ``tau_e`` and each layer's input to ``tau_h`` (L2, per example); Gaussian noise of std
``noise_std = z * Delta`` is added to every averaged update (lines 15-16); minibatches of fixed size
``m`` are drawn without replacement and accounted by ``FixedSizeGaussianEvent`` (replace-one).

Sensitivity (section 4.2), per layer: ``2 gamma_l beta_{l+1} tau_e sqrt(1 + tau_h^2) / m``, and
``Delta = 2 gamma beta tau_e sqrt((1 + tau_h^2) L) / m`` for ``L`` equal terms. Doubt, kept
visible: the output layer is updated with ``e`` itself (``B = I``, no ``phi'``), whose term is
``2 tau_e sqrt(1 + tau_h^2) / m``, larger than the formula's when ``gamma beta < 1``. Here the
output layer's update is multiplied by ``gamma beta`` so that every layer has the same term (the
equal allocation the paper uses for its hybrid networks) and the formula holds as stated.

``--sampling poisson`` (issue 35) samples each example with probability ``q = m / N`` and divides
the clipped sum by the expected batch ``m``, as DP-SGD does: under add/remove adjacency one
example adds or removes its own clipped term, so the factor 2 of replace-one goes and each step is
the Poisson subsampled Gaussian (``PoissonGaussianEvent``). At equal epsilon this carries 2.9 to 4
times less absolute noise than the paper's fixed-size batches accounted under replace-one
(``python -m scripts.analysis.dfa_sampling_noise``), the same relation and accounting as DP-SGD.
With device noise each step is the lattice event under Poisson sampling (Zhu and Wang 2019,
Theorem 6: ``PoissonRoundedSkellamEvent``, ``PoissonSkellamEvent``, ``PoissonDigitizedNoiseEvent``).

Hybrid BP/DFA for a CNN (section 4, "Handling convolutional layers"; :mod:`trainers.core.cnn`): the
linear layers of the head get the DP-DFA updates above, and the conv layers ``1..l`` the gradient of
``sum_i <z_i^{l+1}, delta z_i^{l+1}>`` by backpropagation from the first linear layer, with
``delta z^{l+1} = (B^{l+2} e) * phi'(z^{l+1})`` its DFA signal (``gamma beta e`` when the head has
no hidden layer), clipped per example and layer to ``tau_c = gamma beta tau_e sqrt(1 + tau_h^2)``,
so that every layer's term is the same ``2 tau_c / m`` (the paper's ``C / sqrt(L)`` each).

Noise (issue 12): ``noise_source="software"`` adds Gaussian noise of std ``noise_std = z * Delta``
from the secure generator (:class:`opu_hal.privacy.mechanisms.GaussianRelease`), accounted by
``FixedSizeGaussianEvent``. ``noise_source="device"`` releases the update through the lattice
Skellam mechanism (:mod:`opu_hal.privacy.skellam`): scaled to the lattice, randomly rounded, plus
integer photo-electron counts drawn from the device (:class:`opu_hal.privacy.mechanisms.SkellamRelease`),
accounted by ``FixedSizeSkellamEvent`` at the Poisson mean the device guarantees as a lower bound.
A device whose camera is digitized at another gain (``capabilities.digitized_noise``, not
``privacy_noise``; issue 36) releases through the same per-coordinate lattice with sums of digitized
reads (:class:`opu_hal.privacy.mechanisms.DigitizedRelease`), accounted exactly by
``FixedSizeDigitizedNoiseEvent`` over the camera's (calibrated) box, the reads per count planned
by the accountant (:mod:`opu_hal.privacy.digitized_lattice`).
"""

from __future__ import annotations

from typing import Any

import torch

from opu_hal.privacy import Event
from opu_hal.privacy.digitized_lattice import DigitizedLattice
from opu_hal.privacy.events import Neighboring
from opu_hal.privacy.mechanisms import DigitizedRelease, GaussianRelease, SkellamRelease
from opu_hal.privacy.skellam import SkellamLattice
from opu_hal.randomness.secure_random import SecureGenerator

from ..core.clipping import clip_norm
from ..core.cnn import CNN
from ..core.errors import TrainingConfigError
from ..core.per_example import (
    clip_scale,
    conv_norms_and_sums,
    layer_bias,
    linear_update_into,
    weights_and_biases,
)
from ..core.sampling import step_generator
from .base import (
    GaussianNoiseMethod,
    MethodContext,
    RunConfig,
    StepOutput,
    batch_stats,
    forward_and_error,
    output_error,
    set_linear_grads,
)
from .dfa_noise import device_lattice, dp_dfa_release, step_event
from .dfa_sensitivity import DFASensitivity, spectral_feedback
from .private_defaults import DP_DFA_DEFAULTS

SAMPLINGS = ("fixed", "poisson")


def _grad(p: torch.Tensor) -> torch.Tensor:
    """``p.grad`` that the step has just set (a missing one is a bug: it would go unreleased)."""
    if p.grad is None:
        raise RuntimeError(f"dp-dfa: a parameter of shape {tuple(p.shape)} has no update to release")
    return p.grad


class DPDFA(GaussianNoiseMethod):
    name = "dp-dfa"
    private = True
    single_release = True  # one noisy release per step, through release() (the audit hooks it)
    neighboring: Neighboring = "replace_one"
    sampling = "fixed"
    relation_follows_sampling = True
    trains_cnn = True  # the hybrid BP/DFA network of section 4
    # Paper 002, section 5 has Adam (lr 1e-3), beta = 0.9, tau_e = 0.1, 128-256 sigmoid, batch 128: at
    # epsilon 3 to 8 on FashionMNIST that ends at chance (10 %) in 1 to 3 epochs (gamma = 1/4 and batches
    # of 128 leave the noise far above the signal). Defaults that learn (trainers.methods.private_defaults).
    defaults = DP_DFA_DEFAULTS

    @classmethod
    def profile_for(cls, config: RunConfig) -> str | None:
        if config.profile is None and config.noise_source == "device":
            return "opu-sim-dp"
        return super().profile_for(config)

    def __init__(self, model, context: MethodContext) -> None:
        super().__init__(model, context)
        config = context.config
        self.sampling = config.sampling or "fixed"
        if self.sampling not in SAMPLINGS:
            raise TrainingConfigError(
                f"dp-dfa: --sampling {self.sampling!r}: choose fixed (paper 002, Algorithm 1; "
                "replace-one) or poisson (add/remove)"
            )
        self.neighboring = self.neighboring_for(config)
        generator = step_generator(config.seed, "feedback", 0)
        dfa_widths = [fc.out_features for fc in model.fcs] if isinstance(model, CNN) else model.hidden_widths
        self.feedback = [spectral_feedback(width, context.n_classes, config.beta, generator) for width in dfa_widths]
        convs = len(model.convs) if isinstance(model, CNN) else 0
        dfa_activation = model.head_activation if isinstance(model, CNN) else model.activation
        bounds = DFASensitivity(
            dfa_activation.gamma_max,
            config.beta,
            config.tau_e,
            config.tau_h,
            config.batch_size,
            len(dfa_widths),
            convs,
            replace_one=self.sampling == "fixed",
        )
        self.output_scale, self.conv_clip = bounds.output_scale, bounds.conv_clip
        self.layer_sensitivities = bounds.terms
        self.sensitivity = bounds.total
        self.noise_multiplier: float | None = None
        self.dimension = sum(p.numel() for p in model.parameters())
        self.generator = SecureGenerator()
        self.mechanism: GaussianRelease | SkellamRelease | DigitizedRelease | None = None
        self.lattice: SkellamLattice | DigitizedLattice | None = None
        if config.noise_source == "device":
            self.lattice = device_lattice(
                context.device, self.dimension, self.sensitivity, config.lattice_resolution, config.rounding_analysis
            )
            self.replayable = False  # device counts cannot be drawn again

    def to(self, device: torch.device) -> DPDFA:
        self.feedback = [b.to(device) for b in self.feedback]
        return self

    # -- accounting ----------------------------------------------------------------------------
    def event_for(self, z: float) -> Event:
        size, batch = self.context.dataset_size, self.context.config.batch_size
        return step_event(self.lattice, size, batch, z, self.sampling)

    def set_noise_multiplier(self, z: float) -> None:
        self.noise_multiplier = float(z)
        self.mechanism = dp_dfa_release(z, self.sensitivity, self.lattice, self.context.device, self.generator)

    @property
    def noise_std(self) -> float:
        """Std of the noise on each averaged update coordinate (``z * Delta``; times ``(k + 1) / k``
        on the lattice)."""
        assert self.mechanism is not None
        return self.mechanism.noise_std

    def describe(self) -> dict[str, Any]:
        mechanism = self.mechanism
        info: dict[str, Any] = {
            "noise_multiplier": self.noise_multiplier,
            "sensitivity": self.sensitivity,
            "layer_sensitivities": self.layer_sensitivities,
            "noise_std": self.noise_std,
            "noise_source": self.context.config.noise_source,
            "sampling": self.sampling,
            "mechanism": mechanism.mechanism if mechanism else None,
            "generator": self.generator.name,
        }
        if isinstance(self.lattice, SkellamLattice) and isinstance(mechanism, SkellamRelease):
            info["lattice"] = {
                "dimension": self.lattice.dimension,
                "resolution": self.lattice.resolution,
                "rounding_analysis": self.lattice.analysis,
                "gamma": self.lattice.gamma,
                "l2_sensitivity": self.lattice.l2_sensitivity,
                "l1_sensitivity": self.lattice.l1_sensitivity,
                "poisson_mean_accounted": mechanism.poisson_mean,
            }
            if mechanism.distribution is not None:
                info["device_noise"] = mechanism.distribution.to_dict()
        if isinstance(self.lattice, DigitizedLattice) and isinstance(mechanism, DigitizedRelease):
            law = self.lattice.law
            info["lattice"] = {
                "dimension": self.lattice.lattice.dimension,
                "resolution": self.lattice.lattice.resolution,
                "rounding_analysis": "per-coordinate",
                "gamma": self.lattice.lattice.gamma,
                "l2_sensitivity": self.lattice.lattice.l2_sensitivity,
                "reads_per_count_accounted": mechanism.reads,
                "camera_box": {
                    "mean_e": list(law.mean_e),
                    "read_noise_e": list(law.read_noise_e),
                    "gain_e_per_dn": law.gain_e_per_dn,
                    "adc_bits": law.adc_bits,
                    "black_level_dn": law.black_level_dn,
                    "full_well_e": law.full_well_e,
                    "grid_points": len(self.lattice.cameras),
                    "source": law.source,
                },
            }
            if mechanism.distribution is not None:
                info["device_noise"] = mechanism.distribution.to_dict()
        return info

    def state_dict(self) -> dict[str, Any]:
        """The secure generator's state (secret: checkpoints only) so resumed steps replay exactly."""
        return {"generator": self.generator.secret_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator = SecureGenerator.from_secret_state(state["generator"])
        if self.noise_multiplier is not None:
            self.set_noise_multiplier(self.noise_multiplier)

    # -- noise -----------------------------------------------------------------------------------
    def release_update(self, u: torch.Tensor) -> torch.Tensor:
        """The noisy release of the flattened clipped update (Algorithm 1, lines 15-16)."""
        assert self.mechanism is not None, "set_noise_multiplier first"
        return self.mechanism.release(u)

    def _layers(self) -> list[torch.nn.Linear | torch.nn.Conv2d]:
        model = self.model
        return [*model.convs, *model.linears] if isinstance(model, CNN) else list(model.layers)

    def _add_noise(self, flat: torch.Tensor | None = None) -> None:
        """Release every layer's update at once: ``flat``, where given, already holds them in
        :func:`weights_and_biases` order (written there in place); else their ``.grad`` are joined."""
        params = weights_and_biases(self._layers())
        if flat is None:
            flat = torch.cat([_grad(p).flatten() for p in params])
        released = self.release(flat)
        for p, part in zip(params, released.split([p.numel() for p in params])):
            p.grad = part.view_as(p)  # disjoint views of the released tensor: no copy back

    # -- update ----------------------------------------------------------------------------------
    def compute_gradients(self, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        if isinstance(self.model, CNN):
            return self._hybrid_gradients(self.model, x, y)
        opening = forward_and_error(self.model, x, y)
        trace = opening.trace
        with torch.no_grad():
            # the hidden layers' phi' from their outputs, which the trace holds (the next layers' inputs)
            deltas = self.deltas(opening.error, trace.preacts, trace.inputs[1:])
            self._add_noise(self._set_linear_updates(self.model.layers, deltas, trace.inputs))
        return StepOutput(opening.loss_sum, opening.correct, int(y.shape[0]), privacy_event=self.planned_event())

    def deltas(
        self, error: torch.Tensor, preacts: list[torch.Tensor], outputs: list[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        """Each linear layer's DFA signal (Algorithm 1): with ``e`` the error clipped to ``tau_e``,
        ``(B^{l+1} e) * phi'(z^l)`` for the hidden layers ``preacts`` and ``gamma beta e`` at the output.
        ``outputs`` (``phi(z^l)``), where given, supply ``phi'`` for the activations that have it from
        their output (:attr:`trainers.core.model.Activation.derivative_at_output`: the same values)."""
        e = clip_norm(error, self.context.config.tau_e)
        model = self.model
        activation = model.head_activation if isinstance(model, CNN) else model.activation
        at_output = activation.derivative_at_output
        if outputs is not None and at_output is not None:
            slopes = [at_output(h.detach()) for h in outputs]
        else:
            slopes = [activation.derivative(z.detach()) for z in preacts]
        deltas = [(e @ b.T) * slope for b, slope in zip(self.feedback, slopes)]
        return [*deltas, self.output_scale * e]

    def _set_linear_updates(
        self, layers: list[torch.nn.Linear], deltas: list[torch.Tensor], inputs: list[torch.Tensor]
    ) -> torch.Tensor | None:
        """``delta^T clip(h, tau_h) / m`` per layer (Algorithm 1, lines 15-16 before the noise), written
        into one flat tensor in :func:`weights_and_biases` order (returned; no ``.grad`` is set) when the
        layers are all the released parameters, else into each layer's ``.grad`` (None returned)."""
        config = self.context.config
        if isinstance(self.model, CNN):
            for layer, delta, h in zip(layers, deltas, inputs):
                set_linear_grads(layer, delta / config.batch_size, clip_norm(h.detach(), config.tau_h))
            return None
        flat, offset = inputs[0].new_empty(self.dimension), 0
        for delta, h in zip(deltas, inputs):
            offset = linear_update_into(delta, clip_norm(h.detach(), config.tau_h), flat, offset, 1 / config.batch_size)
        if offset != self.dimension:  # a parameter left out would go unreleased
            raise RuntimeError(f"dp-dfa: the updates fill {offset} of the {self.dimension} released coordinates")
        return flat

    def _hybrid_gradients(self, model: CNN, x: torch.Tensor, y: torch.Tensor) -> StepOutput:
        """The hybrid BP/DFA step of a CNN (module docstring): DFA deltas for the head's linear
        layers, and for the convs the per-example gradient of ``<z^{l+1}, delta z^{l+1}>`` clipped
        per layer to ``tau_c``; then the one noisy release of every layer's update."""
        m = self.context.config.batch_size
        trace = model.trace(x)
        logits = trace.logits.detach()
        loss_sum, correct = batch_stats(logits, y)
        with torch.no_grad():
            deltas = self.deltas(output_error(logits, y), trace.head_outputs)
        first = trace.head_outputs[0]
        conv_grads = (
            torch.autograd.grad((first * deltas[0]).sum(), trace.preacts)
            if y.numel()
            else [torch.zeros_like(z) for z in trace.preacts]
        )
        with torch.no_grad():
            for conv, h, g in zip(model.convs, trace.inputs, conv_grads):
                squared, clipped_sums = conv_norms_and_sums(conv, h, g)
                weight, bias = clipped_sums(clip_scale(squared, self.conv_clip))
                conv.weight.grad = weight.view_as(conv.weight) / m
                layer_bias(conv).grad = bias / m
            self._set_linear_updates(model.linears, deltas, trace.head_inputs)
            self._add_noise()
        return StepOutput(loss_sum, correct, int(y.shape[0]), privacy_event=self.planned_event())
