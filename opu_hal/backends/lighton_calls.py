"""Calls into LightOn's SDK: one at a time, each with a timeout, retried with backoff.

Failure policy (issue 15), the same for ``open``/``fit1d``, transforms and ``close``:

- one SDK call at a time, ever: a call that timed out is abandoned in its thread, and the next
  attempt first waits (``timeout_s``) for it to leave the SDK instead of starting a second,
  concurrent call; while it is still inside, that attempt counts as a timeout. So at most one
  worker thread exists per device, and none once the SDK answers;
- retried: ordinary exceptions (a lost frame), a timeout, the SDK's ``ProcessRunningException``
  (another process holds the OPU: a ``BaseException`` in lightonml) and invalid output (rows of
  NaN or inf, or all-zero rows for non-zero inputs);
- not retried: a host :class:`MemoryError` (:class:`~opu_hal.contract.errors.HostMemoryError`: the host ran
  out of memory, the OPU did not fail), and ``KeyboardInterrupt``/``SystemExit``, which propagate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..contract.errors import DeviceBusy, DeviceTimeout, DeviceUnavailable, HostMemoryError


class InvalidOutput(RuntimeError):
    """The SDK returned a batch that cannot be a measurement (retried, then reported)."""


def is_process_running(exc: BaseException) -> bool:
    """Whether ``exc`` is lightonml's ``ProcessRunningException`` (the OPU is held elsewhere)."""
    return type(exc).__name__ == "ProcessRunningException"


def check_output(output: np.ndarray, inputs: np.ndarray) -> None:
    """Raise :class:`InvalidOutput` for rows of NaN/inf, or all-zero rows whose input is not zero
    (a camera that delivered no light); shapes are checked by the caller."""
    finite = np.isfinite(output).all(axis=1)
    if not finite.all():
        raise InvalidOutput(f"{int((~finite).sum())} of {len(output)} output row(s) hold NaN or inf")
    if output.shape[1] >= 8:
        dark = ~output.any(axis=1) & inputs.reshape(len(inputs), -1).any(axis=1)
        if dark.any():
            raise InvalidOutput(f"{int(dark.sum())} of {len(output)} output row(s) are all zero for non-zero inputs")


class SdkCaller:
    """Serialises calls into the SDK; see the module docstring for what is retried."""

    def __init__(
        self, *, retries: int, timeout_s: float, backoff_s: float, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.retries, self.timeout_s, self.backoff_s, self.sleep = retries, timeout_s, backoff_s, sleep
        self._inflight: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """Whether an abandoned call is still inside the SDK."""
        return self._inflight is not None and self._inflight.is_alive()

    def call(self, call: Callable[[], Any], what: str, retries: int | None = None) -> Any:
        """``call()``'s result, after at most ``retries`` (default: the profile's) retries with
        delays ``backoff * 2^k``."""
        retries = self.retries if retries is None else retries
        last: BaseException | None = None
        for attempt in range(retries + 1):
            if attempt:
                self.sleep(self.backoff_s * 2 ** (attempt - 1))
            ok, value = self._attempt(call)
            if ok:
                return value
            last = value
            if isinstance(last, MemoryError):
                raise HostMemoryError(
                    f"{what}: the host ran out of memory ({last}); not an OPU failure and not retried: "
                    "use smaller batches or free memory"
                ) from None
            if isinstance(last, (KeyboardInterrupt, SystemExit)):
                raise last
        raise self._failure(what, last, retries + 1)

    def _attempt(self, call: Callable[[], Any]) -> tuple[bool, Any]:
        if self.busy:
            assert self._inflight is not None
            self._inflight.join(self.timeout_s)
            if self.busy:
                return False, TimeoutError(f"an earlier call is still inside the SDK after {self.timeout_s} s")
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = call()
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc

        worker = threading.Thread(target=target, daemon=True, name="opu-hal sdk call")
        self._inflight = worker
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            return False, TimeoutError(f"no answer within {self.timeout_s} s")
        self._inflight = None
        if "error" in outcome:
            return False, outcome["error"]
        return True, outcome["value"]

    def _failure(self, what: str, last: BaseException | None, attempts: int) -> Exception:
        if isinstance(last, TimeoutError):
            still = " (the last call is still inside the SDK; no new call starts until it returns)" if self.busy else ""
            return DeviceTimeout(
                f"{what} timed out {attempts} time(s) ({self.timeout_s} s each){still}; check "
                "the OPU host, or raise timeout_s / retries in the profile"
            )
        if last is not None and is_process_running(last):
            return DeviceBusy(
                f"{what}: the OPU is in use by another process ({str(last).strip()}); tried "
                f"{attempts} time(s); wait for that process or stop it"
            )
        return DeviceUnavailable(f"{what} failed {attempts} time(s); last error: {last!r}")


def call_with_retries(
    call: Callable[[], Any],
    *,
    retries: int,
    timeout_s: float,
    backoff_s: float,
    sleep: Callable[[float], None] = time.sleep,
    what: str = "OPU transform",
) -> Any:
    """One retried call through a fresh :class:`SdkCaller` (for calls outside a device)."""
    return SdkCaller(retries=retries, timeout_s=timeout_s, backoff_s=backoff_s, sleep=sleep).call(call, what)
