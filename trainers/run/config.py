"""One training run's settings, as a plain dataclass the CLI and the Python API share.

Defaults are paper 000's non-private FashionMNIST setting (section 4): 784-512-512-10 tanh,
15 epochs, batch 256, SGD lr 0.01 momentum 0.9, TDFA threshold 0.15. Private methods override
what their paper uses (``Method.defaults``, applied by :meth:`TrainConfig.for_method`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ..core.averaging import SCHEDULES
from ..core.centering import DEFAULT_CENTERING_NOISE
from ..core.errors import TrainingConfigError
from ..methods import METHODS, Method, get_method

# How pixels in [0, 1] reach the network: as they are, centred to [-1, 1], or standardized with
# two scalars, a mean and a std: of the training split in non-private runs, of the held-out test
# split (declared public) in private ones, which never read statistics of the private data.
INPUT_SCALINGS = ("unit", "centered", "standardized")

# What the network reads: the pixels, or ScatterNet features of them (trainers.core.scattering: a fixed
# wavelet transform and a per-image normalisation, no privacy cost; Tramer and Boneh 2021).
FEATURES = ("pixels", "scatter")

# Method names, default profiles and paper defaults live on the method classes
# (trainers.methods.METHODS: Method.default_profile, Method.defaults).
#: Old option names still accepted by ``TrainConfig.for_method`` (and the CLI): old -> new.
OPTION_ALIASES = {"sigma": "software_noise_std"}


def _need(ok: bool, message: str) -> None:
    """Refuse a setting: ``message`` names the option and the allowed range."""
    if not ok:
        raise TrainingConfigError(message)


MAX_WIDTH = 65536  # hidden units per layer (a 784-65536 layer is 205 MB of float32 weights)


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
    # post-processing of the released iterates (trainers.core.averaging; no privacy cost): a
    # learning-rate schedule over the planned steps, and an EMA of the weights that evaluation reads
    lr_schedule: str = "constant"
    weight_average: float = 0.0
    seed: int = 0
    threshold: float = 0.15
    ternarize: bool = False
    validation_fraction: float = 0.1
    inputs: str = "standardized"
    features: str = "pixels"
    # subtract the training features' mean (trainers.core.centering): in a private run a Gaussian
    # release of it, noise multiplier centering_noise, charged to the ledger before training
    center_features: bool = False
    centering_noise: float = DEFAULT_CENTERING_NOISE
    # the network: an MLP of --hidden widths, or a CNN whose --hidden are 3x3 conv channels (trainers.core.cnn)
    model: str = "mlp"
    # --model cnn: one stride per conv block (empty: stride 1 and 2x2 pooling), the head's hidden widths
    conv_strides: tuple[int, ...] = ()
    head_hidden: tuple[int, ...] = ()
    conv_kernel: int = 3  # --model cnn: 3 or 5 (padding kernel // 2)
    conv_pool: str = "avg"  # --model cnn: the 2x2 pool, avg or max
    head_activation: str | None = None  # --model cnn: the head's activation (default --activation)
    train_limit: int | None = None
    # the model's output width, public: None takes the dataset's declared count (trainers.core.data
    # DECLARED_CLASSES), never the private training labels' largest value
    n_classes: int | None = None
    alignment: bool = True
    # private training
    target_epsilon: float | None = None
    delta: float = 1e-5
    noise_multiplier: float | None = None
    # how the ledger becomes (epsilon, delta): RDP, or also the PLD (the smaller; Poisson-sampled
    # and plain Gaussian events only); planning, budget checks and reports all use it
    accounting: str = "rdp"
    noise_source: str = "software"
    sampling: str | None = None
    # add/remove adjacency: the training-set size the run's shape and accounting use, declared public
    # by the user so that the true n stays private (None: n is read from the data and published)
    public_dataset_size: int | None = None
    clip_norm: float = 1.0
    beta: float = 0.9
    tau_e: float = 0.1
    tau_h: float = 1.0
    tau_h_min: float = 0.0
    tau_h_max: float = 1.0
    tau_b: float = 1.0
    # photonic-dp: apply eq. 9 to the pixels too (True), or to the hidden neurons only (False)
    clip_pixels: bool = True
    # software noise std of a device whose noise_std is settable (photonic-dp on torch profiles;
    # paper 000 Table 1's "sigma"); CLI --software-noise-std, alias --sigma
    software_noise_std: float | None = None
    temperature_c: float | None = None
    # a calibration file (opu-hal calibrate) replacing the profile's ``calibration`` key
    calibration: str | None = None
    lattice_resolution: float = 10.0
    # dp-dfa device noise: how randomized rounding is accounted (opu_hal.privacy.rounding: per
    # coordinate, the Poisson mean does not grow with the dimension; worst-case: (k + 1) sqrt(d))
    rounding_analysis: str = "per-coordinate"
    compute: str = "auto"
    # torchrun runs (trainers.distributed): private noise added once by rank 0 ("single") or as
    # shares from every rank ("shares"), the honest W - colluders of them carrying the accounted noise
    distributed_noise: str = "single"
    colluders: int = 0
    # checkpoints
    checkpoint: str | None = None
    checkpoint_every: int = 50
    resume: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("hidden", "conv_strides", "head_hidden"):
            data[name] = list(getattr(self, name))
        return data

    @classmethod
    def for_method(cls, method: str, **overrides: Any) -> TrainConfig:
        """A config with ``method``'s paper defaults, then ``overrides`` (``None`` values ignored)."""
        base = dict(METHODS[method].defaults) if method in METHODS else {}
        for old, new in OPTION_ALIASES.items():
            if overrides.get(old) is not None:
                if overrides.get(new) is not None:
                    raise TrainingConfigError(f"give {new} or its alias {old}, not both")
                overrides = {**overrides, new: overrides[old]}
            overrides = {k: v for k, v in overrides.items() if k != old}
        base.update({k: v for k, v in overrides.items() if v is not None})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise TrainingConfigError(f"unknown training options: {', '.join(unknown)}")
        config = cls(method=method, **{k: v for k, v in base.items() if k != "method"})
        config.validate()
        return config

    def with_(self, **changes: Any) -> TrainConfig:
        return replace(self, **changes)

    @property
    def profile_name(self) -> str | None:
        cls = METHODS.get(self.method)
        return cls.profile_for(self) if cls is not None else self.profile

    def validate(self) -> None:
        """Refuse impossible settings, naming the option and the allowed range."""
        method = get_method(self.method)
        self._validate_run()
        self._validate_model(method)
        self._validate_inputs()
        self._validate_privacy(method)
        self._validate_clips_and_device()
        self._validate_distributed_and_checkpoints()
        self._validate_method_needs(method)

    def _validate_run(self) -> None:
        """The run's length, seed and batch size."""
        _need(self.epochs >= 1, f"--epochs must be >= 1, got {self.epochs}")
        _need(0 <= self.seed <= 2**63 - 1, f"--seed must be in [0, 2^63 - 1], got {self.seed}")
        _need(self.batch_size >= 1, f"--batch-size must be >= 1, got {self.batch_size}")

    def _validate_model(self, method: type[Method]) -> None:
        """The network and its training: widths, learning rate, optimizer, data split, MLP or CNN."""
        any_network = ", ".join(name for name, cls in METHODS.items() if cls.any_network)
        _need(
            (len(self.hidden) >= 1 or method.any_network) and all(1 <= w <= MAX_WIDTH for w in self.hidden),
            f"--hidden needs one or more widths in [1, {MAX_WIDTH}], got {list(self.hidden)}"
            + ("" if method.any_network else f" (no hidden layer: only {any_network})"),
        )
        _need(math.isfinite(self.lr) and self.lr > 0, f"--lr must be > 0, got {self.lr}")
        _need(0 <= self.momentum < 1, f"--momentum must be in [0, 1), got {self.momentum}")
        _need(self.lr_schedule in SCHEDULES, f"--lr-schedule {self.lr_schedule!r}: choose {' or '.join(SCHEDULES)}")
        _need(
            self.weight_average == 0 or 0 < self.weight_average < 1,
            f"--weight-average must be 0 (off) or in (0, 1), got {self.weight_average}",
        )
        _need(self.optimizer in ("sgd", "adam"), f"--optimizer {self.optimizer!r}: choose sgd or adam")
        _need(0 <= self.threshold < 1, f"--threshold must be in [0, 1), got {self.threshold}")
        _need(
            0 <= self.validation_fraction < 1,
            f"--validation-fraction must be in [0, 1), got {self.validation_fraction}",
        )
        _need(
            self.n_classes is None or (isinstance(self.n_classes, int) and 2 <= self.n_classes <= MAX_WIDTH),
            f"--n-classes must be an integer in [2, {MAX_WIDTH}], got {self.n_classes!r}",
        )
        _need(
            self.train_limit is None or self.train_limit >= self.batch_size,
            f"--train-limit must be >= --batch-size ({self.batch_size}), got {self.train_limit}",
        )
        _need(self.model in ("mlp", "cnn"), f"--model {self.model!r}: choose mlp or cnn")
        cnn_methods = ", ".join(name for name, cls in METHODS.items() if cls.trains_cnn)
        _need(
            self.model == "mlp" or method.trains_cnn,
            f"--model cnn trains with {cnn_methods} only (the rest of the DFA family needs an MLP), "
            f"got {self.method!r}",
        )
        _need(
            self.model == "cnn" or not (self.conv_strides or self.head_hidden),
            "--conv-strides and --head-hidden apply to --model cnn only",
        )
        _need(
            self.model == "cnn" or (self.conv_kernel, self.conv_pool, self.head_activation) == (3, "avg", None),
            "--conv-kernel, --conv-pool and --head-activation apply to --model cnn only",
        )
        _need(
            not self.conv_strides
            or (len(self.conv_strides) == len(self.hidden) and all(1 <= s <= 3 for s in self.conv_strides)),
            f"--conv-strides needs one stride in [1, 3] per conv block ({len(self.hidden)}), "
            f"got {list(self.conv_strides)}",
        )
        _need(
            all(1 <= w <= MAX_WIDTH for w in self.head_hidden),
            f"--head-hidden needs widths in [1, {MAX_WIDTH}], got {list(self.head_hidden)}",
        )

    def _validate_inputs(self) -> None:
        """What the network reads: features, centering, pixel scaling."""
        _need(self.features in FEATURES, f"--features {self.features!r}: choose one of {', '.join(FEATURES)}")
        _need(
            not self.center_features or self.features == "scatter",
            "--center-features applies to --features scatter (their L2 norm is bounded, which bounds "
            f"the mean's sensitivity), got --features {self.features}",
        )
        _need(
            math.isfinite(self.centering_noise) and 1 <= self.centering_noise <= 1e4,
            f"--centering-noise must be in [1, 10000], got {self.centering_noise}",
        )
        _need(self.inputs in INPUT_SCALINGS, f"--inputs {self.inputs!r}: choose one of {', '.join(INPUT_SCALINGS)}")

    def _validate_privacy(self, method: type[Method]) -> None:
        """Accounting, noise source, sampling, public size and the privacy target."""
        _need(self.accounting in ("rdp", "pld"), f"--accounting {self.accounting!r}: choose rdp or pld")
        _need(
            self.accounting == "rdp" or method.private,
            f"--accounting pld applies to private methods; {self.method!r} is not private",
        )
        _need(
            self.noise_source in ("software", "device"),
            f"--noise-source {self.noise_source!r}: choose software or device",
        )
        _need(
            self.sampling in (None, "poisson", "fixed", "rejection"),
            f"--sampling {self.sampling!r}: choose poisson, fixed or rejection (dp-ulr)",
        )
        _need(
            self.public_dataset_size is None or self.public_dataset_size >= self.batch_size,
            f"--public-dataset-size must be >= --batch-size ({self.batch_size}), got {self.public_dataset_size}",
        )
        _need(
            self.public_dataset_size is None or method.private,
            f"--public-dataset-size applies to private methods; {self.method!r} is not private",
        )
        _need(0 < self.delta < 1, f"--delta must be in (0, 1), got {self.delta}")
        _need(
            self.target_epsilon is None or self.target_epsilon > 0,
            f"--target-epsilon must be > 0, got {self.target_epsilon}",
        )
        _need(
            self.noise_multiplier is None or self.noise_multiplier > 0,
            f"--noise-multiplier must be > 0, got {self.noise_multiplier}",
        )

    def _validate_clips_and_device(self) -> None:
        """Clip bounds, compute device, calibration and the device-noise lattice."""
        for name in ("clip_norm", "beta", "tau_e", "tau_h", "tau_h_max", "tau_b"):
            value = getattr(self, name)
            _need(math.isfinite(value) and value > 0, f"--{name.replace('_', '-')} must be > 0, got {value}")
        _need(
            0 <= self.tau_h_min <= self.tau_h_max,
            f"--tau-h-min must be in [0, tau_h_max={self.tau_h_max}], got {self.tau_h_min}",
        )
        _need(
            self.clip_pixels or self.method == "photonic-dp",
            "--no-clip-pixels applies to photonic-dp only (eq. 9's clipping of the layer inputs)",
        )
        _need(self.compute in ("auto", "cpu", "cuda"), f"--compute {self.compute!r}: choose auto, cpu or cuda")
        _need(
            self.calibration is None or self.profile is not None or self.noise_source == "device",
            "--calibration applies to a device: give --profile (or --noise-source device)",
        )
        _need(
            math.isfinite(self.lattice_resolution) and 0.5 <= self.lattice_resolution <= 1000,
            f"--lattice-resolution must be in [0.5, 1000], got {self.lattice_resolution}",
        )
        _need(
            self.rounding_analysis in ("per-coordinate", "worst-case"),
            f"--rounding-analysis {self.rounding_analysis!r}: choose per-coordinate or worst-case",
        )
        _need(
            self.software_noise_std is None or self.software_noise_std >= 0,
            f"--software-noise-std (--sigma) must be >= 0, got {self.software_noise_std}",
        )

    def _validate_distributed_and_checkpoints(self) -> None:
        """torchrun noise and checkpoints."""
        _need(
            self.distributed_noise in ("single", "shares"),
            f"--distributed-noise {self.distributed_noise!r}: choose single or shares",
        )
        _need(self.colluders >= 0, f"--colluders must be >= 0, got {self.colluders}")
        _need(self.checkpoint_every >= 1, f"--checkpoint-every must be >= 1, got {self.checkpoint_every}")
        _need(not self.resume or self.checkpoint is not None, "--resume needs --checkpoint PATH")

    def _validate_method_needs(self, method: type[Method]) -> None:
        """What a method needs (a noise choice) or ignores (privacy options of a non-private one)."""
        if method.needs_noise_choice:
            _need(
                self.target_epsilon is not None or self.noise_multiplier is not None,
                f"method {self.method!r} needs --target-epsilon (noise chosen for it) or --noise-multiplier",
            )
        if not method.private:
            given = [
                flag
                for flag, value in (
                    ("--target-epsilon", self.target_epsilon),
                    ("--noise-multiplier", self.noise_multiplier),
                    ("--noise-source device", self.noise_source == "device" or None),
                )
                if value is not None
            ]
            private = sorted(name for name, cls in METHODS.items() if cls.private)
            _need(
                not given,
                f"method {self.method!r} is not private: {', '.join(given)} would be ignored; "
                f"use a private method ({', '.join(private)})",
            )
