"""A zoo of bugs planted in the real code (monkeypatched, none in the audit's own fixtures), each
flagged by the mechanism inspector (:mod:`trainers.audit.inspector`) naming the mechanism; and sound
runs of every private method never flagged (issue 44, item 3)."""

from __future__ import annotations

import json

import pytest
import torch

import opu_hal.privacy.mechanisms as mechanisms
import trainers.core.centering as centering
import trainers.core.sampling as sampling
from opu_hal.privacy.skellam import SkellamLattice
from tests.test_scattering import tiny_images_dataset
from tests.training_helpers import SCATTER_LINEAR, SMALL_DIGITS_AUDIT, cli_argv, clusters
from trainers.audit import InspectionReport, inspect
from trainers.core.clipping import clip_norm
from trainers.methods.dp_dfa import DPDFA
from trainers.methods.dp_sgd import DPSGD
from trainers.run.config import TrainConfig

DATA = dict(n_train=200, n_test=100)


def _config(method: str = "dp-dfa", **kw) -> TrainConfig:
    # The audit's test-suite size (tests/test_audit.py): 200 examples, 4 steps at z = 5.
    options = {
        "epochs": 4,
        "batch_size": DATA["n_train"],
        "hidden": (64, 64),
        "alignment": False,
        "noise_multiplier": 5.0,
        **kw,
    }
    return TrainConfig.for_method(method, features="pixels", **options)


def _inspect(method: str = "dp-dfa", **kw) -> InspectionReport:
    return inspect(_config(method, **kw), data=clusters(**DATA))


def _centring_config() -> TrainConfig:
    return TrainConfig.for_method(
        "dp-sgd", **SCATTER_LINEAR, center_features=True, centering_noise=20.0, noise_multiplier=2.0
    )


def _flagged(report: InspectionReport) -> set[tuple[str, str]]:
    return {(row.mechanism, row.quantity) for row in report.findings}


def _assert_flags(report: InspectionReport, mechanism: str, quantity: str) -> None:
    assert any(mechanism in m and quantity in q for m, q in _flagged(report)), report.table()


# -- planted bugs -------------------------------------------------------------------------------------
def _half_device_noise(monkeypatch):
    """Device counts drawn at a quarter of the accounted Poisson mean (half the std), the check skipped."""
    monkeypatch.setattr(
        mechanisms, "skellam_counts", lambda device, n, mean, who="device": device.draw_privacy_counts(n, mean / 4)
    )


def _half_lattice_sensitivity(monkeypatch):
    """The lattice's charged L2 sensitivity halved (event and Poisson mean both follow it)."""
    original = SkellamLattice.l2_sensitivity.fget
    monkeypatch.setattr(SkellamLattice, "l2_sensitivity", property(lambda self: original(self) / 2))


def _gaussian_release(transform):
    def release(self, u: torch.Tensor) -> torch.Tensor:
        noise = self.generator.standard_normal(u.numel(), u.device).to(dtype=u.dtype).view_as(u)
        return u + self.noise_std * transform(self, noise)

    return release


def _rounded_noise(monkeypatch):
    monkeypatch.setattr(mechanisms.GaussianRelease, "release", _gaussian_release(lambda self, n: torch.round(n)))


def _rademacher_noise(monkeypatch):
    monkeypatch.setattr(mechanisms.GaussianRelease, "release", _gaussian_release(lambda self, n: torch.sign(n)))


def _noise_reused_across_steps(monkeypatch):
    def reused(self, noise):
        if not hasattr(self, "_first_noise"):
            self._first_noise = noise
        return self._first_noise

    monkeypatch.setattr(mechanisms.GaussianRelease, "release", _gaussian_release(reused))


def _noise_seeded_from_seed(monkeypatch):
    def seeded(self, noise):
        self._step = getattr(self, "_step", -1) + 1
        generator = torch.Generator().manual_seed(0 + self._step)  # --seed 0, the step number
        return torch.randn(noise.shape, generator=generator, dtype=noise.dtype)

    monkeypatch.setattr(mechanisms.GaussianRelease, "release", _gaussian_release(seeded))


