"""``exp`` and ``log`` in arithmetic the compiler can vectorize.

Numba lowers ``math.exp`` and ``math.log`` to a libm call per value, which keeps a loop from using
SIMD lanes. These two are branch-free polynomials after an exact range reduction, within 1-2 ulp of
libm (tests compare them over their ranges), which is all the float64 acceptance tests of the
samplers need ("exact up to float64 rounding").
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of log 2: n * _LN2_HI is exact for n < 2^11
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
EXP_NEG_MAX = 20.0
_TWO_POWERS = 2.0 ** -np.arange(32.0)
_EXP_TAYLOR = np.array([1.0 / math.factorial(k) for k in range(14)])  # r^14 / 14! < 4e-18 at |r| <= log 2 / 2
# fdlibm's (and musl's) log: log(1 + f) = f - f^2 / 2 + s (f^2 / 2 + R(s^2)), s = f / (2 + f)
_LG1, _LG2, _LG3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
_LG4, _LG5, _LG6 = 2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01


@intrinsic
def _bits(typingctx, x):
    """The IEEE-754 bits of a float64, as an int64 (a bitcast)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _float(typingctx, bits):
    """The float64 whose IEEE-754 bits are the int64 ``bits`` (a bitcast)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@njit(inline="always", cache=True)
def exp_neg(lam):
    """``exp(-lam)`` for ``0 <= lam <= 20``: ``2^-n exp(r)``, ``r = n log 2 - lam`` in
    ``[-log 2 / 2, log 2 / 2]`` (Cody and Waite's split), ``exp(r)`` by its Taylor series to degree 13."""
    n = math.floor(lam * _INV_LN2 + 0.5)
    r = (n * _LN2_HI - lam) + n * _LN2_LO
    value = _EXP_TAYLOR[13]
    for k in range(12, -1, -1):
        value = value * r + _EXP_TAYLOR[k]
    return value * _TWO_POWERS[int(n)]


@njit(inline="always", cache=True)
def log_positive(x):
    """``log x`` for a positive normal float64 (fdlibm's ``__ieee754_log`` as musl writes it, without
    its branches for zero, negatives, subnormals, infinities and NaN): ``x = 2^k (1 + f)`` with
    ``1 + f`` in ``[sqrt 2 / 2, sqrt 2]``."""
    # numba's stubs type an @intrinsic's call with its typing context as first argument
    bits: int = _bits(x)  # type: ignore[call-arg]
    high = (bits >> 32) + (0x3FF00000 - 0x3FE6A09E)
    k = (high >> 20) - 0x3FF
    high = (high & 0x000FFFFF) + 0x3FE6A09E
    f = _float((high << 32) | (bits & 0xFFFFFFFF)) - 1.0
    half_f2 = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    r = w * (_LG2 + w * (_LG4 + w * _LG6)) + z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    dk = float(k)
    return s * (half_f2 + r) + dk * _LN2_LO - half_f2 + f + dk * _LN2_HI
