"""What the bring-your-own-model API can train by DFA: a chain ``Linear -> phi -> ... -> Linear``,
optionally after a convolutional prefix (paper 002's hybrid network, section 4: the convs are
trained by backpropagation from the DFA signal of the first Linear).

DFA (Nokland 2016) replaces backpropagation's signal at each hidden layer by ``(B e) * phi'(z)``;
that needs each hidden layer's pre-activation ``z`` and an element-wise ``phi`` whose derivative is
known. A module outside this shape (a residual block, attention, normalisation...) is refused with
its name, because DFA would silently train it wrongly.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..core.errors import TrainingConfigError
from ..core.model import Activation, get_activation


class UnsupportedModelError(TrainingConfigError):
    """A user's model DFA (or the private API) cannot train; the message names the layer."""


#: Element-wise activations whose derivative :mod:`trainers.core.model` knows (default arguments only).
ELEMENTWISE: dict[type[nn.Module], str] = {
    nn.Tanh: "tanh",
    nn.Sigmoid: "sigmoid",
    nn.ReLU: "relu",
    nn.GELU: "gelu",
    nn.Softplus: "softplus",
}
#: Modules that change nothing DFA needs and are skipped (Flatten only before the first Linear).
PASS_THROUGH: tuple[type[nn.Module], ...] = (nn.Identity,)
#: Modules a convolutional prefix may hold (with Flatten and the element-wise activations): the
#: prefix is trained by backpropagation, so only modules with a plain local gradient are admitted.
PREFIX: tuple[type[nn.Module], ...] = (nn.Conv1d, nn.Conv2d, nn.AvgPool1d, nn.AvgPool2d, nn.MaxPool1d, nn.MaxPool2d)


@dataclass
class LinearChain:
    """The Linear layers of a model in forward order, with the activation after each hidden one."""

    names: list[str]
    linears: list[nn.Linear]
    activations: list[Activation]
    #: The convolutional prefix before the first Linear, ``(name, module)`` in forward order.
    prefix: tuple[tuple[str, nn.Module], ...] = ()

    @property
    def prefix_params(self) -> list[nn.Parameter]:
        return [p for _, m in self.prefix for p in m.parameters() if p.requires_grad]

    @property
    def hidden_widths(self) -> list[int]:
        return [layer.out_features for layer in self.linears[:-1]]

    @property
    def n_classes(self) -> int:
        return self.linears[-1].out_features


def _leaves(module: nn.Module, prefix: str = "") -> list[tuple[str, nn.Module]]:
    """Children of nested ``nn.Sequential`` containers, with dotted names, in forward order."""
    out: list[tuple[str, nn.Module]] = []
    for name, child in module.named_children():
        full = f"{prefix}{name}"
        out.extend(_leaves(child, full + ".") if isinstance(child, nn.Sequential) else [(full, child)])
    return out


def _activation(name: str, module: nn.Module) -> Activation:
    if isinstance(module, nn.GELU) and module.approximate != "none":
        raise UnsupportedModelError(f"layer {name!r} (GELU approximate={module.approximate!r}): use nn.GELU()")
    if isinstance(module, nn.Softplus) and (module.beta != 1 or module.threshold != 20):
        raise UnsupportedModelError(f"layer {name!r} (Softplus with beta/threshold changed): use nn.Softplus()")
    return get_activation(ELEMENTWISE[type(module)])


def linear_chain(model: nn.Module, conv_prefix: bool = False) -> LinearChain:
    """Parse ``model`` as ``[prefix] [Flatten] Linear (phi Linear)*``; :class:`UnsupportedModelError`
    names the first layer that does not fit. ``conv_prefix``: the prefix may hold convolutions,
    pooling and element-wise activations (:data:`PREFIX`), else nothing but Flatten."""
    if not isinstance(model, nn.Sequential):
        raise UnsupportedModelError(
            f"DFA trains an nn.Sequential of nn.Linear layers and element-wise activations; got "
            f"{type(model).__name__}, whose forward order cannot be read (wrap its layers in nn.Sequential)"
        )
    names: list[str] = []
    linears: list[nn.Linear] = []
    activations: list[Activation] = []
    prefix: list[tuple[str, nn.Module]] = []
    expect_linear = True
    for name, module in _leaves(model):
        if isinstance(module, PASS_THROUGH) or (isinstance(module, nn.Flatten) and not linears):
            continue
        if conv_prefix and not linears and (isinstance(module, PREFIX) or type(module) in ELEMENTWISE):
            prefix.append((name, module))
            continue
        if isinstance(module, nn.Linear) and expect_linear:
            names.append(name)
            linears.append(module)
            expect_linear = False
        elif type(module) in ELEMENTWISE and not expect_linear:
            activations.append(_activation(name, module))
            expect_linear = True
        else:
            wanted = "an nn.Linear" if expect_linear else "an element-wise activation or the end"
            supported = ", ".join(t.__name__ for t in ELEMENTWISE)
            before = (
                " or, before the first Linear, a " + "/".join(t.__name__ for t in PREFIX)
                if conv_prefix and not linears
                else ""
            )
            raise UnsupportedModelError(
                f"layer {name!r} ({type(module).__name__}) cannot be trained by DFA here: expected {wanted}{before} "
                f"(DFA needs a chain Linear -> activation -> ... -> Linear, activations among {supported}; "
                "residual blocks and other modules route the error in ways DFA's feedback does not model)"
            )
    if not linears:
        raise UnsupportedModelError("the model holds no nn.Linear layer")
    if expect_linear:
        raise UnsupportedModelError(
            f"the model ends with an activation after layer {names[-1]!r}; "
            "the output layer must be an nn.Linear (put softmax in the loss)"
        )
    return LinearChain(names, linears, activations, tuple(prefix))
