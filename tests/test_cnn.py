"""The small CNN and DP-SGD's per-example clipping for it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from tests.test_scattering import tiny_images_dataset
from trainers.cnn import CNN, image_shape
from trainers.config import TrainConfig
from trainers.errors import TrainingConfigError
from trainers.loop import train
from trainers.methods.base import MethodContext
from trainers.methods.dp_sgd import DPSGD


def test_the_kind_of_features_decides_the_image_shape():
    assert image_shape(784) == (1, 28, 28)
    assert image_shape(3969, "scatter") == (81, 7, 7)
    assert image_shape(3969) == (1, 63, 63)  # 3969 = 63^2: the count alone would mislead
    with pytest.raises(TrainingConfigError, match="neither"):
        image_shape(1000)


@pytest.mark.parametrize("features, n_features, channels, strides, head", [
    ("scatter", 3969, (8, 6), (), ()), ("pixels", 784, (4,), (), ()),
    ("scatter", 3969, (8, 6), (2, 1), (5,)), ("pixels", 784, (3, 4), (2, 3), (6, 4))])
def test_dp_sgd_clips_each_examples_whole_cnn_gradient(features, n_features, channels, strides, head):
    """The unfold/bmm per-example gradients equal torch.func's, clipped per example to C, with
    pooled or strided convs and with or without hidden layers in the head."""
    torch.manual_seed(0)
    model = CNN(n_features, channels, 10, features=features, strides=strides, head=head)
    x, y = torch.randn(37, n_features), torch.randint(0, 10, (37,))
    config = TrainConfig.for_method("dp-sgd", model="cnn", hidden=channels, features=features,
                                    conv_strides=strides, head_hidden=head,
                                    noise_multiplier=1.0, clip_norm=0.5, batch_size=37)
    method = DPSGD(model, MethodContext(config, None, n_features, 10, 1000))
    method.noise_multiplier = 1.0
    method.release_update = lambda u: u  # the clipped sum itself (noise is tested elsewhere)
    method.compute_gradients(x, y)
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    params = {k: v.detach() for k, v in model.named_parameters()}
    loss = lambda p, xi, yi: F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])  # noqa: E731
    per_example = torch.cat([g.flatten(1) for g in vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y).values()], 1)
    scale = torch.clamp(0.5 / per_example.norm(dim=1), max=1.0)
    assert torch.allclose(got, (per_example * scale[:, None]).sum(0) / 37, atol=1e-6)


def test_dp_sgd_trains_a_cnn_end_to_end_within_budget():
    config = TrainConfig.for_method("dp-sgd", model="cnn", hidden=(4,), epochs=1, batch_size=10,
                                    target_epsilon=8.0, alignment=False)
    record = train(config, data=tiny_images_dataset(), progress=False, log=lambda m: None)
    assert record["final"]["epsilon"] <= 8.0 and record["hyperparameters"]["model"] == "cnn"


def test_bp_trains_a_cnn_without_computing_mlp_alignment():
    config = TrainConfig.for_method("bp", model="cnn", hidden=(4,), epochs=1, batch_size=10)
    record = train(config, data=tiny_images_dataset(), progress=False, log=lambda m: None)
    assert "alignment" not in record and 0 <= record["final"]["test_accuracy"] <= 1


def test_the_dfa_family_refuses_a_cnn_by_name():
    with pytest.raises(TrainingConfigError, match="--model cnn trains with bp, dp-sgd only"):
        TrainConfig.for_method("dp-dfa", model="cnn", noise_multiplier=1.0)


def test_tramer_boneh_scatter_cnn_has_their_shapes():
    """ScatterNet 81x7x7 -> 16 ch stride 2 (4x4) -> 32 ch stride 1 (4x4) -> 32 -> 10."""
    model = CNN(3969, (16, 32), 10, features="scatter", strides=(2, 1), head=(32,))
    trace = model.trace(torch.randn(3, 3969))
    assert [tuple(z.shape[1:]) for z in trace.preacts] == [(16, 4, 4), (32, 4, 4)]
    assert [a.shape[1] for a in trace.head_inputs] == [512, 32] and trace.logits.shape == (3, 10)
    assert sum(p.numel() for p in model.parameters()) == 81 * 16 * 9 + 16 + 16 * 32 * 9 + 32 + 512 * 32 + 32 + 330


@pytest.mark.parametrize("options, message", [
    ({"model": "cnn", "hidden": (8, 8), "conv_strides": (2,)}, "one stride in \\[1, 3\\] per conv block \\(2\\)"),
    ({"model": "cnn", "hidden": (8,), "conv_strides": (4,)}, "one stride in \\[1, 3\\]"),
    ({"model": "cnn", "hidden": (8,), "head_hidden": (0,)}, "--head-hidden needs widths"),
    ({"hidden": (8,), "head_hidden": (4,)}, "apply to --model cnn only"),
])
def test_cnn_shape_options_are_refused_by_name_when_out_of_range(options, message):
    with pytest.raises(TrainingConfigError, match=message):
        TrainConfig.for_method("dp-sgd", noise_multiplier=1.0, **options)
