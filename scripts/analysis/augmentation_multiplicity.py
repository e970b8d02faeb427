"""DP-SGD with augmentation multiplicity on ScatterNet features: each example's gradient is the mean
of its gradients at K views of the image (the image and its mirror), clipped once.

    python -m scripts.analysis.augmentation_multiplicity train --dataset fashion-mnist --target-epsilon 3 ...

Runs ``opu-hal train`` (every argument is passed on; ``--features scatter``, ``--method dp-sgd`` on an
MLP or a linear model) with each training example held as its K = 2 views, the ScatterNet features of
the image and of its horizontal mirror (De et al. 2022, "Unlocking high-accuracy differentially
private image classification through scale", section 3.2). The per-example loss is the mean over the
views, ``l_i = (1/K) sum_k l(f(x_ik), y_i)``, so an example still moves the clipped sum by at most
``C``: the sensitivity, the sampling and the accounting are DP-SGD's as charged. The per-example norm
is exact without a per-example gradient: for a linear layer with view inputs ``a_ik`` and output
gradients ``g_ik``, ``||sum_k g_ik a_ik^T||^2 + ||sum_k g_ik||^2 = sum_{k,l} (g_ik . g_il)(a_ik . a_il + 1)``.
FashionMNIST's classes do not change under a mirror; validation and test use the image alone, or
with ``--test-views`` both views, the prediction the mean of their logits (post-processing).

The centring releases the mean of the rows ``[phi(x_i), phi(mirror x_i)]`` (radius ``sqrt(K d)``, each
view's group norm making its squared norm at most ``d``) and centres each view on its half. The
mirror images' features are computed once and cached like the originals'.
(docs/records.md: measured at epsilon 3 on FashionMNIST.)
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

import trainers.run.dataset as run_dataset
import trainers.run.record as run_record
from scripts.analysis.flip_symmetric import mirrored
from trainers.cli import main as cli_main
from trainers.core.centering import Centering
from trainers.core.data import Dataset, Split
from trainers.core.per_example import linear_clipped_sum_into
from trainers.methods.dp_sgd import DPSGD, summed

_scatter = run_dataset.cached_scatter_features
_release = run_dataset.release_for_run
_plain_gradients = DPSGD.compute_gradients
_evaluate = run_record.evaluate


@dataclasses.dataclass(frozen=True)
class ViewsDataset(Dataset):
    """A dataset whose training inputs are ``(N, K, d)``: K views of each example."""

    @property
    def n_features(self) -> int:
        return int(self.test.x.shape[-1])


def mirror_views(test_views: bool) -> Callable[..., Dataset]:
    """The feature loader: ``data``'s ScatterNet features, each training example (and with
    ``test_views`` each validation and test example) with its mirror image's as a second view."""

    def load(data: Dataset, log: Callable[[str], None], progress: bool = True) -> Dataset:
        plain = _scatter(data, log=log, progress=progress)
        mirror = data.with_splits(mirrored(data.train), mirrored(data.validation), mirrored(data.test))
        flipped = _scatter(mirror, log=log, progress=progress)
        pairs = ((plain.train, flipped.train), (plain.validation, flipped.validation), (plain.test, flipped.test))
        stacked = [Split(torch.stack([a.x, b.x], dim=1), a.y) for a, b in pairs]
        fields = {field.name: getattr(plain, field.name) for field in dataclasses.fields(plain)}
        splits = stacked if test_views else [stacked[0], plain.validation, plain.test]
        return ViewsDataset(**{**fields, "train": splits[0], "validation": splits[1], "test": splits[2]})

    return load


class ViewMean(torch.nn.Module):
    """``model``'s logits averaged over the views of ``(N, K, d)`` inputs."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).mean(1) if x.dim() == 3 else self.model(x)


def evaluate_views(model: torch.nn.Module, split: Split, chunk: int = 8192) -> tuple[float, float]:
    """:func:`trainers.core.evaluation.evaluate` of the view-averaged prediction."""
    return _evaluate(ViewMean(model), split, chunk)


def release_views(x: torch.Tensor, private: bool, noise_multiplier: float, public_size: int, neighboring) -> Centering:
    """The run's centring release on the rows of all views side by side; the mean shaped ``(K, d)``."""
    if x.dim() != 3:
        return _release(x, private, noise_multiplier, public_size, neighboring)
    centering = _release(x.reshape(len(x), -1), private, noise_multiplier, public_size, neighboring)
    return dataclasses.replace(centering, mean=centering.mean.view(x.shape[1:]))


def centered_views(data: Dataset, mean: torch.Tensor) -> Dataset:
    """Each view of the training split minus its own mean; validation and test minus the first view's."""

    def shift(split: Split) -> Split:
        offset = mean if split.x.dim() == 3 or mean.dim() == 1 else mean[0]
        return Split(split.x - offset.to(split.x.device, split.x.dtype), split.y)

    return dataclasses.replace(data, train=shift(data.train), validation=shift(data.validation), test=shift(data.test))


def view_squared_norms(g: torch.Tensor, a: torch.Tensor, views: int) -> torch.Tensor:
    """``||sum_k g_ik a_ik^T||_F^2 + ||sum_k g_ik||^2`` per example, from the views' Gram matrices."""
    gg = g.view(-1, views, g.shape[1])
    aa = a.view(-1, views, a.shape[1])
    return ((gg @ gg.transpose(1, 2)) * (aa @ aa.transpose(1, 2) + 1)).sum((1, 2))


def views_gradients(self: DPSGD, x: torch.Tensor, y: torch.Tensor):
    """DP-SGD's step (an MLP) on ``(B, K, d)`` inputs: the per-example loss is the mean over the views."""
    if x.dim() != 3:
        return _plain_gradients(self, x, y)
    batch, views = x.shape[0], x.shape[1]
    trace = self.model.forward_trace(x.reshape(batch * views, x.shape[2]))
    losses = F.cross_entropy(trace.logits, y.repeat_interleave(views), reduction="none").view(batch, views).mean(1)
    output_grads = self._output_grads(losses, trace.preacts)
    with torch.no_grad():
        inputs = [a.detach() for a in trace.inputs]
        scale = self._clip_scale(summed(view_squared_norms(g, a, views) for g, a in zip(output_grads, inputs)))
        per_view = scale.repeat_interleave(views)
        flat, offset = x.new_empty(self.dimension), 0
        for g, a in zip(output_grads, inputs):
            offset = linear_clipped_sum_into(g, a, per_view, flat, offset)
        self._release([p for layer in self.model.layers for p in (layer.weight, layer.bias)], flat)
    return self._output(losses, trace.logits.view(batch, views, -1).mean(1), y)


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--test-views"]
    run_dataset.cached_scatter_features = mirror_views(len(arguments) < len(sys.argv) - 1)
    run_record.evaluate = evaluate_views
    run_dataset.release_for_run = release_views
    run_dataset.centered = centered_views
    DPSGD.compute_gradients = views_gradients  # type: ignore[method-assign]  # the probe patches the step
    sys.exit(cli_main(arguments))
