"""Backend registry: built-ins, in-process registration, and entry-point plugins."""

from __future__ import annotations

import sys
import textwrap
from typing import Literal

import pytest
import torch

import opu_hal
from opu_hal import BackendSpec, BaseProfile, ProfileError
from opu_hal.backends.torch_backend import TorchDevice
from opu_hal.profiles.registry import BUILTIN_SPECS, ENTRY_POINT_GROUP, backend_origin, refresh_entry_points


class EchoProfile(BaseProfile):
    backend: Literal["echo"]


class EchoDevice(TorchDevice):
    """A torch device under another backend name, enough to exercise the registry."""

    def __init__(self, profile: EchoProfile) -> None:
        torch_profile = opu_hal.TorchProfile(
            backend="torch",
            in_features=profile.in_features,
            out_features=profile.out_features,
            device="cpu",
        )
        super().__init__(torch_profile)


def test_builtin_torch_backend_is_registered():
    assert "torch" in opu_hal.backend_names()
    assert opu_hal.get_backend("torch").profile_model is opu_hal.TorchProfile


def test_unknown_backend_lists_the_allowed_names():
    with pytest.raises(ProfileError, match="unknown backend 'nope'.*'torch'"):
        opu_hal.get_backend("nope")


def test_registered_backend_is_selected_by_the_profile_alone(tmp_path):
    opu_hal.register_backend(BackendSpec("echo", EchoProfile, EchoDevice))
    try:
        path = tmp_path / "echo.toml"
        path.write_text('backend = "echo"\nin_features = 2\nout_features = 3\n')
        device = opu_hal.load_device(path)
        assert isinstance(device, EchoDevice)
        assert device.project(torch.ones(1, 2)).values.shape == (1, 3)
    finally:
        opu_hal.unregister_backend("echo")
    assert "echo" not in opu_hal.backend_names()


def test_registering_a_taken_name_needs_replace():
    with pytest.raises(opu_hal.OpuHalError, match="already registered"):
        opu_hal.register_backend(BackendSpec("torch", opu_hal.TorchProfile, TorchDevice))


def _install_plugin(tmp_path, monkeypatch, value: str, module_source: str) -> None:
    """A real installed distribution (dist-info on sys.path) declaring an entry point."""
    (tmp_path / "plugin_mod.py").write_text(textwrap.dedent(module_source))
    dist = tmp_path / "fake_opu_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-opu-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nplugged = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plugin_mod", raising=False)
    refresh_entry_points()


PLUGIN = """
    from typing import Literal
    from opu_hal import BackendSpec, BaseProfile
    from tests.test_registry import EchoDevice

    class PluggedProfile(BaseProfile):
        backend: Literal["plugged"]

    SPEC = BackendSpec("plugged", PluggedProfile, EchoDevice)
"""


def test_entry_point_backend_is_discovered_and_loads_devices(tmp_path, monkeypatch):
    _install_plugin(tmp_path, monkeypatch, "plugin_mod:SPEC", PLUGIN)
    try:
        assert "plugged" in opu_hal.backend_names()
        profile = opu_hal.validate_profile({"backend": "plugged", "in_features": 4, "out_features": 2})
        assert opu_hal.load_device(profile).project(torch.zeros(3, 4)).values.shape == (3, 2)
    finally:
        monkeypatch.undo()
        refresh_entry_points()
    assert "plugged" not in opu_hal.backend_names()


def test_broken_entry_point_warns_and_leaves_other_backends(tmp_path, monkeypatch):
    _install_plugin(tmp_path, monkeypatch, "plugin_mod:MISSING", PLUGIN)
    try:
        with pytest.warns(UserWarning, match="plugged.*failed to load"):
            names = opu_hal.backend_names()
        assert "torch" in names and "plugged" not in names
    finally:
        monkeypatch.undo()
        refresh_entry_points()


def _declared_builtins() -> set[str]:
    from importlib import metadata

    return {e.name for e in metadata.entry_points(group=ENTRY_POINT_GROUP)} & set(BUILTIN_SPECS)


def test_builtins_are_discovered_through_their_entry_points_when_installed():
    refresh_entry_points()
    declared = _declared_builtins()
    if not declared:
        pytest.skip(
            "the installed opu-hal metadata predates the opu_hal.backends entry points; "
            "reinstall (pip install -e .) to exercise this path"
        )
    for name in declared:
        assert backend_origin(name) == "entry point"


def test_builtins_fall_back_when_installed_metadata_lacks_them(monkeypatch):
    from importlib import metadata

    monkeypatch.setattr(metadata, "entry_points", lambda group=None: [])
    refresh_entry_points()
    try:
        assert opu_hal.backend_names()[:3] == ["torch", "simulated", "lighton"]
        assert all(backend_origin(n) == "built-in fallback" for n in ("torch", "simulated", "lighton"))
    finally:
        monkeypatch.undo()
        refresh_entry_points()


def test_builtin_spec_points_at_the_model_each_backend_owns():
    assert opu_hal.get_backend("torch").profile_model is opu_hal.TorchProfile
    assert opu_hal.get_backend("simulated").profile_model is opu_hal.SimulatedProfile
    assert opu_hal.get_backend("lighton").profile_model is opu_hal.LightonProfile


def test_reading_a_lighton_profile_does_not_import_the_sdk():
    import subprocess

    code = (
        "import sys, opu_hal; opu_hal.validate_profile({'backend': 'lighton', 'simulated': True, "
        "'in_features': 4, 'out_features': 2}); print('lightonml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


OTHER_MAJOR_PLUGIN = (
    PLUGIN
    + """
    SPEC = BackendSpec("plugged", PluggedProfile, EchoDevice, interface_version="2.0")
"""
)


def test_entry_point_of_another_interface_major_is_refused_with_a_warning(tmp_path, monkeypatch):
    _install_plugin(tmp_path, monkeypatch, "plugin_mod:SPEC", OTHER_MAJOR_PLUGIN)
    try:
        with pytest.warns(UserWarning, match=r"interface '2.0'.*implements 1\.\d.*ignored"):
            names = opu_hal.backend_names()
        assert "plugged" not in names and "torch" in names
    finally:
        monkeypatch.undo()
        refresh_entry_points()


def test_registering_a_spec_of_another_interface_major_is_an_error():
    spec = BackendSpec("echo", EchoProfile, EchoDevice, interface_version="0.9")
    with pytest.warns(UserWarning), pytest.raises(opu_hal.OpuHalError, match="interface 0.9"):
        opu_hal.register_backend(spec)
    assert "echo" not in opu_hal.backend_names()
