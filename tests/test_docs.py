"""The documentation site builds with ``mkdocs build --strict`` (broken links, missing pages, API
references that no longer resolve fail it), and the README stays a five-minute read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 12 * 1024
    assert "bash scripts/main.sh" in text and "bash scripts/test.sh" in text
    for needed in ("load_device", "device.project", "make_private_with_epsilon", "calibrate("):
        assert needed in text, needed


def test_every_docs_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    listed = set(re.findall(r":\s*([\w/-]+\.md)\s*$", nav, flags=re.M))
    assert pages == listed, sorted(pages ^ listed)


DOCS_PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
#: A Sphinx role left raw in rendered HTML, backticks either literal or turned into <code>.
RAW_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):(?:`|<code>)")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The documentation site, built once per test session with ``mkdocs build --strict``."""
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
        import mkdocstrings_handlers.python  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the docs extra is not installed ({exc.name}): pip install -e '.[docs]' (scripts/setup.sh does)")
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    yield out
    shutil.rmtree(out, ignore_errors=True)


def test_mkdocs_build_strict(site):
    assert (site / "api" / "devices" / "index.html").is_file()
    assert not (site / "hooks").exists(), "docs/hooks/ is build tooling and must not be published"


def test_docs_and_readme_name_no_issue_numbers():
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
        for page in DOCS_PAGES
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"[Ii]ssues? #?\d+", line)
    ]
    assert not found, "issue numbers belong in CHANGELOG.md:\n" + "\n".join(found)


def test_built_site_shows_no_raw_sphinx_roles(site):
    raw = {
        str(page.relative_to(site)): RAW_ROLE.findall(page.read_text(encoding="utf-8")) for page in site.rglob("*.html")
    }
    raw = {page: roles for page, roles in raw.items() if roles}
    assert not raw, raw


def test_sphinx_roles_become_links_to_documented_objects(site):
    # opu_hal.loader.load_device's docstring says :class:`~opu_hal.calibration.schema.Calibration`,
    # rendered on the calibration API page.
    devices = (site / "api" / "devices" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'href="[^"]*#opu_hal\.calibration\.schema\.Calibration"', devices), (
        "the :class: role in load_device's docstring is not a link to Calibration"
    )


@pytest.mark.parametrize("page", ["privacy", "calibration"])
def test_formulas_are_arithmatex_math(site, page):
    html = (site / page / "index.html").read_text(encoding="utf-8")
    assert html.count('class="arithmatex"') >= 2, f"no arithmatex math on the {page} page"
    assert "\\[" in html and "\\(" in html, f"the {page} page lacks display or inline math"
    assert "javascripts/mathjax.js" in html


def test_version_is_single_sourced_and_matches_the_installed_distribution():
    from importlib.metadata import version

    import opu_hal
    from opu_hal.contract.version import __version__

    assert opu_hal.__version__ == __version__ == version("opu-hal")
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^dynamic\s*=\s*\[[^]]*"version"', project, flags=re.M), "pyproject.toml must read the version"
    assert not re.search(r"^version\s*=\s*\"", project, flags=re.M), "pyproject.toml hard-codes a version"


def test_license_and_changelog_ship_with_the_project():
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "opu-hal developers" in license_text
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    from opu_hal import __version__

    assert f"## [{__version__}]" in changelog, "CHANGELOG.md has no section for the current version"


@pytest.fixture(scope="module")
def roles():
    """docs/hooks/sphinx_roles.py and a griffe loader holding opu_hal, as mkdocstrings loads it."""
    griffe = pytest.importorskip("griffe")
    import importlib.util

    spec = importlib.util.spec_from_file_location("sphinx_roles", ROOT / "docs" / "hooks" / "sphinx_roles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loader = griffe.GriffeLoader(search_paths=[str(ROOT)])
    loader.load("opu_hal")
    return module, loader


def test_sphinx_roles_resolve_like_sphinx(roles):
    module, loader = roles
    package = loader.modules_collection["opu_hal"]
    camera = loader.modules_collection["opu_hal.kernels.compiled.camera"]
    # a bare name through the package's imports, to where it is defined
    assert 'identifier="opu_hal.loader.load_device" optional><code>load_device()</code>' in module.rewrite(
        ":func:`load_device`", loader, package
    )
    # ~ shows the last component; the link keeps the full path
    assert 'identifier="opu_hal.contract.noise.Projection" optional><code>Projection</code>' in module.rewrite(
        ":class:`~opu_hal.contract.noise.Projection`", loader, package
    )
    # a leading dot is relative to the module, then its parent packages
    assert 'identifier="opu_hal.kernels.compiled.poisson.flat_frame_counts"' in module.rewrite(
        ":func:`.poisson.flat_frame_counts`", loader, camera
    )
    # an explicit title
    assert ">the device</code>" in module.rewrite(
        ":class:`the device <opu_hal.contract.device.Device>`", loader, package
    )


def test_sphinx_roles_outside_the_project_stay_plain_code(roles):
    module, loader = roles
    package = loader.modules_collection["opu_hal"]
    assert module.rewrite("keys from :func:`os.urandom`.", loader, package) == "keys from `os.urandom()`."
    assert module.rewrite(":class:`opu_hal.no_such_thing`", loader, package) == "`opu_hal.no_such_thing`"
    assert module.rewrite("no roles: ``:func:`` is text", loader, package) == "no roles: ``:func:`` is text"
