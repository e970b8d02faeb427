"""The device conformance suite, for opu_hal's own profiles and for plugin authors.

Every check takes a profile (a path, a name in ``device_profiles/`` or a validated profile
object) and raises :class:`AssertionError` when the device breaks the contract, or
:class:`NotApplicable` when the check does not apply to it (e.g. no input limit declared).
Nothing here names a backend.

    from opu_hal.testing import check_device
    check_device("my-profile.toml")               # runs every check, returns what ran

With pytest (skips for hardware that is absent and for checks that do not apply)::

    from opu_hal.testing import parametrize_checks, run_check

    @parametrize_checks()
    def test_my_device(check):
        run_check(check, "my-profile.toml")

Command line: ``opu-hal check PROFILE`` runs :func:`run_checks` and prints one line per check.
A backend whose noise is secret (drawn from :mod:`opu_hal.randomness.secure_random`, never from a
seed) passes: two devices of one profile are compared by distribution, not bit for bit.

The statistical checks need scipy (``pip install opu-hal[dev]``).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import torch

from .contract.device import Device
from .contract.errors import DeviceUnavailable, InputError, OpuHalError
from .contract.noise import NoiseReport, Projection
from .contract.profile_base import BaseProfile
from .loader import load_device
from .profiles.catalogue import load_profile

ProfileLike = Union[str, "os.PathLike[str]", BaseProfile]

REPEATS = 64  # repeated projections of one input for the empirical noise check
CONFIDENCE = 0.999


class NotApplicable(Exception):
    """The check does not apply to this device; the message says why."""


def valid_batch(device: Device, n: int, seed: int = 0) -> torch.Tensor:
    """A batch of ``n`` rows of the kind the device accepts (0/1, -1/0/1 or Gaussian)."""
    generator = torch.Generator().manual_seed(seed)
    shape = (n, device.in_features)
    kind = device.capabilities.input_kind
    if kind == "real":
        return torch.randn(shape, generator=generator)
    low = -1 if kind == "ternary" else 0
    return torch.randint(low, 2, shape, generator=generator).float()


def open_device(profile: ProfileLike) -> Device:
    """The profile's device; :class:`DeviceUnavailable` for hardware that is absent."""
    return load_device(load_profile(profile))


def check_projection_shape(profile: ProfileLike) -> None:
    """A projection is a :class:`Projection` of finite float values, ``(n, out_features)``."""
    with open_device(profile) as device:
        projection = device.project(valid_batch(device, 5))
        assert isinstance(projection, Projection), type(projection)
        assert tuple(projection.values.shape) == (5, device.out_features), projection.values.shape
        assert projection.values.is_floating_point()
        assert bool(torch.isfinite(projection.values).all())
        assert isinstance(projection.noise, NoiseReport)


