"""Nothing spent outside a ledger: a full disk, a read-only folder, a removed journal line, a run
too long to finish. Full disks and read-only mounts are simulated at the lowest layer the code
writes through (``os.write``, ``os.open``, ``os.statvfs``), so the real write paths run."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from opu_hal import OpuHalError
from tests.training_helpers import clusters
from trainers.run.config import TrainConfig
from trainers.run.journal import load_checkpoint, save_checkpoint
from trainers.run.loop import Callback, Trainer, train


def cfg(**changes) -> TrainConfig:
    base = dict(epochs=1, batch_size=20, hidden=(16,), seed=0, noise_multiplier=1.0, alignment=False)
    return TrainConfig.for_method("dp-dfa", **{**base, **changes})


def quiet(config: TrainConfig, logs: list[str] | None = None, **kw):
    log = (lambda m: logs.append(m)) if logs is not None else (lambda m: None)
    return train(config, progress=False, log=log, data=clusters(n_train=200, n_test=40), **kw)


def ledger_steps(record: dict) -> int:
    return sum(entry["count"] for entry in record["privacy"]["ledger"]["entries"])


class SmallDisk:
    """A file system under ``folder`` with ``free`` bytes: ``os.write`` past them fails with ENOSPC
    (``statvfs`` reports ``reported`` bytes free, the free bytes unless set)."""

    def __init__(self, monkeypatch, folder: Path, free: int, reported: int | None = None) -> None:
        self.folder, self.free, self.reported = str(folder.resolve()), free, reported
        real_write, real_pwrite, real_statvfs = os.write, os.pwrite, os.statvfs

        def mine(fd: int) -> bool:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(self.folder)

        def spend(fd: int, data) -> None:
            if mine(fd):
                if len(data) > self.free:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                self.free -= len(data)

        def write(fd, data):
            spend(fd, data)
            return real_write(fd, data)

        def pwrite(fd, data, offset):
            spend(fd, data)
            return real_pwrite(fd, data, offset)

        def statvfs(path):
            if str(Path(path).resolve()).startswith(self.folder):
                free = self.free if self.reported is None else self.reported
                return SimpleNamespace(f_bavail=free, f_frsize=1)
            return real_statvfs(path)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "pwrite", pwrite)
        monkeypatch.setattr(os, "statvfs", statvfs)


def read_only(monkeypatch, folder: Path) -> None:
    """``folder`` as on a read-only mount: creating anything in it fails with EROFS."""
    real_open, real_mkdir = os.open, os.mkdir
    prefix = str(folder.resolve())

    def refuse(path) -> None:
        if str(Path(os.fsdecode(path)).resolve()).startswith(prefix):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    def open_(path, flags, *args, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_open(path, flags, *args, **kw)

    def mkdir(path, *args, **kw):
        refuse(path)
        return real_mkdir(path, *args, **kw)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "mkdir", mkdir)


def test_a_disk_too_small_for_the_checkpoint_is_refused_before_the_first_draw(tmp_path, monkeypatch):
    SmallDisk(monkeypatch, tmp_path, free=2_000)
    with pytest.raises(OpuHalError, match="bytes free on its file system"):
        quiet(cfg(checkpoint=str(tmp_path / "ck")))
    assert not (tmp_path / "ck.journal").exists()  # nothing drawn


class FillDisk(Callback):
    """A callback that leaves ``free`` bytes on the simulated disk after step ``step``."""

    def __init__(self, disk: SmallDisk, step: int, free: int) -> None:
        self.disk, self.step, self.free = disk, step, free

    def after_step(self, trainer) -> None:
        if trainer.global_step == self.step:
            self.disk.free = self.free


@pytest.mark.parametrize("left, drawn", [(200, 5), (0, 2)])
def test_a_disk_that_fills_after_draws_stops_with_every_draw_where_resume_takes_it(left, drawn, tmp_path, monkeypatch):
    """The disk fills after step 2: with a few bytes left the checkpoint of step 5 fails, with none the
    journal line of step 3 does (before its draw). The error names the journal and the epsilon, and
    --resume (once there is room) takes the run from the checkpoint written before the first draw."""
    disk = SmallDisk(monkeypatch, tmp_path, free=10**9)
    config = cfg(checkpoint=str(tmp_path / "ck"), checkpoint_every=5, noise_source="device", profile="opu-sim-dp")
    with pytest.raises(OpuHalError) as caught:
        quiet(config, callbacks=[FillDisk(disk, 2, left)])
    assert "--resume" in str(caught.value)
    assert ("epsilon" in str(caught.value)) == (drawn == 5)  # a journal line that fails is before its draw
    assert len((tmp_path / "ck.journal").read_text().split()) == drawn
    disk.free = 10**9
    record = quiet(TrainConfig(**{**config.to_dict(), "resume": True}))
    assert record["privacy"]["lost_steps_charged"] == drawn  # device noise: every draw charged once
    assert ledger_steps(record) == record["final"]["steps"] + drawn


def test_a_read_only_checkpoint_folder_is_a_clear_error_before_drawing(tmp_path, monkeypatch):
    (tmp_path / "rofs").mkdir()
    read_only(monkeypatch, tmp_path / "rofs")
    with pytest.raises(OpuHalError, match="rofs"):
        quiet(cfg(checkpoint=str(tmp_path / "rofs" / "ck")))


def test_a_finished_record_that_out_cannot_take_goes_to_a_fallback_path(tmp_path, monkeypatch):
    (tmp_path / "full").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    SmallDisk(monkeypatch, tmp_path / "full", free=0, reported=10**9)
    logs: list[str] = []
    record = quiet(cfg(), logs, out=str(tmp_path / "full" / "r.json"))
    written = [line for line in logs if "the record is at" in line]
    assert written, logs
    path = Path(written[0].rsplit("the record is at ", 1)[1])
    assert json.loads(path.read_text())["final"] == record["final"]


class Killed(Exception):
    pass


class KillAfter(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def after_step(self, trainer) -> None:
        if trainer.global_step == self.step:
            raise Killed


def test_a_removed_last_journal_line_is_still_charged(tmp_path):
    """Killed after 7 device draws (5 checkpointed); the journal's last line is then removed: the
    count kept in the lock still charges both draws after the checkpoint."""
    config = cfg(checkpoint=str(tmp_path / "ck"), checkpoint_every=5, noise_source="device", profile="opu-sim-dp")
    with pytest.raises(Killed):
        quiet(config, callbacks=[KillAfter(7)])
    journal = tmp_path / "ck.journal"
    journal.write_text("".join(f"{line}\n" for line in journal.read_text().split()[:-1]))
    record = quiet(TrainConfig(**{**config.to_dict(), "resume": True}))
    assert record["privacy"]["lost_steps_charged"] == 2
    assert ledger_steps(record) == record["final"]["steps"] + 2


def test_the_checkpoint_magic_line_names_its_format_and_old_headers_still_load(tmp_path):
    path = tmp_path / "ck"
    save_checkpoint(path, {"x": 1})
    data = path.read_bytes()
    assert data.startswith(b"OPU-HAL CHECKPOINT 4\n")
    path.write_bytes(b"OPU-HAL CHECKPOINT 3\n" + data[len(b"OPU-HAL CHECKPOINT 4\n") :])  # written before
    assert load_checkpoint(path)["x"] == 1


def test_a_run_too_long_to_finish_is_refused_naming_its_planned_steps():
    config = TrainConfig.for_method(
        "dp-sgd", epochs=1, batch_size=50, hidden=(16,), noise_multiplier=1.0, public_dataset_size=10**9
    )
    with pytest.raises(OpuHalError, match="plans 20000000 steps"):
        Trainer(config, data=clusters(n_train=200, n_test=40), progress=False, log=lambda m: None)
