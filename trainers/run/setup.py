"""What a run is built from: the network, the optimizer, the method, the sampler, the public dataset
size, the compute device and the checks made before any work (model memory, output paths)."""

from __future__ import annotations

import os

import torch

from opu_hal import Device, load_device
from opu_hal.runtime.memory import available_bytes, gib

from ..core.cnn import CNN
from ..core.data import Dataset, Split
from ..core.errors import TrainingConfigError
from ..core.model import MLP
from ..core.sampling import Sampler, default_sampler_stream
from ..distributed.context import SingleProcess
from ..distributed.setup import rank_profile, shared_secret, shared_stream
from ..methods import METHODS, Method, MethodContext
from .config import TrainConfig


def make_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)


def open_run_device(config: TrainConfig, ranks: SingleProcess) -> Device | None:
    """The config's device when the run needs one (this rank's profile), else ``None``."""
    cls = METHODS[config.method]
    profile = config.profile_name
    if profile is None or not (cls.uses_device or config.profile is not None or config.noise_source == "device"):
        return None
    return load_device(rank_profile(profile, ranks), calibration=config.calibration)


def apply_operating_point(device: Device | None, temperature_c: float | None) -> None:
    """Set ``--temperature-c`` on ``device``; refused on a profile whose temperature is not settable."""
    if device is None or temperature_c is None:
        return
    if not device.capabilities.temperature_settable:
        raise TrainingConfigError(f"--temperature-c: profile {device.profile.label!r} has no settable temperature")
    device.set_options(temperature_c=temperature_c)


def build_network(config: TrainConfig, data: Dataset, compute: torch.device) -> MLP | CNN:
    """The config's network (``--model cnn`` or the MLP of ``--hidden``), seeded, on ``compute``."""
    network: MLP | CNN
    if config.model == "cnn":
        network = CNN(
            data.n_features,
            config.hidden,
            data.n_classes,
            config.activation,
            seed=config.seed,
            features=config.features,
            strides=config.conv_strides,
            head=config.head_hidden,
            kernel=config.conv_kernel,
            pool=config.conv_pool,
            head_activation=config.head_activation,
        )
    else:
        network = MLP([data.n_features, *config.hidden, data.n_classes], config.activation, seed=config.seed)
    return network.to(compute)


def build_sampler(config: TrainConfig, method: Method, train_size: int, ranks: SingleProcess) -> Sampler:
    """The run's batch sampler: a private method's is keyed by a secret every rank shares."""
    return Sampler(
        config.sampling or method.sampling,
        train_size,
        config.batch_size,
        config.seed,
        min_batch=method.min_batch,
        secret_key=shared_secret(ranks) if method.private else None,
        public_size=public_size(config, train_size),
        stream=shared_stream(ranks) if method.private else default_sampler_stream(),
    )


def build_method(config: TrainConfig, model: MLP, device: Device | None, data: Dataset, train: Split) -> Method:
    """The config's method; its accounting sees the public dataset size (:func:`public_size`)."""
    cls = METHODS[config.method]
    context = MethodContext(
        config=config,
        device=device,
        n_features=data.n_features,
        n_classes=data.n_classes,
        dataset_size=public_size(config, len(train)),
    )
    method = cls(model, context)
    if config.public_dataset_size is not None and method.neighboring != "add_remove":
        raise TrainingConfigError(
            f"--public-dataset-size applies under add/remove adjacency; method {config.method!r} "
            f"({config.sampling or cls.sampling} sampling) is accounted under replace-one, whose neighbours "
            "share the dataset size: drop the option"
        )
    return method


def public_size(config: TrainConfig, actual: int) -> int:
    """The training-set size a run's shape and accounting use: the declared public size under
    add/remove (``--public-dataset-size``: the true ``n`` then stays private), else ``n`` itself,
    which the record then declares public (:mod:`trainers.run.public_surface`)."""
    return actual if config.public_dataset_size is None else config.public_dataset_size


def dataset_size_statement(config: TrainConfig, neighboring: str) -> str:
    """What the record says about the training-set size it publishes (issue 27, item 3)."""
    if neighboring == "replace_one":
        return "public: replace-one neighbours share the training-set size n"
    if config.public_dataset_size is not None:
        return (
            "declared public bound (--public-dataset-size): sampling rate, steps and record use it; "
            "the true n is not published"
        )
    return (
        "public by convention: n was read from the data and is published; pass --public-dataset-size "
        "to keep it private under add/remove"
    )


def _limit(split: Split, limit: int | None) -> Split:
    if limit is None or limit >= len(split):
        return split
    return Split(split.x[:limit], split.y[:limit])


def resolve_compute(requested: str, method: type[Method]) -> torch.device:
    """``auto`` -> CUDA when present and the method supports it, else CPU; ``cuda`` without CUDA refused."""
    if requested == "cuda" and not torch.cuda.is_available():
        raise TrainingConfigError(
            f"--compute cuda: torch {torch.__version__} sees no CUDA device; use --compute cpu or auto"
        )
    if requested == "cuda" and not method.cuda_ready:
        raise TrainingConfigError(f"--compute cuda: method {method.name!r} runs on the CPU only; use --compute cpu")
    if requested == "auto" and torch.cuda.is_available() and method.cuda_ready:
        return torch.device("cuda")
    return torch.device("cuda" if requested == "cuda" else "cpu")


def _to(data: Dataset, device: torch.device) -> Dataset:
    if device.type == "cpu":
        return data
    move = lambda split: Split(split.x.to(device), split.y.to(device))  # noqa: E731
    return data.with_splits(move(data.train), move(data.validation), move(data.test))


MODEL_COPIES = 6  # weights, gradients, Adam's two moments, feedback matrices, one released update


def check_model_memory(sizes: list[int], batch_size: int) -> None:
    """Refuse, before allocating, a model whose training would not fit in the host's memory."""
    parameters = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))
    need = 4 * (MODEL_COPIES * parameters + 4 * batch_size * sum(sizes))
    available = available_bytes()
    if need > available:
        raise TrainingConfigError(
            f"--hidden {','.join(map(str, sizes[1:-1]))} with --batch-size {batch_size} needs about {gib(need)} "
            f"({parameters} parameters) but {gib(available)} is available; use smaller widths or batches"
        )


def check_output_path(path: str | os.PathLike[str], option: str) -> None:
    """Refuse, before any training, an output path that could not be written afterwards."""
    from opu_hal.runtime.paths import unwritable_reason

    reason = unwritable_reason(path)
    if reason is not None:
        raise TrainingConfigError(f"{option} {path}: {reason}")
