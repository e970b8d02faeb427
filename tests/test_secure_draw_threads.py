"""The secure generator's compiled draws run on no more Numba threads than torch's intra-op count, and
leave torch's count as it was: two one-thread runs side by side on two cores must not each wait for a
core the other holds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from opu_hal.randomness.secure_random import SecureGenerator

numba = pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="one Numba thread at most on this machine: nothing to limit"
)


def _spy(monkeypatch: pytest.MonkeyPatch, module, name: str) -> list[int]:
    """Record Numba's thread count at each call of ``module.name``."""
    seen: list[int] = []
    real = getattr(module, name)

    def spied(*args, **kwargs):
        seen.append(numba.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spied)
    return seen


@pytest.fixture
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_normals_uniforms_and_counts_draw_on_torchs_thread_count(monkeypatch, one_torch_thread):
    from opu_hal.kernels.compiled import chacha, chacha_normal32, poisson_varying

    normals = _spy(monkeypatch, chacha_normal32, "standard_normals")
    uniforms = _spy(monkeypatch, chacha, "uniforms")
    first_rounds = _spy(monkeypatch, poisson_varying, "first_round")
    generator = SecureGenerator()
    generator.standard_normal(10_000)
    generator.uniform(1_000)
    generator.poisson(50.0, 1_000)
    generator.poisson_at(np.full(1_000, 50.0))
    assert normals == [1] and first_rounds == [1] and uniforms and set(uniforms) == {1}
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS  # restored after each draw
    assert torch.get_num_threads() == 1  # and torch's count left as it was (Numba's OpenMP start resets it)
