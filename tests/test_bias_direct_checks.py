"""The direct sums of a user's ``Bias`` (n up to 2^22) answer within 2^-38 of an independent sum or refuse by name.

References are formed here without the code under test: ``math.fsum`` of weights written in a form without overflow
or cancellation, and mpmath in a private context for the terms whose double evaluation is at stake.
"""

import math

import mpmath
import numpy as np
import pytest

from otprior import DomainError
from otprior.encodings import Bias


def _close_or_refused(bias, W, n, ref):
    try:
        got = bias.distant_mass(W, n)
    except DomainError:
        return
    assert abs(got - ref) <= 2.0**-38 * abs(ref), (got, ref)


def test_an_overflow_inside_b_is_not_read_as_a_zero_weight():
    # sympy writes -(d/10000)**80 as -d**80/1e320: d**80 overflows from d ~ 7100 although b is -1.7e-8 there
    d = np.arange(10_000, dtype=float)
    w = np.exp(-((d / 10_000) ** 80))
    ref = math.fsum(w[5000:]) / math.fsum(w)
    bias = Bias("-(d/10000)**80")
    _close_or_refused(bias, 5000, 10_000, ref)
    arr = bias.distant_mass(5000, np.array([10_000]))
    assert abs(float(arr[0]) - ref) <= 2.0**-38 * ref


@pytest.mark.parametrize("n", [60_000, 100_000])
def test_an_overflowing_softplus_is_refused_or_right(n):
    d = np.arange(n, dtype=float)
    w = np.exp(-(d / 50 + np.log1p(np.exp(-d / 50))) / 1000)  # log(e^x + 1) without the overflow
    ref = math.fsum(w[20_000:]) / math.fsum(w)
    _close_or_refused(Bias("-log(exp(d/50)+1)/1000"), 20_000, n, ref)


@pytest.mark.parametrize("n", [30_100, 100_000])
def test_a_rounded_constant_exponent_and_a_tiny_distant_part(n):
    # the exponent 200/3 rounded to a double moves b by |b log(d/30000)| eps ~ 1e-11 at d = 30000 (the first-order
    # estimate dropped it: 2.9e-11 off); at n = 1e5 a D of 1e-265 was read against the total (0.46 off)
    mp = mpmath.MPContext()
    mp.prec = 120
    d = np.arange(30_000, dtype=float)
    s_w = math.fsum(np.exp(-600 * (d / 30_000) ** (200 / 3)))  # terms e^{-x}, x small or the term negligible
    third = mp.mpf(200) / 3
    t = mp.fsum(mp.exp(-600 * (mp.mpf(k) / 30_000) ** third) for k in range(30_000, min(n, 30_500)))
    ref = float(t / (t + s_w))  # terms beyond d = 30500 are below e^-1000 of these
    _close_or_refused(Bias("-600*(d/30000)**(200/3)"), 30_000, n, ref)
