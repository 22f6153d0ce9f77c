"""``ot_prior`` near rho = 1 against an independent mpmath recurrence (private context).

The reference brackets Theorem 2's root ``c = Phi_n`` by the sign test of Lemma 2.1
(``proofs/constant_score_recurrence.md``: ``c`` is above the root iff the backward
recurrence started at ``c`` keeps every ``Phi_k`` positive), bisected at 70..120 digits, more
than the 37..71 digits the recurrence loses at these lengths plus 30, and reads
``pi_n(d) = v_{n-d} / c`` there.
"""

import importlib

import numpy as np
import pytest
from _ot_reference import reference_prior

import otprior

_ot = importlib.import_module("otprior.ot_prior")


def _reference(n, rho, dps=160):
    prior, ctx, _ = reference_prior(n, rho, dps, steps=int(3.4 * (dps - 20)))
    return prior, ctx


@pytest.mark.parametrize("n, dps", [(10, 70), pytest.param(16, 110, marks=pytest.mark.slow), pytest.param(21, 120, marks=pytest.mark.slow)])
def test_near_one_prior_condition_and_error_bound_against_mpmath(n, dps):
    """rho = 1 - 1e-6: every entry, log10_condition (56.3 at n = 16, where 976.6 was reported
    once) and log_error_bound, which must bound the error of the returned doubles."""
    rho = 1 - 1e-6
    res = otprior.ot_prior(n, rho)
    ref, ctx = _reference(n, rho, dps)
    err = max(abs(float(ctx.log(ctx.mpf(float(p))) - ctx.log(q))) for p, q in zip(res.prior, ref, strict=True))
    err_log = max(abs(float(ctx.mpf(float(lp)) - ctx.log(q))) for lp, q in zip(res.log_prior, ref, strict=True))
    assert max(err, err_log) <= res.log_error_bound, (err, err_log, res.log_error_bound)
    cond = float(-ctx.log10(ref[-1]))
    assert abs(res.log10_condition - cond) <= 1e-9 * cond, (res.log10_condition, cond)


def test_near_one_rule_skips_the_double_sweep(monkeypatch):
    """The rule is decided from (n, rho) before any work: for 1 - rho < 1e-4 and n <= 4096 the
    double sweep (which spent its 2000 sweeps, seconds, and ended unvouched) is not started."""

    def refuse(*args, **kwargs):
        raise AssertionError("the double sweep was started")

    monkeypatch.setattr(_ot, "_float_prior", refuse)
    res = otprior.ot_prior(20, 1 - 1e-6)
    assert res.certified and np.isclose(res.prior.sum(), 1.0)
    assert _ot._certified_first(20, 1 - 1e-6) and not _ot._certified_first(20, 0.999)


def test_one_problem_anderson_matches_the_batched_solver():
    """From n = 2**17 (here lowered to 4096) the prior's fixed point is solved by the one-problem Anderson loop; the
    batched solver (otprior._anderson, another implementation) gives the same prior within
    the sum of the two certificates (Theorem 1), and the sweep leaves its input untouched."""
    n, rho = 5000, 0.9
    limit = _ot._LEAN_MIN_N
    try:
        _ot._LEAN_MIN_N = 1 << 12  # the one-problem loop at a cheap length
        lean = otprior.ot_prior(n, rho)
    finally:
        _ot._LEAN_MIN_N = limit
    batched = otprior.ot_prior(n, rho)
    assert limit > n
    gap = float(np.max(np.abs(lean.log_prior - batched.log_prior)))
    assert gap <= lean.log_error_bound + batched.log_error_bound, (gap, lean.log_error_bound)
    y = np.random.default_rng(1).normal(size=1000)
    before = y.copy()
    first = _ot._sweep(y, rho)[0].copy()
    assert np.array_equal(y, before) and np.array_equal(_ot._sweep(y, rho)[0], first)
