"""Issue 27: the secret randomness of private runs (batch indices, DP-ULR and DP-MAC noise).

Each draw comes from a ChaCha20 stream keyed per step by 256 bits derived from a 256-bit secret,
never from a torch generator (torch keeps 32 bits of a seed: brute force recovers them) nor from
anything a record, log or command line shows. Resume still replays a step from the kept key.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable

import numpy as np
import pytest
import torch
from randomgen import ChaCha

from opu_hal.contract.errors import OpuHalError
from opu_hal.randomness.draws import bernoulli_indices, sample_without_replacement
from opu_hal.randomness.keyed_stream import keyed_stream
from opu_hal.randomness.secure_random import keyed_generator, new_secret_key, stream_key
from opu_hal.randomness.seeding import derive_seed
from tests.training_helpers import clusters
from trainers.core import mac
from trainers.core.model import MLP
from trainers.core.sampling import COMPILED_STREAM, PREFIX_STREAM, RANDOMGEN_STREAM, Sampler, default_stream
from trainers.methods import METHODS, MethodContext
from trainers.methods.dp_mac import DPMAC
from trainers.methods.dp_ulr import DPULR
from trainers.run.config import TrainConfig
from trainers.run.loop import Trainer, train

HIDDEN = (16, 12)
KEY = "c3" * 32


def cfg(method: str, **kw) -> TrainConfig:
    base = dict(epochs=1, batch_size=40, hidden=HIDDEN, seed=0, inputs="unit", alignment=False, features="pixels")
    base.update(kw)
    return TrainConfig.for_method(method, **base)


def dp_mac(secret_key: str) -> DPMAC:
    config = cfg("dp-mac", noise_multiplier=1.0, extra={"z_steps": "2"})
    method = METHODS["dp-mac"](
        MLP([20, *HIDDEN, 10], config.activation, seed=0), MethodContext(config, None, 20, 10, 600)
    )
    method.set_noise_multiplier(1.0)
    method.secret_key = secret_key
    return method


def old_torch_seed(key: str, stream: str, index: int) -> int:
    """The seed torch kept under the pre-issue-27 recipe: keyed BLAKE2b-64 >> 1, low 32 bits."""
    digest = hashlib.blake2b(f"{stream}:{index}".encode(), key=bytes.fromhex(key), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 1) & 0xFFFFFFFF


def blake2b_256(key: str, stream: str, index: int) -> int:
    digest = hashlib.blake2b(f"{stream}:{index}".encode(), key=bytes.fromhex(key), digest_size=32).digest()
    return int.from_bytes(digest, "little")


def colliding_keys(derive: Callable[[str], int], bits: int = 32) -> tuple[str, str]:
    """Two distinct 256-bit keys whose ``derive`` values agree on their low ``bits`` bits
    (birthday search, about 2^(bits/2) keys: what an attacker who knows the recipe can do too)."""
    seen: dict[int, str] = {}
    for i in itertools.count():
        key = hashlib.blake2b(i.to_bytes(8, "little"), digest_size=32).hexdigest()
        low = derive(key) & ((1 << bits) - 1)
        if low in seen:
            return seen[low], key
        seen[low] = key
    raise AssertionError("unreachable")


DERIVED_VALUES = {"old torch seed": old_torch_seed, "BLAKE2b-256": blake2b_256}


# -- key size --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["dp-ulr", "dp-mac"])
def test_secret_keys_have_at_least_128_bits(name):
    trainer = Trainer(cfg(name, noise_multiplier=4.0), data=clusters(), progress=False, log=lambda m: None)
    for key in (trainer.sampler.secret_key, trainer.method.secret_key, new_secret_key()):
        assert key is not None and len(bytes.fromhex(key)) * 8 >= 128
    trainer.release()
    with pytest.raises(OpuHalError, match="at least 128 bits"):
        keyed_generator("ab" * 8, "batch", 0)  # a 64-bit secret is refused


def test_a_step_stream_depends_on_every_bit_of_its_256_bit_key():
    derived = stream_key(KEY, "batch", 3)
    assert derived == blake2b_256(KEY, "batch", 3) and derived >= 1 << 128  # 2^-128 chance of a false failure
    first = keyed_generator(KEY, "batch", 3).random(4)
    assert np.array_equal(first, np.random.Generator(ChaCha(key=derived, rounds=20)).random(4))
    for bit in range(256):
        flipped = np.random.Generator(ChaCha(key=derived ^ (1 << bit), rounds=20)).random(4)
        assert not np.array_equal(first, flipped), bit


@pytest.mark.parametrize("kind", ["fixed", "poisson"])
@pytest.mark.parametrize("derived", DERIVED_VALUES.values(), ids=DERIVED_VALUES.keys())
def test_keys_agreeing_on_32_bits_of_a_derived_value_draw_different_batches(kind, derived):
    a, b = colliding_keys(lambda key: derived(key, "batch", 0))
    batches = [Sampler(kind, 1000, 50, seed=0, secret_key=key).batch(0, 0) for key in (a, b)]
    assert not torch.equal(*batches)


@pytest.mark.parametrize("derived", DERIVED_VALUES.values(), ids=DERIVED_VALUES.keys())
def test_keys_agreeing_on_32_bits_of_a_derived_value_draw_different_dp_mac_noise(derived):
    a, b = colliding_keys(lambda key: derived(key, "noise", 0))
    data = clusters(n_train=40)
    grads = []
    for key in (a, b):
        method = dp_mac(key)
        method.compute_gradients(data.train.x, data.train.y)
        grads.append(method.model.layers[0].weight.grad.clone())
    assert not torch.equal(*grads)


# -- no torch seeding on the privacy paths ---------------------------------------------------------
class PrivacyPathProbe:
    """Counts, inside the wrapped privacy paths only, torch generators made or seeded and draws
    from torch's global generator (seeded by a fixed default or ``torch.manual_seed``)."""

    def __init__(self) -> None:
        self.depth = 0
        self.entered: dict[str, int] = {}
        self.events: list[str] = []

    def wrap(self, name: str, function: Callable) -> Callable:
        def wrapped(*args, **kwargs):
            self.entered[name] = self.entered.get(name, 0) + 1
            self.depth += 1
            before = torch.default_generator.get_state()
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1
                if not torch.equal(before, torch.default_generator.get_state()):
                    self.events.append(f"{name}: drew from torch's global generator")

        return wrapped

    def generator_class(self) -> type:
        probe = self

        class RecordingGenerator(torch.Generator):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                if probe.depth:
                    probe.events.append("torch.Generator() made")

            def manual_seed(self, seed):
                if probe.depth:
                    probe.events.append(f"torch.Generator.manual_seed({seed})")
                return super().manual_seed(seed)

        return RecordingGenerator


