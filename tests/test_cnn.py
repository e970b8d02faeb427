"""The small CNN and DP-SGD's per-example clipping for it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from tests.test_scattering import tiny_images_dataset
from trainers.core.cnn import CNN, image_shape
from trainers.core.errors import TrainingConfigError
from trainers.methods.base import MethodContext
from trainers.methods.dp_dfa import DPDFA
from trainers.methods.dp_sgd import DPSGD
from trainers.run.config import TrainConfig
from trainers.run.loop import train


def test_the_kind_of_features_decides_the_image_shape():
    assert image_shape(784) == (1, 28, 28)
    assert image_shape(3969, "scatter") == (81, 7, 7)
    assert image_shape(3969) == (1, 63, 63)  # 3969 = 63^2: the count alone would mislead
    with pytest.raises(TrainingConfigError, match="neither"):
        image_shape(1000)


@pytest.mark.parametrize(
    "features, n_features, channels, strides, head",
    [
        ("scatter", 3969, (8, 6), (), ()),
        ("pixels", 784, (4,), (), ()),
        ("scatter", 3969, (8, 6), (2, 1), (5,)),
        ("pixels", 784, (3, 4), (2, 3), (6, 4)),
    ],
)
def test_dp_sgd_clips_each_examples_whole_cnn_gradient(features, n_features, channels, strides, head):
    """The unfold/bmm per-example gradients equal torch.func's, clipped per example to C, with
    pooled or strided convs and with or without hidden layers in the head."""
    torch.manual_seed(0)
    model = CNN(n_features, channels, 10, features=features, strides=strides, head=head)
    x, y = torch.randn(37, n_features), torch.randint(0, 10, (37,))
    config = TrainConfig.for_method(
        "dp-sgd",
        model="cnn",
        hidden=channels,
        features=features,
        conv_strides=strides,
        head_hidden=head,
        noise_multiplier=1.0,
        clip_norm=0.5,
        batch_size=37,
    )
    method = DPSGD(model, MethodContext(config, None, n_features, 10, 1000))
    method.noise_multiplier = 1.0
    method.release_update = lambda u: u  # the clipped sum itself (noise is tested elsewhere)
    method.compute_gradients(x, y)
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert torch.allclose(got, func_clipped_mean(model, x, y, 0.5), atol=1e-6)


def func_clipped_mean(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float) -> torch.Tensor:
    """torch.func's per-example gradients of the cross-entropy, each clipped to ``clip``, averaged."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    loss = lambda p, xi, yi: F.cross_entropy(functional_call(model, p, (xi[None],)), yi[None])  # noqa: E731
    per_example = torch.cat([g.flatten(1) for g in vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y).values()], 1)
    scale = torch.clamp(clip / per_example.norm(dim=1), max=1.0)
    return (per_example * scale[:, None]).sum(0) / x.shape[0]


def test_dp_sgd_trains_a_cnn_end_to_end_within_budget():
    config = TrainConfig.for_method(
        "dp-sgd", model="cnn", hidden=(4,), epochs=1, batch_size=10, target_epsilon=8.0, alignment=False
    )
    record = train(config, data=tiny_images_dataset(), progress=False, log=lambda m: None)
    assert record["final"]["epsilon"] <= 8.0 and record["hyperparameters"]["model"] == "cnn"


def test_bp_trains_a_cnn_without_computing_mlp_alignment():
    config = TrainConfig.for_method("bp", model="cnn", hidden=(4,), epochs=1, batch_size=10)
    record = train(config, data=tiny_images_dataset(), progress=False, log=lambda m: None)
    assert "alignment" not in record and 0 <= record["final"]["test_accuracy"] <= 1


@pytest.mark.parametrize("method", ["dfa", "tdfa", "pdfa", "photonic-dp"])
def test_the_dfa_family_but_dp_dfa_refuses_a_cnn_by_name(method):
    with pytest.raises(TrainingConfigError, match="--model cnn trains with bp, dp-dfa, dp-sgd only"):
        TrainConfig.for_method(method, model="cnn", noise_multiplier=1.0)


def test_tramer_boneh_scatter_cnn_has_their_shapes():
    """ScatterNet 81x7x7 -> 16 ch stride 2 (4x4) -> 32 ch stride 1 (4x4) -> 32 -> 10."""
    model = CNN(3969, (16, 32), 10, features="scatter", strides=(2, 1), head=(32,))
    trace = model.trace(torch.randn(3, 3969))
    assert [tuple(z.shape[1:]) for z in trace.preacts] == [(16, 4, 4), (32, 4, 4)]
    assert [a.shape[1] for a in trace.head_inputs] == [512, 32] and trace.logits.shape == (3, 10)
    assert sum(p.numel() for p in model.parameters()) == 81 * 16 * 9 + 16 + 16 * 32 * 9 + 32 + 512 * 32 + 32 + 330


@pytest.mark.parametrize(
    "options, message",
    [
        ({"model": "cnn", "hidden": (8, 8), "conv_strides": (2,)}, "one stride in \\[1, 3\\] per conv block \\(2\\)"),
        ({"model": "cnn", "hidden": (8,), "conv_strides": (4,)}, "one stride in \\[1, 3\\]"),
        ({"model": "cnn", "hidden": (8,), "head_hidden": (0,)}, "--head-hidden needs widths"),
        ({"hidden": (8,), "head_hidden": (4,)}, "apply to --model cnn only"),
    ],
)
def test_cnn_shape_options_are_refused_by_name_when_out_of_range(options, message):
    with pytest.raises(TrainingConfigError, match=message):
        TrainConfig.for_method("dp-sgd", noise_multiplier=1.0, **options)


