"""The command line answers help, usage errors, ``devices`` and a missing file without importing torch,
numpy, scipy or the accountant (``trainers/cli/help_facts.py`` keeps what the help says about methods)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from opu_hal.runtime.cache import read_entry, write_entry
from trainers.cli import help_facts

HEAVY = ("torch", "numpy", "scipy", "dp_accounting", "matplotlib", "numba")
COMMANDS = [
    ["--help"],
    ["train", "--help"],
    ["tune", "--help"],
    ["audit", "--help"],
    ["plan", "--help"],
    ["calibrate", "--help"],
    ["account", "--help"],
    ["devices"],
    ["train", "--epochs", "x"],
    ["train", "--method", "no-such-method"],
    ["train", "--method", "dp-dfa", "--target-epsilon", "3", "--profile", "/no/such/profile.toml"],
    ["tune", "--method", "dp-dfa", "--space", "lr=0.1,0.2", "--calibration", "/no/such/calibration.json"],
]
_PROBE = """
import json, sys
from opu_hal.cli import main
statuses = []
for argv in json.loads(sys.argv[1]):
    try:
        statuses.append(main(argv))
    except SystemExit as exc:
        statuses.append(exc.code)
heavy = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
print(json.dumps({"statuses": statuses, "heavy": heavy}), file=sys.stderr)
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder for this test (the help facts are computed into it)."""
    monkeypatch.setenv("OPU_HAL_CACHE", str(tmp_path))
    help_facts._stored_facts.cache_clear()
    yield tmp_path
    help_facts._stored_facts.cache_clear()


def test_help_usage_errors_devices_and_missing_files_import_nothing_heavy(cache):
    write_entry(help_facts.CACHE_FOLDER, help_facts.facts_key(), help_facts.compute_facts())
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(COMMANDS), json.dumps(HEAVY)], capture_output=True, text=True
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert report["statuses"] == [0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2]
    assert "no-such-method" in done.stderr and "/no/such/profile.toml: no such profile file" in done.stderr
    assert "--calibration /no/such/calibration.json: no such file" in done.stderr


def test_stored_help_facts_equal_the_registrys(cache):
    assert "trainers.methods" in sys.modules  # this process has the registry: facts are read from it
    computed = help_facts.compute_facts()
    write_entry(help_facts.CACHE_FOLDER, help_facts.facts_key(), computed)
    stored = read_entry(help_facts.CACHE_FOLDER, help_facts.facts_key())
    assert stored == computed
    assert computed["methods"] == list(__import__("trainers.methods").methods.method_names())
    assert computed["per_method"]["epochs"] == help_facts.per_method_defaults("epochs")


def test_help_facts_key_changes_with_any_source_file(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    before = help_facts.sources_fingerprint(tmp_path)
    (tmp_path / "a.py").write_text("x = 22\n")
    assert help_facts.sources_fingerprint(tmp_path) != before
    (tmp_path / "b.py").write_text("")
    assert len(help_facts.sources_fingerprint(tmp_path)) == 2


def test_a_corrupt_or_foreign_help_entry_is_recomputed(cache, monkeypatch):
    key = help_facts.facts_key()
    write_entry(help_facts.CACHE_FOLDER, key, {"methods": "not a list"})
    monkeypatch.setattr(help_facts, "registry_imported", lambda: False)  # as in a fresh command-line process
    facts = help_facts.help_facts()
    assert facts == help_facts.compute_facts()
    assert read_entry(help_facts.CACHE_FOLDER, key) == facts