@pytest.mark.parametrize(
    "name, kw",
    [
        ("dp-ulr", {"noise_multiplier": 4.0}),
        ("dp-ulr", {"noise_multiplier": 4.0, "extra": {"mode": "controller"}}),
        ("dp-mac", {"noise_multiplier": 1.0, "extra": {"z_steps": "2", "bounds": "histogram"}}),
        ("dp-sgd", {"noise_multiplier": 1.0, "sampling": "fixed"}),
    ],
)
def test_private_batches_and_noise_never_seed_a_torch_generator(name, kw, monkeypatch):
    probe = PrivacyPathProbe()
    for owner, attribute in [
        (Sampler, "batch"),
        (DPULR, "compute_gradients"),
        (DPMAC, "compute_gradients"),
        (DPMAC, "prepare"),
    ]:
        monkeypatch.setattr(owner, attribute, probe.wrap(f"{owner.__name__}.{attribute}", getattr(owner, attribute)))
    monkeypatch.setattr(torch, "Generator", probe.generator_class())
    seed_global = torch.manual_seed
    monkeypatch.setattr(
        torch,
        "manual_seed",
        lambda s: (probe.depth and probe.events.append(f"torch.manual_seed({s})"), seed_global(s))[1],
    )
    train(cfg(name, **kw), data=clusters(n_train=200), progress=False, log=lambda m: None)
    assert probe.entered["Sampler.batch"] >= 5
    if name != "dp-sgd":
        assert probe.entered[f"{'DPULR' if name == 'dp-ulr' else 'DPMAC'}.compute_gradients"] >= 5
    if name == "dp-mac":
        assert probe.entered["DPMAC.prepare"] == 1
    assert probe.events == []


# -- nothing data-dependent published uncharged ----------------------------------------------------
def test_dp_ulr_describe_is_the_same_whatever_the_batches_were():
    """Issue 27, item 5: the batch size (Poisson with rejection), the controller's forward stds
    (second moment) and the lifted directions (spectrum) must not reach the record."""
    config = cfg("dp-ulr", noise_multiplier=4.0, extra={"mode": "controller"})
    descriptions = []
    for seed, n in [(1, 40), (2, 55)]:
        method = METHODS["dp-ulr"](
            MLP([20, *HIDDEN, 10], config.activation, seed=0), MethodContext(config, None, 20, 10, 600)
        )
        method.set_noise_multiplier(4.0)
        data = clusters(n_train=n, seed=seed, spread=0.1 * seed)
        method.compute_gradients(data.train.x, data.train.y)
        descriptions.append(method.describe())
    assert descriptions[0] == descriptions[1]


