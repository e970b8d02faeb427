"""Which models dp-sgd refuses, why, and ModuleValidator.fix (trainers.api.validator)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from trainers.api import ModuleValidator, PrivacyEngine, UnsupportedModelError


def _cnn_with_batchnorm() -> nn.Sequential:
    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(1, 48, 3), nn.BatchNorm2d(48), nn.ReLU())
    return nn.Sequential(block, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(48, 10))


def _make_private(model: nn.Module):
    x, y = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
    return PrivacyEngine().make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=(x, y),
        batch_size=8,
        noise_multiplier=1.0,
        max_grad_norm=1.0,
    )


def test_batchnorm_is_refused_naming_its_path_and_the_fix():
    with pytest.raises(
        UnsupportedModelError, match=r"'0\.1' \(BatchNorm2d\): batch normalisation mixes.*ModuleValidator\.fix"
    ):
        _make_private(_cnn_with_batchnorm())


def test_fix_replaces_batchnorm_by_groupnorm_says_so_and_the_model_then_trains():
    model = _cnn_with_batchnorm()
    with pytest.warns(UserWarning, match=r"'0\.1': BatchNorm2d\(48.*-> GroupNorm\(16, 48"):
        fixed = ModuleValidator.fix(model)
    assert isinstance(model[0][1], nn.BatchNorm2d)  # the user's model is left as it was
    assert ModuleValidator.is_valid(fixed) and ModuleValidator.validate(fixed) == []
    fixed, optimizer, loader = _make_private(fixed)
    before = fixed[0][1].weight.detach().clone()
    xb, yb = next(iter(loader))
    F.cross_entropy(fixed(xb), yb).backward()
    optimizer.step()
    assert not torch.equal(before, fixed[0][1].weight)  # GroupNorm's affine weights are trained privately


def test_fix_turns_off_instance_norm_running_statistics():
    model = nn.Sequential(nn.Conv1d(2, 4, 3), nn.InstanceNorm1d(4, affine=True, track_running_stats=True))
    assert "learns running statistics" in str(ModuleValidator.validate(model)[0])
    with pytest.warns(UserWarning, match="'1'"):
        fixed = ModuleValidator.fix(model)
    assert not fixed[1].track_running_stats and ModuleValidator.is_valid(fixed)


@pytest.mark.parametrize(
    ("layer", "reason"),
    [
        (nn.Embedding(10, 4, max_norm=1.0), "renormalises rows in place"),
        (nn.Embedding(10, 4, scale_grad_by_freq=True), "index counts"),
        (nn.LSTM(4, 4), "no per-example gradient rule for LSTM"),
        (type("MyLinear", (nn.Linear,), {})(4, 4), "no per-example gradient rule for MyLinear"),
    ],
)
def test_validate_names_each_refused_layer_with_its_reason(layer, reason):
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Identity(), layer))
    errors = ModuleValidator.validate(model)
    assert len(errors) == 1 and f"layer '1.1' ({type(layer).__name__}): " in str(errors[0]) and reason in str(errors[0])
    with pytest.raises(UnsupportedModelError, match=reason):
        ModuleValidator.validate(model, strict=True)


def test_frozen_unsupported_layers_are_accepted_but_batchnorm_never():
    frozen = nn.PReLU().requires_grad_(False)
    assert ModuleValidator.is_valid(nn.Sequential(nn.Linear(4, 4), frozen))
    assert not ModuleValidator.is_valid(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4).requires_grad_(False)))
