"""Paper 002's section 5.1 network: 5x5 convs with 2x2 max pooling, and a sigmoid head in its hybrid
BP/DFA network, whose DFA signals and sensitivity then take sigmoid's derivative bound."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.test_cnn import func_clipped_mean, worst_replace_one_moves
from trainers.core.cnn import CNN
from trainers.core.errors import TrainingConfigError
from trainers.methods.base import MethodContext
from trainers.methods.dp_dfa import DPDFA
from trainers.methods.dp_sgd import DPSGD
from trainers.run.config import TrainConfig

PAPER = {"kernel": 5, "pool": "max"}


def test_paper002s_network_has_its_shapes():
    """28x28 -> 64 ch 5x5 (pool 14x14) -> 64 ch 5x5 (pool 7x7) -> 384 -> 384 -> 10."""
    model = CNN(784, (64, 64), 10, activation="tanh", head=(384, 384), head_activation="sigmoid", **PAPER)
    trace = model.trace(torch.randn(2, 784))
    assert [tuple(z.shape[1:]) for z in trace.preacts] == [(64, 28, 28), (64, 14, 14)]
    assert [a.shape[1] for a in trace.head_inputs] == [3136, 384, 384]
    assert all(((a > 0) & (a < 1)).all() for a in trace.head_inputs[1:])  # sigmoid in the head
    assert (trace.head_inputs[0].abs() < 1).all()  # tanh, then max pooling, in the convs


@pytest.mark.parametrize("kernel, pool", [(5, "max"), (5, "avg"), (3, "max")])
def test_dp_sgd_clips_each_examples_gradient_with_5x5_convs_and_max_pooling(kernel, pool):
    """The unfolded k x k patches give torch.func's per-example gradients, clipped to C."""
    torch.manual_seed(0)
    model = CNN(784, (3, 4), 10, activation="relu", head=(6,), kernel=kernel, pool=pool)
    x, y = torch.randn(9, 784), torch.randint(0, 10, (9,))
    options = {"model": "cnn", "hidden": (3, 4), "head_hidden": (6,), "conv_kernel": kernel, "conv_pool": pool}
    config = TrainConfig.for_method("dp-sgd", noise_multiplier=1.0, clip_norm=0.5, batch_size=9, **options)
    method = DPSGD(model, MethodContext(config, None, 784, 10, 1000))
    method.noise_multiplier = 1.0
    method.release_update = lambda u: u  # the clipped sum itself
    method.compute_gradients(x, y)
    got = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert torch.allclose(got, func_clipped_mean(model, x, y, 0.5), atol=1e-6)


def _sigmoid_hybrid(batch: int = 12) -> tuple[CNN, DPDFA]:
    torch.manual_seed(2)
    model = CNN(784, (3, 4), 10, activation="tanh", head=(6,), head_activation="sigmoid", **PAPER)
    config = TrainConfig.for_method(
        "dp-dfa",
        model="cnn",
        hidden=(3, 4),
        head_hidden=(6,),
        conv_kernel=5,
        conv_pool="max",
        activation="tanh",
        head_activation="sigmoid",
        tau_e=0.3,
        tau_h=2.0,
        batch_size=batch,
        noise_multiplier=1.0,
    )
    method = DPDFA(model, MethodContext(config, None, 784, 10, 1000))
    method.set_noise_multiplier(1e-30)  # the clipped update itself
    return model, method


def _update(method: DPDFA, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    method.compute_gradients(x, y)
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]) for layer in method._layers()]


def test_a_sigmoid_head_takes_sigmoids_derivative_and_its_bound():
    """delta = (B e) * sigma'(z) in the head; gamma = 1/4 in every sensitivity term (section 4.2)."""
    model, method = _sigmoid_hybrid()
    x = 3 * torch.randn(12, 784)
    with torch.no_grad():
        first = model.trace(x).head_outputs[0]
    e = torch.randn(12, 10)
    e = e * torch.clamp(0.3 / e.norm(dim=1, keepdim=True), max=1.0)
    got = method.deltas(e, [first])[0]
    assert torch.allclose(got, (e @ method.feedback[0].T) * torch.sigmoid(first) * (1 - torch.sigmoid(first)))
    assert method.conv_clip == pytest.approx(0.25 * 0.9 * 0.3 * (1 + 2.0**2) ** 0.5)
    assert method.output_scale == pytest.approx(0.25 * 0.9)


def test_the_sigmoid_hybrid_moves_each_layer_by_at_most_its_term_when_one_example_is_replaced():
    _, method = _sigmoid_hybrid()
    worst = worst_replace_one_moves(lambda x, y: _update(method, x, y), seeds=8)
    terms = method.layer_sensitivities
    assert len(terms) == 4 and all(0 < w <= t * (1 + 1e-5) for w, t in zip(worst, terms))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"hidden": (8,), "conv_kernel": 5}, "apply to --model cnn only"),
        ({"hidden": (8,), "head_activation": "sigmoid"}, "apply to --model cnn only"),
    ],
)
def test_the_paper002_options_are_refused_outside_a_cnn_by_name(options, message):
    with pytest.raises(TrainingConfigError, match=message):
        TrainConfig.for_method("dp-sgd", noise_multiplier=1.0, **options)


def test_an_unsupported_kernel_or_pool_is_refused_naming_what_is_allowed():
    with pytest.raises(TrainingConfigError, match=r"--conv-kernel 7.*allowed \(3, 5\)"):
        CNN(784, (4,), 10, kernel=7)
    with pytest.raises(TrainingConfigError, match=r"--conv-pool 'median'.*\('avg', 'max'\)"):
        CNN(784, (4,), 10, pool="median")


def test_paper002_script_resumes_from_its_checkpoints_and_skips_finished_runs(tmp_path):
    """CHECKPOINT_DIR: a second invocation trains only the runs without a record (from their checkpoints)."""
    root = Path(__file__).resolve().parents[1]
    out, ck = tmp_path / "out", tmp_path / "ck"
    env = {**os.environ, "QUICK": "1", "OUT_DIR": str(out), "CHECKPOINT_DIR": str(ck), "OPU_HAL_PYTHON": sys.executable}

    def run() -> None:
        done = subprocess.run(["bash", "scripts/reproduce/paper002_conv.sh"], cwd=root, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()[-2000:]

    run()
    sgd, dfa = out / "dp-sgd-relu-lr1e-3.json", out / "dp-dfa-hybrid-tanh-sigmoid-lr1e-3.json"
    assert sgd.is_file() and dfa.is_file()
    assert (ck / "dp-sgd-relu-lr1e-3.ckpt").is_file() and (ck / "dp-dfa-hybrid-tanh-sigmoid-lr1e-3.ckpt").is_file()
    kept = dfa.stat().st_mtime_ns
    sgd.unlink()
    run()
    assert sgd.is_file(), "the run without a record trains again from its checkpoint"
    assert dfa.stat().st_mtime_ns == kept, "a run with a record is not trained again"
