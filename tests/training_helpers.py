"""Small synthetic datasets and devices for the trainer tests (fast, no files)."""

from __future__ import annotations

import torch

from opu_hal import load_device
from opu_hal.profiles.catalogue import validate_profile
from trainers.core.data import Dataset, Split


def clusters(
    n_train: int = 600, n_test: int = 200, features: int = 20, classes: int = 10, seed: int = 0, spread: float = 0.6
) -> Dataset:
    """Separable Gaussian clusters: every method should learn them."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g)

    def split(n: int) -> Split:
        y = torch.randint(0, classes, (n,), generator=g)
        return Split(centers[y] + spread * torch.randn(n, features, generator=g), y)

    return Dataset(name="clusters", train=split(n_train), validation=split(n_test // 2), test=split(n_test))


def torch_device(out_features: int = 48, in_features: int = 10, noise_std: float = 0.0, seed: int = 0):
    profile = validate_profile(
        {
            "backend": "torch",
            "in_features": in_features,
            "out_features": out_features,
            "seed": seed,
            "device": "cpu",
            "noise_std": noise_std,
            "input_kind": "real",
        }
    )
    return load_device(profile)


def simulated_device(out_features: int = 48, in_features: int = 10, seed: int = 0, **keys):
    profile = validate_profile(
        {
            "backend": "simulated",
            "in_features": in_features,
            "out_features": out_features,
            "seed": seed,
            "mode": "linear",
            **keys,
        }
    )
    return load_device(profile)


def interrupted_and_uninterrupted(make_config, data: Dataset, tmp_path) -> tuple[dict, dict]:
    """The records of a run stopped after its first epoch and resumed from that checkpoint (its
    journal saying half the steps drew noise), and of the same run continued in process.
    ``make_config(**changes)`` builds the run's config with the given checkpoint settings."""
    from pathlib import Path

    from trainers.run.loop import Trainer, train

    path = tmp_path / "ck.pt"
    first = Trainer(make_config(checkpoint=str(path)), data=data, progress=False, log=lambda m: None)
    first.run(max_epochs=1)
    saved = tmp_path / "saved.pt"
    saved.write_bytes(path.read_bytes())
    full = first.run()  # the uninterrupted run, continued in process
    first.release()
    path.write_bytes(saved.read_bytes())
    Path(f"{path}.journal").write_text("".join(f"{i}\n" for i in range(full["final"]["steps"] // 2)))
    Path(f"{path}.lock").write_text(f"draws {full['final']['steps'] // 2}\n")  # the lock's count agrees
    resumed = train(make_config(checkpoint=str(path), resume=True), data=data, progress=False, log=lambda m: None)
    return resumed, full


def cli_argv(command: str, **options: object) -> list[str]:
    """The argument list ``[command, --option value, ...]`` for ``trainers.cli.main``: each keyword
    becomes ``--name-with-dashes str(value)`` (a lone flag where the value is ``True``), in the order given."""
    argv = [command]
    for name, value in options.items():
        flag = f"--{name.replace('_', '-')}"
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def train_own_model(loader, model, optimizer, epochs: int = 1) -> int:
    """Plain cross-entropy training of a user's ``model`` through a private ``optimizer``: the steps taken."""
    import torch.nn.functional as F

    steps = 0
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            optimizer.step()
            steps += 1
    return steps


def private_dfa_on_device(engine, model, data_loader, device):
    """``engine.make_private`` of ``model`` for DP-DFA with the device's own noise (Adam at 1e-3,
    batches of 16, noise multiplier 2, clip 0.1)."""
    return engine.make_private(
        module=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
        data_loader=data_loader,
        batch_size=16,
        noise_multiplier=2.0,
        max_grad_norm=0.1,
        method="dp-dfa",
        noise_source="device",
        opu=device,
    )


#: ``opu-hal audit`` of DP-SGD on 200 digits, one hidden layer of 32, noise multiplier 5.
SMALL_DIGITS_AUDIT = dict(method="dp-sgd", dataset="digits", train_limit=200, hidden=32, noise_multiplier=5)

#: A linear model (no hidden layer) on scattering features of unit-norm inputs, one epoch of batches of 20.
SCATTER_LINEAR = dict(hidden=(), features="scatter", inputs="unit", epochs=1, batch_size=20, alignment=False)

#: The accounting examples' MNIST-sized run (``opu-hal account`` / ``plan``): 60000 examples, batches of 256.
MNIST_BATCHES = dict(dataset_size=60000, batch_size=256)
