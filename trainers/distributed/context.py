"""Who this process is in a data-parallel run: rank, world size, and the few collectives the loop uses.

``torchrun`` (``torch.distributed.run``) starts one process per rank and sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; :func:`rank_context` reads
them and joins the process group (gloo on CPU, NCCL when the run computes on CUDA: that path is
written for GPU nodes and untested on the CPU machine this was built on). Without those variables,
or with ``WORLD_SIZE=1``, it returns :class:`SingleProcess`, whose collectives are identities, so
the loop has one code path.

A collective that fails because a peer died raises :class:`DistributedError` naming the step and
what to do: the last checkpoint, written by rank 0 after a barrier, is resumable.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from opu_hal import OpuHalError

T = TypeVar("T")


class DistributedError(OpuHalError, RuntimeError):
    """A rank of a distributed run failed or vanished; the run stops (resume from its checkpoint)."""


class SingleProcess:
    """The context of an ordinary run: one rank, collectives that return their input."""

    rank = 0
    world_size = 1
    local_rank = 0
    backend = "none"
    step: int | None = None  # the loop's global step (a distributed rank names it in errors)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def all_reduce_sum(self, tensor: torch.Tensor, what: str = "") -> torch.Tensor:
        return tensor

    def broadcast(self, tensor: torch.Tensor, src: int = 0, what: str = "") -> torch.Tensor:
        return tensor

    def broadcast_object(self, value: T, src: int = 0, what: str = "") -> T:
        return value

    def all_gather_object(self, value: T, what: str = "") -> list[T]:
        return [value]

    def barrier(self, what: str = "") -> None:
        """Nothing to wait for."""

    def shard(self, indices: torch.Tensor) -> torch.Tensor:
        """This rank's share of a global batch: all of it."""
        return indices

    def close(self) -> None:
        """Nothing to leave."""


class RankContext(SingleProcess):
    """A rank of a ``torch.distributed`` process group (joined by :func:`rank_context`)."""

    def __init__(self, rank: int, world_size: int, local_rank: int, backend: str) -> None:
        self.rank, self.world_size, self.local_rank, self.backend = rank, world_size, local_rank, backend
        self.step: int | None = None  # the loop's global step, named in errors

    def _collective(self, what: str, call: Callable[[], T]) -> T:
        import torch.distributed as dist

        try:
            return call()
        except (RuntimeError, dist.DistBackendError) as exc:  # a peer closed its connection or timed out
            where = f" at step {self.step}" if self.step is not None else ""
            raise DistributedError(
                f"rank {self.rank}/{self.world_size}: {what or 'a collective'} failed{where} ({exc}); another rank "
                "died or hung, so this run stops. Its last checkpoint (written by rank 0) is consistent: restart "
                "the same torchrun command with --resume (the journal charges every step that drew noise)"
            ) from exc

    def all_reduce_sum(self, tensor: torch.Tensor, what: str = "") -> torch.Tensor:
        import torch.distributed as dist

        self._collective(what, lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM))
        return tensor

    def broadcast(self, tensor: torch.Tensor, src: int = 0, what: str = "") -> torch.Tensor:
        import torch.distributed as dist

        self._collective(what, lambda: dist.broadcast(tensor, src=src))
        return tensor

    def broadcast_object(self, value: T, src: int = 0, what: str = "") -> T:
        import torch.distributed as dist

        box = [value if self.rank == src else None]
        self._collective(what, lambda: dist.broadcast_object_list(box, src=src))
        return box[0]  # type: ignore[return-value]

    def all_gather_object(self, value: T, what: str = "") -> list[T]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        self._collective(what, lambda: dist.all_gather_object(out, value))
        return out

    def barrier(self, what: str = "") -> None:
        import torch.distributed as dist

        self._collective(what, lambda: dist.barrier())

    def shard(self, indices: torch.Tensor) -> torch.Tensor:
        """This rank's contiguous share of a global batch (sizes differ by at most one)."""
        return indices.tensor_split(self.world_size)[self.rank]

    def close(self) -> None:
        """Leave the group together: a barrier first, so no rank tears gloo down while a peer still
        talks to it (that aborted a rank at exit); a barrier that fails (a peer died) is skipped."""
        import torch.distributed as dist

        if dist.is_initialized():
            try:
                dist.barrier()
            except Exception:  # noqa: BLE001 - a dead peer: leave anyway
                pass
            dist.destroy_process_group()


def launched_world_size(environ: dict[str, str] | None = None) -> int:
    """``WORLD_SIZE`` as torchrun sets it (1 when the process was not started by a launcher)."""
    env = os.environ if environ is None else environ
    text = env.get("WORLD_SIZE", "1")
    if not text.isdigit() or int(text) < 1:
        raise DistributedError(f"WORLD_SIZE={text!r}: the launcher must set a whole number >= 1")
    return int(text)


def rank_context(compute: str = "auto", timeout_s: float = 600.0) -> SingleProcess:
    """Join the process group torchrun describes in the environment (or the one already joined);
    ``compute`` picks the backend: NCCL when the run computes on CUDA, gloo otherwise."""
    world = launched_world_size()
    if world == 1:
        return SingleProcess()
    import torch.distributed as dist

    for name in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise DistributedError(
                f"WORLD_SIZE={world} but {name} is not set: start the run with torchrun "
                "(e.g. torchrun --standalone --nproc_per_node=2 -m opu_hal train ...)"
            )
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    cuda = compute == "cuda" or (compute == "auto" and torch.cuda.is_available())
    backend = "nccl" if cuda else "gloo"
    if cuda:  # one GPU per local rank (NCCL path: untested on the CPU-only development machine)
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return RankContext(rank, world, local_rank, backend)