def _every_example_in_every_batch(monkeypatch):
    monkeypatch.setattr(sampling.Sampler, "_inclusions", lambda self, generator: torch.arange(self.dataset_size))


def _sampler_drops_the_last_batch(monkeypatch):
    original = sampling.sample_without_replacement
    monkeypatch.setattr(sampling, "sample_without_replacement", lambda generator, n, m: original(generator, n - m, m))


def _batch_sum_clipping(monkeypatch):
    """No per-example clip; the batch's summed gradient clipped to C instead."""
    monkeypatch.setattr(DPSGD, "_clip_scale", lambda self, squared: torch.ones_like(squared))
    release = DPSGD._release

    def clipped(self, params, flat):
        return release(self, params, clip_norm(flat[None], self.context.config.clip_norm)[0])

    monkeypatch.setattr(DPSGD, "_release", clipped)


def _clip_skipped_for_one_layer(monkeypatch):
    def unclipped_first(self, layers, deltas, inputs):
        m, tau_h = self.context.config.batch_size, self.context.config.tau_h
        for i, (layer, delta, h) in enumerate(zip(layers, deltas, inputs)):
            layer.weight.grad = (delta / m).T @ (h.detach() if i == 0 else clip_norm(h.detach(), tau_h))
            layer.bias.grad = (delta / m).sum(0)

    monkeypatch.setattr(DPDFA, "_set_linear_updates", unclipped_first)


def _extra_release_per_step(monkeypatch):
    """Two noisy releases per step averaged (half the variance), one event charged."""

    def twice(self, flat=None):
        params = [p for layer in self._layers() for p in (layer.weight, layer.bias)]
        flat = torch.cat([p.grad.flatten() for p in params]) if flat is None else flat
        released = (self.release(flat) + self.release(flat)) / 2
        for p, part in zip(params, released.split([p.numel() for p in params])):
            p.grad = part.view_as(p)

    monkeypatch.setattr(DPDFA, "_add_noise", twice)


def _centring_without_noise(monkeypatch):
    original = centering.private_mean

    def exact(x, radius, z, size, neighboring, generator=None):
        released = original(x, radius, z, size, neighboring, generator)
        return centering.Centering(
            (centering.clipped_sum(x.cpu(), radius) / size).to(x.dtype),
            radius,
            released.noise_multiplier,
            released.noise_std,
            released.event,
            released.generator,
        )

    monkeypatch.setattr(centering, "private_mean", exact)


# (name, plant, method, config changes, mechanism named, quantity flagged)
ZOO = [
    (
        "device noise at half its accounted std",
        _half_device_noise,
        "dp-dfa",
        {"noise_source": "device"},
        "device Skellam",
        "noise std",
    ),
    (
        "lattice sensitivity charged at half",
        _half_lattice_sensitivity,
        "dp-dfa",
        {"noise_source": "device"},
        "device Skellam",
        "per unit of sensitivity",
    ),
    ("Gaussian noise rounded to multiples of its std", _rounded_noise, "dp-dfa", {}, "software Gaussian", "distinct"),
    (
        "Poisson sampling claimed, every example in every batch",
        _every_example_in_every_batch,
        "dp-sgd",
        {"batch_size": 50},
        "sampler (poisson)",
        "inclusion rate",
    ),
    ("batch-sum clipping under add/remove", _batch_sum_clipping, "dp-sgd", {}, "update release", "per-example terms"),
    ("Rademacher noise of the right std", _rademacher_noise, "dp-dfa", {}, "software Gaussian", "law"),
    # of our own
    ("noise reused across steps", _noise_reused_across_steps, "dp-dfa", {}, "software Gaussian", "across steps"),
    ("noise seeded from --seed", _noise_seeded_from_seed, "dp-dfa", {}, "per-step noise", "second run"),
    (
        "fixed-size sampler never draws the last batch",
        _sampler_drops_the_last_batch,
        "dp-dfa",
        {"batch_size": 50},
        "sampler (fixed)",
        "inclusion",
    ),
    (
        "input clip skipped for the first layer",
        _clip_skipped_for_one_layer,
        "dp-dfa",
        {},
        "update release",
        "sensitivity",
    ),
    ("an extra release per step, one charged", _extra_release_per_step, "dp-dfa", {}, "releases", "drawn"),
]