def check_same_profile_same_projections(profile: ProfileLike) -> None:
    """Two devices built from one profile compute the same projection: identical values where the
    noise is seeded, and, where it is secret (drawn fresh, as privacy noise must be), the same
    distribution: per coordinate, the mean of repeated projections of one input agrees between the
    two devices within their noise (a chi-square test over the coordinates at :data:`CONFIDENCE`)."""
    from scipy import stats

    first, second = open_device(profile), open_device(profile)
    with first, second:
        x = valid_batch(first, 1, seed=3)
        a, b = first.project(x).values.cpu(), second.project(x).values.cpu()
        if torch.equal(a, b):
            for step in range(1, 3):  # seeded noise: identical, batch after batch
                x = valid_batch(first, 4, seed=step)
                assert torch.equal(first.project(x).values.cpu(), second.project(x).values.cpu()), step
            return
        repeats = REPEATS // 2
        samples = [
            torch.cat([d.project(x.expand(repeats // 2, -1).clone()).values.double().cpu() for _ in range(2)])
            for d in (first, second)
        ]
    means = [s.mean(dim=0) for s in samples]
    variances = [s.var(dim=0) for s in samples]
    pooled = (variances[0] + variances[1]) / repeats
    if float(pooled.max()) == 0.0:
        raise AssertionError("two devices of one profile return different noiseless values (different matrices?)")
    keep = pooled > 0
    z2 = (means[0] - means[1])[keep] ** 2 / pooled[keep]
    dof = 2 * repeats - 2  # each z is a Welch t with about this many degrees of freedom: var t = dof / (dof - 2)
    statistic = float(z2.sum()) * (dof - 2) / dof
    width = int(keep.sum())
    high = stats.chi2.ppf(CONFIDENCE, width)
    assert statistic <= high, (
        f"two devices of one profile disagree beyond their noise: chi-square {statistic:.4g} "
        f"over {width} coordinates (99.9% bound {high:.4g}); is the matrix seeded from the profile?"
    )


def check_noise_lower_bound_is_input_independent(profile: ProfileLike) -> None:
    """``std_lower`` (what privacy accounting uses) is the same for every input: sparse, dense
    and random batches report the bound :meth:`Device.noise_report` declares before any input."""
    with open_device(profile) as device:
        declared = device.noise_report().std_lower
        kind = device.capabilities.input_kind
        sparse = torch.zeros(2, device.in_features)
        sparse[:, 0] = 1.0
        dense = torch.ones(2, device.in_features) * (1.0 if kind != "real" else 3.0)
        for name, x in (("sparse", sparse), ("dense", dense), ("random", valid_batch(device, 3))):
            report = device.project(x).noise
            assert report.std_lower == declared, (
                f"{name} batch reports std_lower {report.std_lower}, the device declared {declared}"
            )


def check_declared_noise_matches_repeated_projections(profile: ProfileLike) -> None:
    """Pooled variance of repeats of one input lies in the chi-square 99.9% interval of ``std``.

    Shot noise makes coordinates differ in variance; the interval uses Satterthwaite's effective
    degrees of freedom from the per-coordinate sample variances (exact count when they agree).
    """
    from scipy import stats

    with open_device(profile) as device:
        x = valid_batch(device, 1, seed=7)
        projections = [device.project(x.expand(REPEATS // 2, -1).clone()) for _ in range(2)]
    values = torch.cat([p.values for p in projections]).double().cpu()
    std = projections[0].noise.std
    assert math.isclose(projections[1].noise.std, std, rel_tol=1e-6)
    residual = values - values.mean(dim=0, keepdim=True)
    if std == 0:
        assert float(residual.abs().max()) <= 1e-6 * max(1.0, float(values.abs().max()))
        return
    repeats, width = values.shape
    per_coordinate = (residual**2).sum(dim=0) / (repeats - 1)
    dof = (repeats - 1) * float(per_coordinate.sum()) ** 2 / float((per_coordinate**2).sum())
    dof = min(dof, (repeats - 1) * width)
    empirical_var = float(per_coordinate.mean())
    statistic = dof * empirical_var / std**2
    alpha = (1 - CONFIDENCE) / 2
    low, high = stats.chi2.ppf(alpha, dof), stats.chi2.ppf(1 - alpha, dof)
    assert low <= statistic <= high, f"declared std {std:.6g}, empirical {math.sqrt(empirical_var):.6g}"


BAD_BATCHES: dict[str, tuple[Callable[[Device], torch.Tensor], str]] = {
    "rank-1": (lambda d: torch.zeros(d.in_features), "shape"),
    "rank-3": (lambda d: torch.zeros(2, 1, d.in_features), "shape"),
    "too-wide": (lambda d: torch.zeros(2, d.in_features + 1), "got shape"),
    "empty": (lambda d: torch.zeros(0, d.in_features), "empty"),
    "nan": (lambda d: torch.full((2, d.in_features), float("nan")), "NaN"),
    "inf": (lambda d: torch.full((2, d.in_features), float("inf")), "inf"),
    "complex": (lambda d: torch.zeros(2, d.in_features, dtype=torch.cfloat), "real"),
}


def _raises_input_error(call: Callable[[], Any], says: str, what: str) -> None:
    try:
        call()
    except InputError as exc:
        assert says in str(exc), f"{what}: InputError {exc} does not say {says!r}"
        return
    raise AssertionError(f"{what}: no InputError raised")


def check_bad_batches_raise_input_error(profile: ProfileLike) -> None:
    """Malformed batches raise :class:`InputError` saying what is wrong; the device stays usable."""
    with open_device(profile) as device:
        for name, (make_bad, says) in BAD_BATCHES.items():
            _raises_input_error(lambda: device.project(make_bad(device)), says, f"{name} batch")  # noqa: B023 (called here)
            assert device.project(valid_batch(device, 2)).values.shape == (2, device.out_features)


def check_values_outside_the_input_kind_raise_input_error(profile: ProfileLike) -> None:
    """A binary or ternary device refuses a 0.5 entry, naming its input kind."""
    with open_device(profile) as device:
        kind = device.capabilities.input_kind
        if kind == "real":
            raise NotApplicable("real-input device accepts every finite value")
        x = valid_batch(device, 2)
        x[0, 0] = 0.5
        _raises_input_error(lambda: device.project(x), f"{kind}-input device", "0.5 entry")
        assert device.project(valid_batch(device, 2)).values.shape == (2, device.out_features)


def check_input_limit_is_enforced(profile: ProfileLike) -> None:
    """The declared ``max_in_features`` covers the profile and is refused beyond."""
    with open_device(profile) as device:
        limit = device.capabilities.max_in_features
        if limit is None:
            raise NotApplicable("no hardware input limit declared")
        assert device.in_features <= limit, f"profile in_features {device.in_features} > limit {limit}"
        _raises_input_error(
            lambda: device.project(torch.zeros(1, limit + 1)), f"at most {limit}", "batch wider than the limit"
        )


def check_settable_options_are_validated(profile: ProfileLike) -> None:
    """Each option in ``capabilities.settable`` takes its in-range values and refuses, with
    :class:`InputError` naming it, a value outside; an undeclared option is refused too."""
    with open_device(profile) as device:
        settable = dict(device.capabilities.settable)
        _raises_input_error(lambda: device.set_options(not_an_option=1.0), "not_an_option", "undeclared option")
        if not settable:
            raise NotApplicable("no run-time option declared")
        for name, (low, high, _unit) in settable.items():
            inside = low if math.isfinite(low) else (high if math.isfinite(high) else 0.0)
            device.set_options(**{name: inside})
            outside = low - 1.0 if math.isfinite(low) else high + 1.0
            _raises_input_error(functools.partial(device.set_options, **{name: outside}), name, f"{name}={outside}")
            assert device.project(valid_batch(device, 2)).values.shape == (2, device.out_features)


def check_context_manager_closes_the_device(profile: ProfileLike) -> None:
    """``with device:`` closes it; a closed device refuses to project."""
    with open_device(profile) as device:
        device.project(valid_batch(device, 1))
        assert not device.closed
    assert device.closed
    try:
        device.project(valid_batch(device, 1))
    except DeviceUnavailable as exc:
        assert "closed" in str(exc)
    else:
        raise AssertionError("a closed device projected")


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[ProfileLike], None]


CHECKS: tuple[Check, ...] = tuple(
    Check(f.__name__.removeprefix("check_"), f)
    for f in (
        check_projection_shape,
        check_same_profile_same_projections,
        check_noise_lower_bound_is_input_independent,
        check_declared_noise_matches_repeated_projections,
        check_bad_batches_raise_input_error,
        check_values_outside_the_input_kind_raise_input_error,
        check_input_limit_is_enforced,
        check_settable_options_are_validated,
        check_context_manager_closes_the_device,
    )
)


def check_device(profile: ProfileLike) -> dict[str, str]:
    """Run every check; returns ``{check: "passed" | "not applicable: why"}``.

    Raises :class:`AssertionError` (naming the check) at the first failure, and
    :class:`DeviceUnavailable` when the device cannot be built (hardware absent).
    """
    outcome: dict[str, str] = {}
    for check in CHECKS:
        try:
            check.run(profile)
        except NotApplicable as exc:
            outcome[check.name] = f"not applicable: {exc}"
            continue
        except AssertionError as exc:
            raise AssertionError(f"{check.name}: {exc}") from exc
        outcome[check.name] = "passed"
    return outcome


def run_checks(profile: ProfileLike, only: list[str] | None = None) -> dict[str, tuple[str, str]]:
    """Run the checks (all, or those named in ``only``) and report each, never stopping at a failure:
    ``{check: (status, detail)}`` with status ``passed``, ``not applicable`` or ``failed``
    (``opu-hal check``). A device that cannot be built is a failure of every check."""
    names = [c.name for c in CHECKS]
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        raise InputError(f"unknown check(s) {', '.join(unknown)}; the checks are {', '.join(names)}")
    outcome: dict[str, tuple[str, str]] = {}
    for check in CHECKS:
        if only and check.name not in only:
            continue
        try:
            check.run(profile)
        except NotApplicable as exc:
            outcome[check.name] = ("not applicable", str(exc))
        except (AssertionError, OpuHalError) as exc:
            outcome[check.name] = ("failed", f"{type(exc).__name__}: {exc}".replace("\n", " "))
        else:
            outcome[check.name] = ("passed", "")
    return outcome


def parametrize_checks(argname: str = "check") -> Any:
    """``pytest.mark.parametrize`` over :data:`CHECKS`, with the checks' names as ids."""
    import pytest

    return pytest.mark.parametrize(argname, CHECKS, ids=[c.name for c in CHECKS])


def run_check(check: Check, profile: ProfileLike) -> None:
    """Run one check under pytest: a missing hardware device or a check that does not apply
    is a skip with the reason."""
    import pytest

    try:
        check.run(profile)
    except NotApplicable as exc:
        pytest.skip(str(exc))
    except DeviceUnavailable as exc:
        if load_profile(profile).requires_hardware:
            pytest.skip(f"needs hardware: {exc}")
        raise
