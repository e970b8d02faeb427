"""Write the kymatio reference that ``tests/test_scattering.py`` holds our ScatterNet features to.

Tramer and Boneh (2021) computed their features with kymatio's ``Scattering2D(J=2, shape=(28, 28))``;
ours (:mod:`trainers.core.scattering`) must give the same coefficients, since the published
accuracies were measured on them. kymatio is not a dependency: install it beside the project to
regenerate the file (kymatio 0.3.0 imports ``scipy.special.sph_harm``, which SciPy 1.17 renamed;
the 2-D transform does not use it, so the name is bound to its successor before the import)::

    pip install --no-deps kymatio==0.3.0 appdirs
    python -m scripts.analysis.kymatio_reference   # writes tests/data/kymatio_scattering_j2.pt
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "kymatio_scattering_j2.pt"


def reference_images() -> torch.Tensor:
    """Four 28 x 28 images: uniform noise, a Gaussian blob, oblique stripes, a bright rectangle."""
    grid = torch.arange(28, dtype=torch.float32)
    yy, xx = torch.meshgrid(grid, grid, indexing="ij")
    noise = torch.rand(28, 28, generator=torch.Generator().manual_seed(0))
    blob = torch.exp(-((xx - 12) ** 2 + (yy - 15) ** 2) / (2 * 4.0**2))
    stripes = 0.5 + 0.5 * torch.sin(2 * math.pi * (xx + 2 * yy) / 7)
    rectangle = ((xx > 6) & (xx < 20) & (yy > 3) & (yy < 25)).float()
    return torch.stack([noise, blob, stripes, rectangle])


def main() -> None:
    import scipy.special

    if not hasattr(scipy.special, "sph_harm"):
        scipy.special.sph_harm = scipy.special.sph_harm_y  # unused by the 2-D transform; see above
    import kymatio
    from kymatio.torch import Scattering2D

    images = reference_images()
    coefficients = Scattering2D(J=2, shape=(28, 28))(images.unsqueeze(1)).reshape(len(images), 81, 7, 7)
    torch.save({"images": images, "coefficients": coefficients, "kymatio": kymatio.__version__}, OUT)
    print(
        f"wrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}: "
        f"{tuple(coefficients.shape)} coefficients from kymatio {kymatio.__version__}"
    )


if __name__ == "__main__":
    main()
