"""Which layers dp-sgd can clip, and a fixer, in the style of Opacus's ``ModuleValidator``:

>>> from trainers.api import ModuleValidator
>>> ModuleValidator.validate(model)          # [] or one error per refused layer   # doctest: +SKIP
>>> model = ModuleValidator.fix(model)       # BatchNorm -> GroupNorm, with a warning  # doctest: +SKIP

dp-sgd clips each example's gradient, so a layer must have a per-example gradient rule
(:mod:`.per_sample`: Linear, Conv1d/2d, GroupNorm, LayerNorm, InstanceNorm1d/2d, Embedding), and
nothing may mix examples or learn from them outside the clipped, noised update: BatchNorm's batch
statistics do both, and so do running statistics and ``Embedding``'s ``max_norm`` renormalisation.
"""

from __future__ import annotations

import copy
import math
import warnings

from torch import nn

from .layers import UnsupportedModelError
from .per_sample import RULES, rule_for, trainable_params

SUPPORTED = ", ".join(t.__name__ for t in RULES)
FIX = "model = trainers.api.ModuleValidator.fix(model)"


def refusal(module: nn.Module) -> str | None:
    """Why dp-sgd cannot train ``module`` (the module alone, not its children), or None."""
    kind = type(module).__name__
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return (
            "batch normalisation mixes the examples of a batch (each output depends on the others), so no "
            f"per-example gradient exists to clip, and its running statistics learn from data without noise; "
            f"replace it with GroupNorm: {FIX}"
        )
    if isinstance(module, nn.modules.instancenorm._InstanceNorm) and module.track_running_stats:
        return f"{kind}(track_running_stats=True) learns running statistics from data without noise; {FIX}"
    if isinstance(module, nn.Embedding) and module.max_norm is not None:
        return "Embedding(max_norm=...) renormalises rows in place from the batch's indices, outside the noised update"
    if isinstance(module, nn.Embedding) and module.scale_grad_by_freq:
        return "Embedding(scale_grad_by_freq=True) scales each gradient by the batch's index counts (mixes examples)"
    if trainable_params(module) and rule_for(module) is None:
        return f"no per-example gradient rule for {kind} (dp-sgd clips {SUPPORTED}); freeze it or drop it"
    return None


def refusals(model: nn.Module) -> list[str]:
    """``"layer 'path' (Type): reason"`` for every module of ``model`` dp-sgd cannot train."""
    found = []
    for name, module in model.named_modules():
        reason = refusal(module)
        if reason is not None:
            found.append(f"layer {name!r} ({type(module).__name__}): {reason}")
    return found


def group_norm_for(bn: nn.modules.batchnorm._BatchNorm) -> nn.GroupNorm:
    """Opacus's replacement: ``GroupNorm(gcd(32, C), C)``, affine as the BatchNorm was."""
    channels = bn.num_features
    return nn.GroupNorm(math.gcd(32, channels), channels, eps=bn.eps, affine=bn.affine)


def _replacement(module: nn.Module) -> nn.Module | None:
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return group_norm_for(module)
    if isinstance(module, nn.modules.instancenorm._InstanceNorm) and module.track_running_stats:
        fixed = copy.deepcopy(module)
        fixed.track_running_stats, fixed.running_mean, fixed.running_var = False, None, None
        fixed.num_batches_tracked = None
        return fixed
    return None


class ModuleValidator:
    """Opacus's names: :meth:`validate`, :meth:`is_valid`, :meth:`fix`."""

    @staticmethod
    def validate(module: nn.Module, *, strict: bool = False) -> list[UnsupportedModelError]:
        """One error per layer dp-sgd refuses (naming its path and the reason); ``strict`` raises them."""
        errors = [UnsupportedModelError(reason) for reason in refusals(module)]
        if strict and errors:
            raise UnsupportedModelError("; ".join(str(e) for e in errors))
        return errors

    @staticmethod
    def is_valid(module: nn.Module) -> bool:
        return not refusals(module)

    @staticmethod
    def fix(module: nn.Module) -> nn.Module:
        """A copy of ``module`` with every BatchNorm replaced by :func:`group_norm_for`'s GroupNorm and
        InstanceNorm's running statistics turned off; warns naming each replacement. Other refused
        layers are left as they are (:meth:`validate` names them)."""
        fixed = copy.deepcopy(module)
        replaced = []
        for name, child in list(fixed.named_modules()):
            new = _replacement(child)
            if new is None:
                continue
            if not name:
                fixed = new
            else:
                parent_name, _, attribute = name.rpartition(".")
                setattr(fixed.get_submodule(parent_name), attribute, new)
            replaced.append(f"{name!r}: {child} -> {new}")
        if replaced:
            warnings.warn("ModuleValidator.fix replaced " + "; ".join(replaced), stacklevel=2)
        return fixed
