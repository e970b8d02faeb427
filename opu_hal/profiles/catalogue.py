"""Device profiles: find, read, validate and explain TOML files.

The models live with their backends (``opu_hal/backends/*``). The ``backend`` key is the
discriminator: it selects the model through the backend registry, so third-party backends extend
the union. Every failure raises :class:`ProfileError` naming the
file, the key path and what is allowed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, ValidationError

from ..contract.errors import ProfileError
from ..contract.profile_base import BaseProfile
from .registry import backend_names, get_backend

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

PROFILE_DIR_ENV = "OPU_HAL_PROFILE_DIR"
# The shipped profiles live in the package (the repository's device_profiles/ links to them).
_PACKAGED_PROFILE_DIR = Path(__file__).resolve().parent.parent / "device_profiles"

#: Profile file format versions this opu_hal reads. A file without a ``schema`` key is read as
#: schema 1 (the format before the key existed); any other value is refused.
PROFILE_SCHEMAS = (1,)


#: Entry-point group through which an installed plugin ships named profiles: each entry point is a
#: folder of ``*.toml`` profiles, or a callable returning one (``"my_pkg:PROFILES"``).
PROFILES_ENTRY_POINT_GROUP = "opu_hal.profiles"


def plugin_profile_dirs() -> list[Path]:
    """The profile folders installed plugins declare (entry-point group ``opu_hal.profiles``); a broken
    entry point is skipped with a warning naming it."""
    import warnings
    from importlib import metadata

    from .registry import PLUGIN_FAILURES

    found = []
    for entry in metadata.entry_points(group=PROFILES_ENTRY_POINT_GROUP):
        try:
            target = entry.load()
            folder = Path(target() if callable(target) else target)
        except PLUGIN_FAILURES as exc:
            warnings.warn(
                f"profile entry point {entry.name!r} ({entry.value}) failed to load: {type(exc).__name__}: {exc}"
            )
            continue
        if folder.is_dir():
            found.append(folder)
        else:
            warnings.warn(f"profile entry point {entry.name!r} ({entry.value}) gave {folder}, not a folder; ignored")
    return found


def profile_search_dirs() -> list[Path]:
    """Where profile names (without a path) are looked up, in order: ``$OPU_HAL_PROFILE_DIR``, the
    packaged profiles, then the folders plugins ship. The working folder is not searched: a local
    file is used when given as a path (:func:`is_profile_path`)."""
    dirs = []
    if os.environ.get(PROFILE_DIR_ENV):
        dirs.append(Path(os.environ[PROFILE_DIR_ENV]))
    dirs += [_PACKAGED_PROFILE_DIR, *plugin_profile_dirs()]
    unique: list[Path] = []
    for d in dirs:
        if d.resolve() not in [u.resolve() for u in unique]:
            unique.append(d)
    return unique


#: A folder of that name in the working folder is not searched; a profile there that a name would
#: have picked before is named in a note (:func:`_note_local_profile`).
LOCAL_PROFILE_DIR = "device_profiles"
_NOTED: set[Path] = set()


def is_profile_path(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` names a file rather than a profile: a path object, or text holding a
    slash or ending in ``.toml``."""
    if not isinstance(source, str):
        return True
    return "/" in source or os.sep in source or source.lower().endswith(".toml")


def _note_local_profile(name: str, used: Path) -> None:
    """Say once on stderr which file a name resolved to when ``./device_profiles`` holds another of
    that name (it used to take precedence, silently)."""
    local = Path(LOCAL_PROFILE_DIR) / f"{name}.toml"
    if local.is_file() and local.resolve() != used.resolve() and local.resolve() not in _NOTED:
        _NOTED.add(local.resolve())
        print(f"note: profile {name!r} is {used}; {local} is not used (give its path to use it)", file=sys.stderr)


def _named_profile(name: str) -> Path | None:
    """The file of profile ``name`` in :func:`profile_search_dirs`, or None."""
    for directory in profile_search_dirs():
        candidate = directory / f"{name}.toml"
        if candidate.is_file():
            _note_local_profile(name, candidate)
            return candidate
    return None


def resolve_profile_path(source: str | os.PathLike[str]) -> Path:
    """A profile file from a path (:func:`is_profile_path`), or from a bare name looked up in
    :func:`profile_search_dirs`; ``name.toml`` that is not a file here is the profile ``name``."""
    path = Path(source)
    if is_profile_path(source) and path.is_file():
        return path
    if path.parent == Path(".") and path.suffix.lower() in ("", ".toml"):
        found = _named_profile(path.stem)
        if found is not None:
            return found
    known = sorted(p.stem for d in profile_search_dirs() if d.is_dir() for p in d.glob("*.toml"))
    local = Path(LOCAL_PROFILE_DIR) / f"{path.stem}.toml"
    hint = f" ({local} exists: give that path to use it)" if path.parent == Path(".") and local.is_file() else ""
    raise ProfileError(
        f"{source}: no such profile file{hint}. Give a path to a .toml profile or one of the names "
        f"found in {', '.join(str(d) for d in profile_search_dirs())}: {', '.join(known) or 'none'}"
    )