@pytest.mark.parametrize("name, plant, method, changes, mechanism, quantity", ZOO, ids=[z[0] for z in ZOO])
def test_the_inspector_names_the_mechanism_of_a_planted_bug(
    monkeypatch, name, plant, method, changes, mechanism, quantity
):
    plant(monkeypatch)
    _assert_flags(_inspect(method, **changes), mechanism, quantity)


def test_centring_without_noise_is_flagged(monkeypatch, tmp_path):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    _centring_without_noise(monkeypatch)
    _assert_flags(inspect(_centring_config(), data=tiny_images_dataset()), "centring release", "noise std")


# -- sound runs -----------------------------------------------------------------------------------------
SOUND = [
    ("dp-dfa", {}),
    ("dp-dfa", {"noise_source": "device"}),
    ("dp-dfa", {"noise_source": "device", "profile": "opu-sim-8bit"}),
    ("dp-dfa", {"sampling": "poisson", "batch_size": 50}),
    ("dp-dfa", {"noise_source": "device", "sampling": "poisson", "batch_size": 50}),
    ("dp-dfa", {"batch_size": 50}),
    ("dp-sgd", {}),
    ("dp-sgd", {"batch_size": 50}),
    ("dp-mac", {"batch_size": 50}),
    ("dp-ulr", {"batch_size": 50}),
]


@pytest.mark.parametrize("method, changes", SOUND, ids=[f"{m}-{c}" for m, c in SOUND])
def test_a_sound_run_is_never_flagged(method, changes):
    """The noise comes from OS entropy, so a sound run's report is flagged by chance with probability
    at most the inspector's alpha (1e-3): one flag is inspected again with fresh noise, and a sound run
    fails only when flagged twice (at most 1e-6); a broken mechanism is flagged every time."""
    report = _inspect(method, **changes)
    if report.flagged:
        report = _inspect(method, **changes)
    assert not report.flagged, report.table()
    assert len(report.rows) >= 5


def test_a_run_charged_an_unbounded_event_says_what_was_not_inspected():
    report = _inspect("photonic-dp", batch_size=50)
    assert not report.flagged
    assert any("unbounded" in reason for reason in report.not_inspected)


def test_a_sound_centred_run_is_not_flagged_and_its_centring_is_inspected(monkeypatch, tmp_path):
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    report = inspect(_centring_config(), data=tiny_images_dataset())
    if report.flagged:  # by chance at most alpha = 1e-3 (fresh OS-entropy noise): inspected once more
        report = inspect(_centring_config(), data=tiny_images_dataset())
    assert not report.flagged, report.table()
    assert any(row.mechanism.startswith("centring") for row in report.rows)


def test_the_report_serialises_to_json_with_its_verdicts():
    record = json.loads(json.dumps(_inspect().to_dict()))
    assert record["flagged"] is False and record["findings"] == []
    assert {"mechanism", "measured", "charged", "flagged"} <= set(record["rows"][0])


def test_cli_audit_inspect_prints_the_table_and_writes_the_record(tmp_path, capsys):
    from opu_hal.cli import main

    out = tmp_path / "inspection.json"
    main(cli_argv("audit", inspect=True, **SMALL_DIGITS_AUDIT, batch_size="50", epochs="1", out=out))
    printed = capsys.readouterr().out
    assert "no mechanism flagged" in printed and "sampler (poisson)" in printed
    record = json.loads(out.read_text())
    assert record["method"] == "dp-sgd" and record["flagged"] is False
