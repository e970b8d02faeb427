"""Narrowing a bracket of noise multipliers in few accountant evaluations: secant steps on ``log
epsilon`` against ``log z`` (a smooth, nearly straight line), regula falsi or bisection where the
secant leaves the bracket or the bracket did not halve in two steps, and, once the estimate has
settled, one step across it that closes the bracket. The contract is
bisection's: the returned ``z`` is the upper end of a final bracket ``[low, high]`` with ``high / low
<= 1 + rtol``, ``epsilon(high) <= target < epsilon(low)``; only the number of evaluations changes
(about 7 instead of 14 from a bracket of ratio 4 to ``rtol = 1e-4``).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def _gap(epsilon: float, target: float) -> float:
    """``log(epsilon / target)``: positive when ``epsilon`` misses the target, ``inf`` for ``inf``."""
    return math.inf if not math.isfinite(epsilon) else math.log(max(epsilon, 1e-300) / target)


def narrow_bracket(
    epsilon_at: Callable[[float], float],
    target: float,
    low: float,
    high: float,
    rtol: float = 1e-4,
    progress: Callable[[float, float], None] | None = None,
) -> float:
    """The upper end of ``[low, high]`` (``epsilon_at(low) > target >= epsilon_at(high)``, epsilon
    falling as ``z`` grows) narrowed until ``high / low <= 1 + rtol``; ``progress(low, high)`` after
    each step. The returned value always fits (it was evaluated)."""
    tolerance = math.log1p(rtol)
    bracket = _Bracket(
        math.log(low), math.log(high), high, _gap(epsilon_at(low), target), _gap(epsilon_at(high), target)
    )
    points = [(bracket.a, bracket.fa), (bracket.b, bracket.fb)]  # evaluated (log z, gap), latest last
    widths = [bracket.width]
    while bracket.width > tolerance:
        x = _next_point(bracket, points, widths, tolerance)
        fx = _gap(epsilon_at(math.exp(x)), target)
        step = abs(x - points[-1][0])
        points.append((x, fx))
        bracket.update(x, fx)
        if bracket.width > tolerance and step < tolerance:  # the estimate has settled: step across it
            y = x - 0.9 * tolerance if fx <= 0 else x + 0.9 * tolerance
            if bracket.a < y < bracket.b:
                fy = _gap(epsilon_at(math.exp(y)), target)
                points.append((y, fy))
                bracket.update(y, fy)
        widths.append(bracket.width)
        if progress is not None:
            progress(math.exp(bracket.a), bracket.z_high)
    return bracket.z_high


class _Bracket:
    """``[a, b]`` in ``log z`` with the gaps at its ends; ``z_high``: the evaluated ``z`` at ``b``."""

    def __init__(self, a: float, b: float, z_high: float, fa: float, fb: float) -> None:
        self.a, self.b, self.z_high, self.fa, self.fb = a, b, z_high, fa, fb

    @property
    def width(self) -> float:
        return self.b - self.a

    def update(self, x: float, fx: float) -> None:
        if fx <= 0:
            self.b, self.fb, self.z_high = x, fx, math.exp(x)
        else:
            self.a, self.fa = x, fx


def _next_point(bracket: _Bracket, points: list[tuple[float, float]], widths: list[float], tolerance: float) -> float:
    """The secant through the two latest points when it falls inside the bracket, else regula falsi
    on the bracket's ends, else (or when the bracket did not halve in two steps) its midpoint; kept a
    quarter tolerance inside the ends so that every step shrinks the bracket."""
    (x0, f0), (x1, f1) = points[-2], points[-1]
    stalled = len(widths) >= 3 and bracket.width > widths[-3] / 2
    x = (bracket.a + bracket.b) / 2
    if not stalled:
        if (
            math.isfinite(f0)
            and math.isfinite(f1)
            and f0 != f1
            and bracket.a < x1 - f1 * (x1 - x0) / (f1 - f0) < bracket.b
        ):
            x = x1 - f1 * (x1 - x0) / (f1 - f0)
        elif math.isfinite(bracket.fa) and bracket.fa > bracket.fb:
            x = bracket.b - bracket.fb * bracket.width / (bracket.fb - bracket.fa)
    return min(max(x, bracket.a + tolerance / 4), bracket.b - tolerance / 4)