def list_profiles(directory: str | os.PathLike[str] | None = None) -> list[Path]:
    """The profile files of a folder (default: the first search folder that exists, ``$OPU_HAL_PROFILE_DIR``
    or the packaged profiles)."""
    if directory is not None:
        return sorted(Path(directory).glob("*.toml"))
    for d in profile_search_dirs():
        if d.is_dir():
            return sorted(d.glob("*.toml"))
    return []


def looks_like_profile(path: str | os.PathLike[str]) -> bool:
    """Whether a ``.toml`` file is meant as a profile: a table with a ``backend`` or ``schema`` key, or a
    file that does not parse as TOML (a broken profile is still listed, as invalid). ``pyproject.toml``
    and other configuration files are not profiles."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return True
    except OSError:
        return False
    return "backend" in data or "schema" in data


def load_profile(source: str | os.PathLike[str] | BaseProfile) -> BaseProfile:
    """Read and validate a profile; a validated profile object is returned as is."""
    if isinstance(source, BaseProfile):
        return source
    path = resolve_profile_path(source)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: malformed TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the profile: {exc}") from None
    return validate_profile(data, path)


def validate_profile(data: dict[str, Any], path: Path | str = "<profile>") -> BaseProfile:
    """Validate a profile mapping with the model its ``backend`` key selects.

    The ``schema`` key (file format version, see :data:`PROFILE_SCHEMAS`) is checked here and is
    not part of the profile models.
    """
    data = dict(data)
    schema = data.pop("schema", 1)
    if isinstance(schema, bool) or schema not in PROFILE_SCHEMAS:
        raise ProfileError(
            f"{path}: key 'schema' is {schema!r}; this opu_hal reads profile schema "
            f"{', '.join(str(s) for s in PROFILE_SCHEMAS)} (upgrade opu-hal for newer files)"
        )
    names = ", ".join(repr(n) for n in backend_names())
    backend = data.get("backend")
    if backend is None:
        raise ProfileError(f"{path}: key 'backend' is missing; allowed: {names}")
    if not isinstance(backend, str) or backend not in backend_names():
        raise ProfileError(f"{path}: key 'backend' is {backend!r}; allowed: {names}")
    model = get_backend(backend).profile_model
    try:
        profile = model.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(format_validation_error(path, exc, model)) from None
    profile._source = Path(path) if not isinstance(path, Path) else path
    return profile


def format_validation_error(path: Path | str, exc: ValidationError, model: type[BaseModel]) -> str:
    """One line per problem: file, key path, what is wrong and what is allowed."""
    lines = [f"{path}: invalid {model.__name__} ({exc.error_count()} problem(s))"]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(profile)"
        owner, field = _field_at(model, err["loc"])
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(sorted(owner.model_fields)) if owner else "?"
            lines.append(f"  key '{key}': unknown key; allowed keys: {allowed}")
            continue
        allowed = _describe_field(field) if field is not None else ""
        got = "" if err["type"] == "missing" else f" (got {err.get('input')!r})"
        what = "required key is missing" if err["type"] == "missing" else err["msg"]
        lines.append(f"  key '{key}': {what}{got}" + (f"; allowed: {allowed}" if allowed else ""))
    return "\n".join(lines)


def _field_at(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, Any]:
    """The (model holding the key, its field or None) that a pydantic error location points to."""
    owner: type[BaseModel] | None = model
    for i, part in enumerate(loc):
        if owner is None or not isinstance(part, str) or part not in owner.model_fields:
            return owner, None
        field = owner.model_fields[part]
        if i == len(loc) - 1:
            return owner, field
        annotation = field.annotation
        owner = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    return owner, None


def _describe_field(field: Any) -> str:
    """Human description of a field's allowed values: type, bounds, choices, unit."""
    annotation = field.annotation
    args = getattr(annotation, "__args__", ())
    if getattr(annotation, "__origin__", None) is Literal:
        kind = "one of " + ", ".join(repr(a) for a in args)
    else:
        base = [a for a in args if a is not type(None)] or [annotation]
        kind = {int: "integer", float: "number", str: "string", bool: "true/false"}.get(
            base[0], getattr(base[0], "__name__", str(base[0]))
        )
        if type(None) in args:
            kind += " (optional)"
    bounds = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                bounds.append(f"{sign} {getattr(meta, attr)}")
    text = kind + (" " + " and ".join(bounds) if bounds else "")
    if field.description:
        text += f" — {field.description}"
    return text
