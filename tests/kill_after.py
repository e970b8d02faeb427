"""Test helper: ``python -m tests.kill_after N TRAIN-ARGS...`` runs ``opu-hal train TRAIN-ARGS`` and
SIGKILLs its own process once global step N has run (to exercise ``--resume``).

The hook is a :class:`trainers.run.loop.Callback` installed here, not code in the production loop.
"""

from __future__ import annotations

import os
import signal
import sys

from trainers import cli
from trainers.run.loop import Callback, Trainer, train


class KillAfterStep(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def after_step(self, trainer: Trainer) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> None:
    step, train_args = int(argv[0]), argv[1:]
    args = cli.hal_cli.build_parser([cli.register_train_commands]).parse_args(["train", *train_args])
    train(cli.config_from_args(args), out=args.out, progress=False, callbacks=[KillAfterStep(step)])


if __name__ == "__main__":
    main(sys.argv[1:])
