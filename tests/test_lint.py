"""The tree passes its linter and type checker (configured in pyproject.toml): ruff's rules and
formatter, and mypy (strict for opu_hal.contract, opu_hal.privacy and trainers.api, every other
module checked).

Run on a full ``bash scripts/test.sh`` (CI) or by naming this file; a targeted run of another test
file does not collect it, so it costs nothing there (mypy takes about a minute on a cold cache).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: it is in the [dev] extra of pyproject.toml")
    return found


def test_ruff_finds_nothing():
    result = _run(_tool("ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_is_formatted():
    result = _run(_tool("ruff"), "format", "--check", ".")
    assert result.returncode == 0, result.stdout


def test_mypy_finds_no_type_error():
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_module_is_exempt_from_type_checking():
    """Every module is checked: no mypy override may switch errors off."""
    text = (ROOT / "pyproject.toml").read_text()
    assert "ignore_errors" not in text
