"""The pieces the command line's option groups are built from: comma-separated integers, per-method
defaults and the help formatter that fills them in, and the ``--method`` and deprecated-alias actions.

Building parsers with these imports no method, no torch: the method list, each method's defaults and
the tunable settings are read only when a help text is printed or a command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .help_facts import known_method_names, per_method_text, tunable_text


def integers(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers like 512,512, got {text!r}") from None


class MethodHelpFormatter(argparse.HelpFormatter):
    """Fills ``{per_method}``, ``{methods}`` and ``{tunable}`` in help texts when help is printed."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "{per_method}" in text:
            text = text.replace("{per_method}", per_method_text(action.dest))
        if "{methods}" in text:
            text = text.replace("{methods}", ", ".join(known_method_names()))
        if "{tunable}" in text:
            text = text.replace("{tunable}", tunable_text())
        return text


class _CheckedStore(argparse.Action):
    """Stores the parsed value once :meth:`check` has seen it (a check may refuse it or warn)."""

    def check(self, parser: argparse.ArgumentParser, value: Any, option_string: str | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define check()")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        value: Any,
        option_string: str | None = None,
    ) -> None:
        self.check(parser, value, option_string)
        setattr(namespace, self.dest, value)


class MethodChoice(_CheckedStore):
    """``--method``: one of the registered methods, checked when parsed (from the registry, or the
    help facts when it is not imported: :mod:`.help_facts`, keyed on every source that registers one)."""

    def check(self, parser: argparse.ArgumentParser, value: Any, option_string: str | None) -> None:
        names = known_method_names()
        if value not in names:
            parser.error(f"argument --method: invalid choice: {value!r} (choose from {', '.join(names)})")


class DeprecatedAlias(_CheckedStore):
    """An old option name: stores like the new one and warns on stderr."""

    def __init__(self, option_strings: list[str], dest: str, new: str = "", **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def check(self, parser: argparse.ArgumentParser, value: Any, option_string: str | None) -> None:
        print(f"warning: {option_string} is deprecated and will be removed; use {self.new}", file=sys.stderr)
