"""One training run's settings, as a plain dataclass the CLI and the Python API share.

Defaults are paper 000's non-private FashionMNIST setting (section 4): 784-512-512-10 tanh,
15 epochs, batch 256, SGD lr 0.01 momentum 0.9, TDFA threshold 0.15. Private methods override
what their paper uses (see :data:`METHOD_DEFAULTS`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .errors import TrainingConfigError

# How pixels in [0, 1] reach the network: as they are, centred to [-1, 1], or standardized with
# the training split's mean and std (two scalars; private methods default to "unit", which reads
# nothing from the private data).
INPUT_SCALINGS = ("unit", "centered", "standardized")

METHOD_NAMES = ("bp", "dfa", "tdfa", "pdfa", "photonic-dp", "dp-dfa", "dp-sgd", "dp-ulr", "dp-mac")

PRIVATE_METHODS = frozenset({"photonic-dp", "dp-dfa", "dp-sgd", "dp-ulr", "dp-mac"})

# Profile used when none is given; None: the method needs no device.
DEFAULT_PROFILES: dict[str, str | None] = {
    "bp": None, "dfa": "torch-auto", "tdfa": "torch-auto", "pdfa": "opu-sim",
    "photonic-dp": "torch-cpu", "dp-dfa": None, "dp-sgd": None, "dp-ulr": None, "dp-mac": None,
}

# Paper 002, section 5: Adam (lr 1e-3), beta = 0.9, tau_e = 0.1; fully connected 128-256 sigmoid,
# batch 128. Paper 000 Table 1 private columns keep the non-private SGD setting.
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    "photonic-dp": {"inputs": "unit"},
    "dp-dfa": {"inputs": "unit", "optimizer": "adam", "lr": 1e-3, "hidden": (128, 256), "activation": "sigmoid",
               "batch_size": 128},
    "dp-sgd": {"inputs": "unit", "optimizer": "adam", "lr": 1e-3, "hidden": (128, 256), "activation": "sigmoid",
               "batch_size": 128},
    # Paper 004, section 4.2: MLP 128-64-32-10 GELU, Adam lr 0.01, C = 1, batch 500 (q = 1/120).
    "dp-ulr": {"inputs": "unit", "optimizer": "adam", "lr": 0.01, "hidden": (128, 64, 32), "activation": "gelu",
               "batch_size": 500},
    # Paper 003, Table 2 (classifier): 300-100 softplus, batch 50, Adam W lr 0.003.
    "dp-mac": {"inputs": "unit", "optimizer": "adam", "lr": 0.003, "hidden": (300, 100), "activation": "softplus",
               "batch_size": 50},
}


@dataclass
class TrainConfig:
    method: str = "dfa"
    profile: str | None = None
    dataset: str = "fashion-mnist"
    data_dir: str | None = None
    epochs: int = 15
    batch_size: int = 256
    hidden: tuple[int, ...] = (512, 512)
    activation: str = "tanh"
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    seed: int = 0
    threshold: float = 0.15
    ternarize: bool = False
    validation_fraction: float = 0.1
    inputs: str = "standardized"
    train_limit: int | None = None
    alignment: bool = True
    # private training
    target_epsilon: float | None = None
    delta: float = 1e-5
    noise_multiplier: float | None = None
    noise_source: str = "software"
    sampling: str | None = None
    clip_norm: float = 1.0
    beta: float = 0.9
    tau_e: float = 0.1
    tau_h: float = 1.0
    tau_h_min: float = 0.0
    tau_h_max: float = 1.0
    tau_b: float = 1.0
    sigma: float | None = None
    temperature_c: float | None = None
    lattice_resolution: float = 10.0
    compute: str = "auto"
    # checkpoints
    checkpoint: str | None = None
    checkpoint_every: int = 50
    resume: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["hidden"] = list(self.hidden)
        return data

    @classmethod
    def for_method(cls, method: str, **overrides: Any) -> "TrainConfig":
        """A config with ``method``'s paper defaults, then ``overrides`` (``None`` values ignored)."""
        base = dict(METHOD_DEFAULTS.get(method, {}))
        base.update({k: v for k, v in overrides.items() if v is not None})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise TrainingConfigError(f"unknown training options: {', '.join(unknown)}")
        config = cls(method=method, **{k: v for k, v in base.items() if k != "method"})
        config.validate()
        return config

    def with_(self, **changes: Any) -> "TrainConfig":
        return replace(self, **changes)

    @property
    def profile_name(self) -> str | None:
        if self.profile is not None:
            return self.profile
        if self.method == "dp-dfa" and self.noise_source == "device":
            return "opu-sim-dp"
        return DEFAULT_PROFILES.get(self.method)

    def validate(self) -> None:
        """Refuse impossible settings, naming the option and the allowed range."""
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise TrainingConfigError(message)

        need(self.method in METHOD_NAMES, f"--method {self.method!r}: choose one of {', '.join(METHOD_NAMES)}")
        need(self.epochs >= 1, f"--epochs must be >= 1, got {self.epochs}")
        need(self.batch_size >= 1, f"--batch-size must be >= 1, got {self.batch_size}")
        need(len(self.hidden) >= 1 and all(w >= 1 for w in self.hidden),
             f"--hidden needs one or more positive widths, got {list(self.hidden)}")
        need(math.isfinite(self.lr) and self.lr > 0, f"--lr must be > 0, got {self.lr}")
        need(0 <= self.momentum < 1, f"--momentum must be in [0, 1), got {self.momentum}")
        need(self.optimizer in ("sgd", "adam"), f"--optimizer {self.optimizer!r}: choose sgd or adam")
        need(0 <= self.threshold < 1, f"--threshold must be in [0, 1), got {self.threshold}")
        need(self.train_limit is None or self.train_limit >= self.batch_size,
             f"--train-limit must be >= --batch-size ({self.batch_size}), got {self.train_limit}")
        need(self.inputs in INPUT_SCALINGS, f"--inputs {self.inputs!r}: choose one of {', '.join(INPUT_SCALINGS)}")
        need(self.noise_source in ("software", "device"),
             f"--noise-source {self.noise_source!r}: choose software or device")
        need(self.sampling in (None, "poisson", "fixed", "rejection"),
             f"--sampling {self.sampling!r}: choose poisson, fixed or rejection (dp-ulr)")
        need(0 < self.delta < 1, f"--delta must be in (0, 1), got {self.delta}")
        need(self.target_epsilon is None or self.target_epsilon > 0,
             f"--target-epsilon must be > 0, got {self.target_epsilon}")
        need(self.noise_multiplier is None or self.noise_multiplier > 0,
             f"--noise-multiplier must be > 0, got {self.noise_multiplier}")
        for name in ("clip_norm", "beta", "tau_e", "tau_h", "tau_h_max", "tau_b"):
            value = getattr(self, name)
            need(math.isfinite(value) and value > 0, f"--{name.replace('_', '-')} must be > 0, got {value}")
        need(0 <= self.tau_h_min <= self.tau_h_max,
             f"--tau-h-min must be in [0, tau_h_max={self.tau_h_max}], got {self.tau_h_min}")
        need(self.compute in ("auto", "cpu", "cuda"), f"--compute {self.compute!r}: choose auto, cpu or cuda")
        need(math.isfinite(self.lattice_resolution) and 0.5 <= self.lattice_resolution <= 1000,
             f"--lattice-resolution must be in [0.5, 1000], got {self.lattice_resolution}")
        need(self.sigma is None or self.sigma >= 0, f"--sigma must be >= 0, got {self.sigma}")
        need(self.checkpoint_every >= 1, f"--checkpoint-every must be >= 1, got {self.checkpoint_every}")
        need(not self.resume or self.checkpoint is not None, "--resume needs --checkpoint PATH")
        if self.method in ("dp-dfa", "dp-sgd", "dp-ulr", "dp-mac"):
            need(self.target_epsilon is not None or self.noise_multiplier is not None,
                 f"method {self.method!r} needs --target-epsilon (noise chosen for it) or --noise-multiplier")
        if self.method not in PRIVATE_METHODS:
            given = [flag for flag, value in (("--target-epsilon", self.target_epsilon),
                                              ("--noise-multiplier", self.noise_multiplier),
                                              ("--noise-source device", self.noise_source == "device" or None))
                     if value is not None]
            need(not given, f"method {self.method!r} is not private: {', '.join(given)} would be ignored; "
                            f"use a private method ({', '.join(sorted(PRIVATE_METHODS))})")
