"""Compute kernels: compiled CPU passes (Numba, :mod:`.compiled`), Triton GPU kernels (camera
frames, ChaCha20) and exact Poisson sampling in eager torch. Pure functions of their inputs and
counters; the randomness policy (which key, which stream) lives in :mod:`opu_hal.randomness`."""