def _hybrid(head=(6,), tau_e=0.3, tau_h=2.0, batch=12):
    torch.manual_seed(1)
    model = CNN(784, (3, 4), 10, strides=(2, 2), head=head)
    config = TrainConfig.for_method(
        "dp-dfa",
        model="cnn",
        hidden=(3, 4),
        conv_strides=(2, 2),
        head_hidden=head,
        activation="tanh",
        tau_e=tau_e,
        tau_h=tau_h,
        batch_size=batch,
        noise_multiplier=1.0,
    )
    method = DPDFA(model, MethodContext(config, None, 784, 10, 1000))
    method.set_noise_multiplier(1e-30)  # the clipped update itself
    return model, method


def _update(model, method, x, y):
    method.compute_gradients(x, y)
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]) for layer in method._layers()]


@pytest.mark.parametrize("head", [(6,), ()])
def test_dp_dfa_hybrid_conv_update_is_the_clipped_per_example_backprop_of_the_dfa_signal(head):
    """Paper 002, section 4: conv layers get d<z^{l+1}, delta z^{l+1}>/dW per example, clipped per
    layer to tau_c; delta z^{l+1} = (B e) * phi'(z^{l+1}), or gamma beta e with no hidden head layer."""
    model, method = _hybrid(head)
    x, y = 3 * torch.randn(12, 784), torch.randint(0, 10, (12,))
    got = _update(model, method, x, y)
    with torch.no_grad():
        trace = model.trace(x)
        e = torch.softmax(trace.logits, 1) - F.one_hot(y, 10)
        e = e * torch.clamp(0.3 / e.norm(dim=1, keepdim=True), max=1.0)
        first = trace.head_outputs[0]
        delta = (e @ method.feedback[0].T) * (1 - torch.tanh(first) ** 2) if head else method.output_scale * e
    params = {k: v.detach() for k, v in model.named_parameters()}

    def signal(p, xi, di):
        return (_first_linear(model, p, xi) * di).sum()

    per_example = vmap(grad(signal), in_dims=(None, 0, 0))(params, x, delta)
    for index in range(2):
        g = torch.cat([per_example[f"convs.{index}.weight"].flatten(1), per_example[f"convs.{index}.bias"]], 1)
        clipped = (g * torch.clamp(method.conv_clip / g.norm(dim=1), max=1.0)[:, None]).sum(0) / 12
        assert torch.allclose(got[index], clipped, atol=1e-6)
    assert method.conv_clip == pytest.approx(1.0 * 0.9 * 0.3 * (1 + 2.0**2) ** 0.5)


def _first_linear(model, params, xi):
    """``z^{l+1}``: the first linear layer's output of one example, as a function of the parameters."""
    h = xi.reshape(1, 1, 28, 28)
    for index, conv in enumerate(model.convs):
        h = torch.tanh(
            F.conv2d(h, params[f"convs.{index}.weight"], params[f"convs.{index}.bias"], stride=conv.stride, padding=1)
        )
    first = "fcs.0" if model.fcs else "head"
    return F.linear(h.flatten(1), params[f"{first}.weight"], params[f"{first}.bias"])


def worst_replace_one_moves(update, seeds: int) -> list[float]:
    """Each layer's largest update change when one of 12 examples is replaced by a large one of another
    class (one replacement per seed)."""
    x, y = 3 * torch.randn(12, 784), torch.randint(0, 10, (12,))
    base = update(x, y)
    worst = [0.0] * len(base)
    for seed in range(seeds):
        g = torch.Generator().manual_seed(seed)
        x2, y2 = x.clone(), y.clone()
        x2[seed] = 20 * torch.randn(784, generator=g)
        y2[seed] = (y[seed] + 1 + seed) % 10
        for index, (a, b) in enumerate(zip(update(x2, y2), base)):
            worst[index] = max(worst[index], float((a - b).norm()))
    return worst


def test_dp_dfa_hybrid_replacing_one_example_moves_each_layer_by_at_most_its_term():
    model, method = _hybrid()
    worst = worst_replace_one_moves(lambda x, y: _update(model, method, x, y), seeds=10)
    terms = method.layer_sensitivities
    assert len(terms) == 4 and all(0 < w <= t * (1 + 1e-5) for w, t in zip(worst, terms))
    assert method.sensitivity == pytest.approx(2 * method.conv_clip / 12 * 4**0.5)  # tanh: gamma beta = 0.9


@pytest.mark.parametrize("noise_source", ["software", "device"])
def test_dp_dfa_trains_a_hybrid_cnn_end_to_end_within_budget(noise_source):
    config = TrainConfig.for_method(
        "dp-dfa",
        model="cnn",
        hidden=(4,),
        head_hidden=(8,),
        epochs=1,
        batch_size=10,
        target_epsilon=8.0,
        activation="tanh",
        alignment=False,
        noise_source=noise_source,
        compute="cpu",
    )
    record = train(config, data=tiny_images_dataset(), progress=False, log=lambda m: None)
    privacy = record["privacy"]
    assert record["final"]["epsilon"] <= 8.0 and len(privacy["layer_sensitivities"]) == 3
    assert privacy["mechanism"] == ("skellam" if noise_source == "device" else "gaussian")
