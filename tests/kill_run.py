"""Runs ``opu-hal ARGS`` and kills the process (SIGKILL) once global step N has run:
``python -m tests.kill_run N train ...``. Fault injection for the resume tests, kept out of the loop."""

from __future__ import annotations

import os
import signal
import sys

from trainers import cli, loop


def main() -> int:
    after = int(sys.argv[1])

    def kill(trainer: loop.Trainer) -> None:
        if trainer.global_step == after:
            os.kill(os.getpid(), signal.SIGKILL)

    loop.STEP_CALLBACKS.append(kill)
    return cli.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
