"""The layering the README draws: imports point down, never in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path) -> set[str]:
    """Modules ``path`` imports, at module level, inside functions (a deferred import still closes
    a circle) or for type checking only (a reader still follows it)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in node.names)
            else:
                visit([child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)])

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _graph(package: str) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in (ROOT / package).rglob("*.py")}
    return {name: {m for m in _module_level_imports(path) if m in modules} - {name} for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("package", ["opu_hal", "trainers"])
def test_module_imports_form_no_circle(package):
    graph = _graph(package)
    # A package's __init__ re-exports its modules; a module importing its own package's
    # __init__ would close a circle through it, which the check below catches too.
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_opu_hal_never_imports_trainers():
    for path in (ROOT / "opu_hal").rglob("*.py"):
        imports = _module_level_imports(path)
        assert not any(m == "trainers" or m.startswith("trainers.") for m in imports), path


def test_a_backend_never_imports_another_backend():
    backends = ROOT / "opu_hal" / "backends"
    names = {
        "torch": ("torch_backend", "torch_profile"),
        "simulated": ("simulated",),
        "lighton": ("lighton", "lighton_profile"),
    }
    for owner, own_modules in names.items():
        others = [f"opu_hal.backends.{m}" for o, ms in names.items() if o != owner for m in ms]
        for module in own_modules:
            paths = (
                list((backends / module).rglob("*.py")) if (backends / module).is_dir() else [backends / f"{module}.py"]
            )
            for path in paths:
                imports = _module_level_imports(path)
                assert not any(i == o or i.startswith(o + ".") for i in imports for o in others), path


@pytest.mark.parametrize("layer", ["calibration", "privacy", "contract"])
def test_calibration_privacy_and_contract_never_import_a_backend(layer):
    """They consume numbers and the device contract; a backend is chosen by a profile at run time."""
    found = [
        f"{path.relative_to(ROOT)} -> {m}"
        for path in (ROOT / "opu_hal" / layer).rglob("*.py")
        for m in sorted(_module_level_imports(path))
        if m == "opu_hal.backends" or m.startswith("opu_hal.backends.")
    ]
    assert not found, "\n".join(found)


def test_profile_reader_does_not_import_any_backend():
    imports = _module_level_imports(ROOT / "opu_hal" / "profiles" / "catalogue.py")
    assert not any(m.startswith("opu_hal.backends") for m in imports)


#: opu_hal's layers, lowest first: a module may import its own layer and the layers below it.
#: The README's "Layout" section draws the same order.
LAYERS = [
    "contract",
    "runtime",
    "kernels",
    "randomness",
    "camera",
    "privacy",
    "profiles",
    "backends",
    "calibration",
    "face",
]
FACE = {
    "opu_hal",
    "opu_hal.__main__",
    "opu_hal.builtin_commands",
    "opu_hal.cli",
    "opu_hal.commands",
    "opu_hal.devices_command",
    "opu_hal.loader",
    "opu_hal.testing",
}


def _layer(module: str) -> str:
    if module in FACE:
        return "face"
    return module.split(".")[1]


def test_every_opu_hal_module_belongs_to_a_layer():
    graph = _graph("opu_hal")
    assert {_layer(m) for m in graph} <= set(LAYERS), sorted({_layer(m) for m in graph} - set(LAYERS))


def test_opu_hal_imports_point_down_the_layers():
    upward = [
        f"{m} ({_layer(m)}) -> {i} ({_layer(i)})"
        for m, imports in _graph("opu_hal").items()
        for i in imports
        if LAYERS.index(_layer(i)) > LAYERS.index(_layer(m))
    ]
    assert not upward, "\n".join(sorted(upward))


@pytest.mark.parametrize("package", ["opu_hal", "trainers"])
def test_no_two_folders_import_each_other(package):
    graph = _graph(package)

    def folder(module: str) -> str:
        return module.rpartition(".")[0] if (ROOT / Path(*module.split("."))).is_dir() is False else module

    ties = {(folder(m), folder(i)) for m, imports in graph.items() for i in imports if folder(m) != folder(i)}
    both_ways = sorted(f"{a} <-> {b}" for a, b in ties if (b, a) in ties and a < b)
    assert not both_ways, both_ways


def test_no_module_over_350_lines_outside_tests():
    long = [
        f"{p.relative_to(ROOT)}: {n}"
        for d in ("opu_hal", "trainers", "benchmarks", "scripts", "examples")
        for p in (ROOT / d).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 350
    ]
    assert not long, long


#: Functions allowed over 80 lines, and why. The ChaCha20 Triton kernel keeps the sixteen state words
#: of every lane in registers: split into @triton.jit helpers, each would take and return all
#: sixteen tensors, and the split could not be checked here (its RFC 8439 test needs CUDA or
#: Triton's interpreter, neither of which the CPU CI has).
LONG_FUNCTIONS = {"opu_hal/kernels/triton_chacha.py:_chacha_kernel": 82}


def _function_lengths() -> dict[str, int]:
    found: dict[str, int] = {}
    for package in ("opu_hal", "trainers"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    key = f"{path.relative_to(ROOT).as_posix()}:{node.name}"
                    length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    found[key] = max(length, found.get(key, 0))
    return found


def test_no_function_over_80_lines_outside_the_allowed_list():
    lengths = _function_lengths()
    long = {name: n for name, n in lengths.items() if n > LONG_FUNCTIONS.get(name, 80)}
    assert not long, long
    stale = {name: lengths.get(name) for name in LONG_FUNCTIONS if lengths.get(name, 0) <= 80}
    assert not stale, f"no longer over 80 lines, drop from LONG_FUNCTIONS: {stale}"