# -- replay from what a record shows ----------------------------------------------------------------
def public_seeds(seed: int, step: int) -> list[int]:
    """Seeds an attacker derives from a record (config seed, step number) with the project's
    derivations, each also as torch keeps it (low 32 bits)."""
    seeds = [
        seed,
        step,
        derive_seed(seed, step),
        derive_seed(seed, "noise", step),
        derive_seed(seed, "batch", step),
        derive_seed(seed, "mac-noise", step),
    ]
    return sorted({s for value in seeds for s in (value, value & 0xFFFFFFFF)})


def test_replay_attack_cannot_rebuild_a_dp_mac_steps_noise():
    """The old recipe: a torch generator from a seed. Candidates are every public seed, plus the
    32-bit torch seed a 2^32 brute force (about an hour) finds under the pre-issue-27 derivation;
    the search itself is replaced by its answer. No candidate cancels any of the noise."""
    data = clusters(n_train=40)
    x, y = data.train.x, data.train.y
    method = dp_mac(new_secret_key())
    method.current_step = step = 7
    coords = mac.aux_coordinates(method.model, x, y, 2, method.options["z_lr"], method.options["t_z"])
    clean, _ = mac.clipped_layer_sums(mac.layer_deltas(method.model, coords, y), coords, method.bounds)[0]
    method.compute_gradients(x, y)
    noise = method.model.layers[0].weight.grad * method.context.config.batch_size - clean
    std = method.layer_noise_std(0)
    assert float(noise.std()) == pytest.approx(std, rel=0.1)
    candidates = [*public_seeds(method.context.config.seed, step), old_torch_seed(method.secret_key, "noise", step)]
    for seed in candidates:
        rebuilt = std * torch.randn(noise.shape, generator=torch.Generator().manual_seed(seed))
        assert float((noise - rebuilt).norm()) > 1.2 * float(noise.norm()), seed  # independent: about sqrt(2)


# -- resume ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [PREFIX_STREAM, COMPILED_STREAM, RANDOMGEN_STREAM])
@pytest.mark.parametrize("kind", ["fixed", "poisson", "rejection"])
def test_a_kept_key_replays_the_same_batches(kind, stream):
    if stream != RANDOMGEN_STREAM:
        pytest.importorskip("numba")
    first = Sampler(kind, 300, 30, seed=0, min_batch=24, secret_key=new_secret_key(), stream=stream)
    resumed = Sampler(
        kind, 300, 30, seed=0, min_batch=24, secret_key=new_secret_key(), stream=default_stream()
    ).with_state(first.state_dict())  # what resume does
    other = Sampler(kind, 300, 30, seed=0, min_batch=24, secret_key=new_secret_key(), stream=stream)
    for epoch, step in [(0, 0), (0, 5), (2, 9)]:
        batch = first.batch(epoch, step)
        assert torch.equal(batch, first.batch(epoch, step)) and torch.equal(batch, resumed.batch(epoch, step))
        assert not torch.equal(batch, other.batch(epoch, step))
    source = (keyed_generator if stream == RANDOMGEN_STREAM else keyed_stream)(first.secret_key, "batch", 0)

    def poisson() -> torch.Tensor:
        if stream == PREFIX_STREAM:
            return torch.from_numpy(source.bernoulli_indices(300, 0.1))
        return bernoulli_indices(source, 300, 0.1)

    expected = sample_without_replacement(source, 300, 30) if kind == "fixed" else poisson()
    if kind == "rejection":
        while len(expected) < 24:
            expected = poisson()
    assert torch.equal(first.batch(0, 0), expected)  # the step's keyed ChaCha20 stream, nothing else


def test_a_kept_key_replays_the_same_dp_mac_noise():
    data = clusters(n_train=40)
    first, resumed = dp_mac(new_secret_key()), dp_mac(new_secret_key())
    resumed.load_state_dict(first.state_dict())
    grads = []
    for method in (first, resumed):
        method.current_step = 11
        method.compute_gradients(data.train.x, data.train.y)
        grads.append(method.model.layers[0].weight.grad.clone())
    assert torch.equal(*grads)
