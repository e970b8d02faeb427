"""The ``torch`` backend's profile model and its :class:`~opu_hal.profiles.registry.BackendSpec`.

Kept apart from :mod:`.torch_backend` so that reading a profile never builds a device.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..contract.backend_spec import BackendSpec
from ..contract.profile_base import BaseProfile


class TorchProfile(BaseProfile):
    """``backend = "torch"``: a seeded Gaussian matrix, software noise of exactly ``noise_std``."""

    backend: Literal["torch"]
    in_features: int = Field(ge=1, le=2**24, description="input width of the projection")
    out_features: int = Field(ge=1, le=2**24, description="output width of the projection")
    device: Literal["auto", "cuda", "cpu"] = Field("auto", description="'auto' takes CUDA when present, CPU otherwise")
    noise_std: float = Field(0.0, ge=0.0, le=1e6, description="std of the added Gaussian noise, output units")
    matrix_std: float | None = Field(
        None, ge=1e-12, le=1e6, description="std of the matrix entries; default 1/sqrt(in_features)"
    )
    input_kind: Literal["real", "ternary", "binary"] = Field("real", description="which inputs the device accepts")
    dtype: Literal["float32", "float64"] = Field("float32", description="compute precision")


SPEC = BackendSpec("torch", TorchProfile, "opu_hal.backends.torch_backend:TorchDevice")
