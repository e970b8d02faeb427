"""CPU kernels compiled by Numba for the simulated camera: Philox counters, exact Poisson counts,
ziggurat normals and the ADC, each a few passes over a frame split over the CPU threads.

Numba compiles each kernel on first use (a few seconds; cached on disk next to these files when
they are writable). Training-quality noise of the simulated physics, never privacy noise (that
comes from :mod:`opu_hal.randomness.secure_random`).
"""
