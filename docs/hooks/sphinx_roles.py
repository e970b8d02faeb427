"""Griffe extension: the code's Sphinx cross-reference roles become mkdocstrings links.

The docstrings say :func:`load_device`, :class:`~opu_hal.calibration.schema.Calibration` or
:meth:`.poisson.flat_frame_counts`; mkdocstrings renders Markdown, where those would show as raw
text. After griffe has loaded a package, every docstring's roles are rewritten into autorefs
links to the canonical dotted path, resolved like Sphinx does: a leading ``~`` shows the last
component only, a leading ``.`` is relative to the docstring's module (then its parent packages),
and a bare name is looked up in the scope of the documented object (members, then imports).

A link is *optional*: autorefs makes it a link when the target is rendered somewhere on the site
and plain code otherwise, so ``mkdocs build --strict`` never fails on an undocumented target.
Targets outside the documented packages (``os.urandom``) stay plain code.

Registered in ``mkdocs.yml`` under the python handler's ``extensions``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: ``:role:`target``` and ``:role:`title <target>```; ``py:`` domain prefixes are accepted.
ROLE = re.compile(
    r":(?:py:)?(?P<role>func|class|meth|mod|attr|data|exc|obj|const|attribute|function|method"
    r"|module|exception):`(?P<body>[^`]+)`"
)

#: The top-level packages whose objects the site can document.
DOCUMENTED = ("opu_hal", "trainers")


def _target_object(loader: griffe.GriffeLoader, path: str) -> griffe.Object | griffe.Alias | None:
    """The loaded object at ``path``, or None where the path names nothing loaded."""
    try:
        return loader.modules_collection.get_member(path)
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _canonical(loader: griffe.GriffeLoader, path: str) -> str | None:
    """``path`` followed through re-exports to where the object is defined, or None if unknown."""
    obj = _target_object(loader, path)
    if obj is None:
        return None
    if isinstance(obj, griffe.Alias):
        try:
            return obj.final_target.path
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return obj.target_path
    return obj.path


def _candidates(obj: griffe.Object, target: str) -> list[str]:
    """Dotted paths ``target`` may name from ``obj``'s docstring, most specific first (Sphinx's order)."""
    if target.startswith("."):
        module = obj.module
        scopes = [module.path]
        parent = module.parent
        while parent is not None:
            scopes.append(parent.path)
            parent = parent.parent
        return [f"{scope}{target}" for scope in scopes]
    head, _, rest = target.partition(".")
    paths: list[str] = []
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            resolved = scope.resolve(head)
        except (griffe.NameResolutionError, AttributeError, KeyError):
            resolved = None
        if resolved:
            paths.append(f"{resolved}.{rest}" if rest else resolved)
            break
        scope = scope.parent
    paths.append(target)
    return paths


def resolve(loader: griffe.GriffeLoader, obj: griffe.Object, target: str) -> str | None:
    """The canonical path ``target`` names from ``obj``'s docstring, or None outside the documented packages."""
    for path in _candidates(obj, target):
        if not path.startswith(tuple(f"{top}." for top in DOCUMENTED)) and path not in DOCUMENTED:
            continue
        canonical = _canonical(loader, path)
        if canonical is not None:
            return canonical
    return None


def rewrite(text: str, loader: griffe.GriffeLoader, obj: griffe.Object) -> str:
    """``text`` with every Sphinx role replaced by an optional autorefs link or plain code."""

    def replace(match: re.Match[str]) -> str:
        body = match.group("body").strip()
        titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", body)
        target = (titled.group("target") if titled else body).strip().lstrip("!")
        short = target.startswith("~")
        target = target.lstrip("~").removesuffix("()")
        if titled:
            title = titled.group("title")
        else:
            title = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
            if match.group("role") in ("func", "meth", "function", "method"):
                title += "()"
        path = resolve(loader, obj, target)
        if path is None:
            return f"`{title}`"
        return f'<autoref identifier="{html.escape(path)}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring once the whole package is loaded."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        """Walk ``pkg`` (aliases skipped: their targets are walked where defined)."""
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = rewrite(obj.docstring.value, loader, obj)
            stack.extend(member for member in obj.members.values() if not member.is_alias)

    #: griffe before 1.12 calls the same hook ``on_package_loaded``; a second pass finds no role left.
    on_package_loaded = on_package
