"""The double-precision sweep of Theorem 2 (``proofs/constant_score_recurrence.md``) against mpmath.

The reference evaluates ``L1 = log cumsum exp(y)``, ``L2_j = log sum_{i >= j} exp(-L1_i)`` and
``y' = -rho (L2 - L2[-1])`` term by term at 40 digits in a private mpmath context.
"""

import mpmath
import numpy as np
import pytest

import otprior  # noqa: F401  (loads the package)
from otprior.ot_prior import _log_cumsum_exp, _sweep


def _reference(y, rho):
    ctx = mpmath.MPContext()
    ctx.dps = 40
    acc, L1 = ctx.mpf(0), []
    for v in y:
        acc += ctx.exp(ctx.mpf(float(v)))
        L1.append(ctx.log(acc))
    acc, L2 = ctx.mpf(0), [None] * len(y)
    for j in range(len(y) - 1, -1, -1):
        acc += ctx.exp(-L1[j])
        L2[j] = ctx.log(acc)
    y_new = np.array([float(-rho * (L2[j] - L2[-1])) for j in range(len(y))])
    return y_new, np.array([float(v) for v in L1])


@pytest.mark.parametrize(
    "n, scale, seed",
    [(1, 1.0, 0), (2, 3.0, 1), (3, 1.0, 2), (17, 50.0, 3), (400, 1.0, 4), (400, 30.0, 5), (401, 2000.0, 6)],
)
def test_sweep_and_log_cumsum_agree_with_40_digits(n, scale, seed):
    # scale 2000: scaled block sums underflow, so the exact fallback is exercised
    y = np.random.default_rng(seed).normal(size=n) * scale
    ref_y, ref_l1 = _reference(y, 0.9)
    b = int(np.ceil(np.sqrt(n)))
    # (b + 2) eps relative to 1 + |value| (docstring of _log_cumsum_exp), doubled for the second pass
    tol = 4 * (b + 2) * np.finfo(float).eps
    y_new, L1 = _sweep(y, 0.9)
    assert np.max(np.abs(L1 - ref_l1) / (1 + np.abs(ref_l1))) <= tol
    assert np.max(np.abs(_log_cumsum_exp(y) - ref_l1) / (1 + np.abs(ref_l1))) <= tol
    assert np.max(np.abs(y_new - ref_y) / (1 + np.max(np.abs(ref_l1)))) <= tol
    y_only, none = _sweep(y, 0.9, with_l1=False)
    assert none is None and np.array_equal(y_only, y_new)
