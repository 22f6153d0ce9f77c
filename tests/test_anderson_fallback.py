"""The accelerated operator never fails where the plain iteration succeeds, by construction.

A block (or the single problem of ``causal_ot_fixed_point``) on which the mixing fails is solved
again by exactly the plain route from the same start with the same budget (Remark 5,
``proofs/operator_fast_paths.md``), so there the answer is bit for bit that of
``accelerate=False``. On ordinary inputs, where the mixing succeeds, nothing changed: the
answers are compared bit for bit with the solver and the operator of commit 01e0032, loaded from
git (the reference is the previous implementation, an independent route for this purpose).
"""

import importlib

import numpy as np
import pytest
from _git_module import module_at

import otprior
from otprior import ConvergenceError, causal_ot_attention, causal_ot_fixed_point

ot_prior_module = importlib.import_module("otprior.ot_prior")  # the attribute otprior.ot_prior is the function

BASE = "01e0032"


def _old_modules():
    anderson = module_at(BASE, "otprior/_anderson.py", "otprior._anderson_01e0032", "otprior")
    causal = module_at(BASE, "otprior/causal_ot.py", "otprior._causal_ot_01e0032", "otprior")
    causal.anderson_solve = anderson.anderson_solve
    causal.anderson_memory = anderson.anderson_memory
    return anderson, causal


def _routes(call, S, rho, **kw):
    out = []
    for acc in (False, True):
        try:
            out.append(call(S, rho, accelerate=acc, **kw))
        except ConvergenceError:
            out.append(None)
    return out


# (scores, rho, max_iter): inputs on which the mixing of 01e0032 failed while the plain iteration succeeded,
# found by a seeded search (spreads x1..x1e3, rho up to 0.9999, small budgets, n 1..64)
FAILED_BEFORE = [
    (np.random.default_rng(10).standard_normal((3, 3)) * 300, 0.999, 332),
]


@pytest.mark.parametrize("case", range(len(FAILED_BEFORE)))
def test_accelerated_route_succeeds_where_the_plain_one_does(case):
    S, rho, max_iter = FAILED_BEFORE[case]
    plain, fast = _routes(causal_ot_attention, S, rho, dual_tol=1e-10, max_iter=max_iter)
    assert plain is not None
    assert fast is not None, "the accelerated route failed where the plain one succeeded"
    assert np.array_equal(fast, plain)  # one block, solved again by the plain route: its rows bit for bit
    # in a batch too, next to a matrix on which the mixing succeeds (that one keeps the mixing's answer)
    batch = np.stack([S, np.random.default_rng(0).standard_normal(S.shape) * 300])
    plain_b, fast_b = _routes(causal_ot_attention, batch, rho, dual_tol=1e-10, max_iter=max_iter)
    assert plain_b is not None and fast_b is not None
    assert np.array_equal(fast_b[0], plain_b[0])
    np.testing.assert_allclose(fast_b, plain_b, rtol=0, atol=1e-10)


def test_fixed_point_falls_back_to_the_plain_iteration_bit_for_bit():
    S, rho, max_iter = FAILED_BEFORE[0]
    _, old = _old_modules()
    with pytest.raises(ConvergenceError):  # the mixing alone fails within this budget
        old.causal_ot_fixed_point(S, rho, dual_tol=1e-10, max_iter=max_iter, accelerate=True)
    plain = causal_ot_fixed_point(S, rho, dual_tol=1e-10, max_iter=max_iter)
    fast = causal_ot_fixed_point(S, rho, dual_tol=1e-10, max_iter=max_iter, accelerate=True)
    assert np.array_equal(fast.g, plain.g) and np.array_equal(fast.f, plain.f)
    assert fast.iterations == plain.iterations and fast.error_bound == plain.error_bound


ORDINARY = [(1, 1.0, 0.5), (7, 1.0, 0.9), (33, 5.0, 0.99), (40, 300.0, 0.9), (20, 1.0, 0.0)]
ORDINARY_SLOW = [(24, 30.0, 0.999), (64, 30.0, 0.999), (130, 1.0, 0.9), (300, 1.0, 0.5), (300, 3.0, 0.99), (64, 1e3, 0.99)]


# Where a block is at least _F32_WIDTH wide (and the spread at most _F32_SPREAD) the accelerated route now runs
# refinement sweeps (Lemma 7, proofs/operator_fast_paths.md), which move the certified point within the certified
# accuracy: there the answer is compared bit for bit with the refinement switched off, and with it to this bound
# relative to each row's largest entry (measured: at most 1.9e-14 on these inputs; 5.1e-14 at n = 1024, rho = 0.99;
# an independent review found 1.39e-13 at n = 257, rho = 0.99, about 1e-11 relative per entry against a dual_tol =
# 1e-15 reference, within the certified accuracy)
REFINED_RTOL = 5e-13


def _refined(S, acc):
    import otprior.causal_ot as co

    n = S.shape[-1]
    spread = np.ptp(np.where(np.tri(n, dtype=bool), S, np.nan), axis=-1)
    return acc and n >= co._F32_WIDTH and np.nanmax(spread) <= co._F32_SPREAD


def _check_ordinary(cases, priors, monkeypatch):
    import otprior.causal_ot as co

    anderson, old = _old_modules()
    rng = np.random.default_rng(2026)
    inputs = [(rng.standard_normal((n, n)) * scale, rho) for n, scale, rho in cases]
    inputs.append((rng.standard_normal((2, 3, 9, 9)) * 3.0, 0.99))
    for S, rho in inputs:
        for acc in (True, False) if rho <= 0.99 and S.shape[-1] < 30 else (True,):
            new = causal_ot_attention(S, rho, accelerate=acc)
            ref = old.causal_ot_attention(S, rho, accelerate=acc)
            if _refined(S, acc):
                top = np.max(np.abs(ref), axis=-1, keepdims=True)
                assert np.all(np.abs(new - ref) <= REFINED_RTOL * top), (S.shape, rho)
                monkeypatch.setattr(co, "_increment_map", lambda *args: None)  # no refinement sweeps
                new = causal_ot_attention(S, rho, accelerate=acc)
                monkeypatch.undo()
            assert np.array_equal(new, ref), (S.shape, rho, acc)
        if S.ndim == 2 and S.shape[0] <= 64:
            a = causal_ot_fixed_point(S, rho, accelerate=True)
            b = old.causal_ot_fixed_point(S, rho, accelerate=True)
            assert np.array_equal(a.g, b.g) and a.iterations == b.iterations, (S.shape, rho)
    # the prior's double route (anderson_solve below 2**17 lengths)
    for n, rho in priors:
        new = otprior.ot_prior(n, rho)
        monkeypatch.setattr(ot_prior_module, "anderson_solve", anderson.anderson_solve)
        ref = otprior.ot_prior(n, rho)
        monkeypatch.undo()
        assert np.array_equal(np.asarray(new), np.asarray(ref)), (n, rho)


def test_ordinary_inputs_are_bit_identical_to_the_previous_release(monkeypatch):
    _check_ordinary(ORDINARY, [(50, 0.5)], monkeypatch)


@pytest.mark.slow
def test_more_ordinary_inputs_are_bit_identical_to_the_previous_release(monkeypatch):
    _check_ordinary(ORDINARY_SLOW, [(300, 0.9), (1000, 0.9), (3000, 0.99), (20000, 0.999)], monkeypatch)


def test_result_does_not_depend_on_the_memory_layout():
    # Fortran order gave differences of 7.7e-14 here before the shifted scores were made C-ordered
    S = np.random.default_rng(5).standard_normal((100, 100))
    ref = causal_ot_attention(S, 0.9, dual_tol=1e-8)
    for view in (np.asfortranarray(S), np.repeat(S, 2, axis=1)[:, ::2]):
        assert np.array_equal(causal_ot_attention(view, 0.9, dual_tol=1e-8), ref)
    batch = np.stack([S, S[::-1, ::-1]])
    assert np.array_equal(causal_ot_attention(batch.transpose(0, 2, 1).copy().transpose(0, 2, 1), 0.9,
                                              dual_tol=1e-8)[0], ref)
    ref = causal_ot_fixed_point(S[:20, :20], 0.9, accelerate=True)
    got = causal_ot_fixed_point(np.asfortranarray(S[:20, :20]), 0.9, accelerate=True)
    assert np.array_equal(got.g, ref.g)


def _needed(monkeypatch, S, rho):
    """Sweeps the plain route needs on ``S`` (largest over its solves; None where it fails within 3000)."""
    import otprior.causal_ot as causal_ot

    solve, seen = causal_ot.anderson_solve, []

    def recording(*args, **kw):
        out, info = solve(*args, **kw)
        seen.append(int(info["iterations"].max()))
        return out, info

    monkeypatch.setattr(causal_ot, "anderson_solve", recording)
    try:
        causal_ot_attention(S, rho, accelerate=False, max_iter=3000)
    except ConvergenceError:
        return None
    finally:
        monkeypatch.undo()
    return max(seen)


def _sweep(cases, monkeypatch):
    checked, worst = 0, 0.0
    for n, scale, rho, seed in cases:
        S = np.random.default_rng(seed).standard_normal((n, n)) * scale
        need = _needed(monkeypatch, S, rho)
        if need is None:
            continue
        # the smallest budget on which the plain route succeeds, a little more, and less (where it may fail)
        for max_iter in sorted({need, need + 3, max(1, need // 2)}):
            plain, fast = _routes(causal_ot_attention, S, rho, max_iter=max_iter)
            if plain is None:
                continue
            assert fast is not None, (n, scale, rho, seed, max_iter)
            worst = max(worst, float(np.max(np.abs(fast - plain))))
            checked += 1
    assert checked and worst <= 1e-10, (checked, worst)


# (n, spread factor, rho, seed): inputs on which the mixing of 01e0032 failed within the plain route's budget
SWEEP_FAILED_BEFORE = [(2, 10.0, 0.5, 4), (3, 300.0, 0.99, 3)]
SWEEP_FAILED_BEFORE_SLOW = [(5, 100.0, 0.999, 1), (5, 100.0, 0.999, 4), (5, 100.0, 0.9999, 1), (3, 100.0, 0.999, 4)]


def test_seeded_sweep_with_the_plain_route_budget(monkeypatch):
    _sweep(SWEEP_FAILED_BEFORE + [(1, 1.0, 0.9, 0), (9, 1e3, 0.9, 2)], monkeypatch)


@pytest.mark.slow
def test_bigger_seeded_sweep_with_the_plain_route_budget(monkeypatch):
    cases = [(n, scale, rho, seed) for scale in (1.0, 10.0, 100.0, 300.0, 1e3) for rho in (0.5, 0.9, 0.99, 0.999, 0.9999)
             for n in (1, 2, 3, 5, 8, 16, 33, 64) for seed in range(2)]
    _sweep(SWEEP_FAILED_BEFORE_SLOW + cases, monkeypatch)
    # a batch whose matrices need different budgets
    S = np.random.default_rng(4).standard_normal((3, 5, 5)) * np.array([1.0, 100.0, 1e3])[:, None, None]
    plain, fast = _routes(causal_ot_attention, S, 0.999, max_iter=1000)
    assert plain is None or (fast is not None and np.max(np.abs(fast - plain)) <= 1e-10)


def test_default_settings_reach_the_tolerance_at_rho_09999():
    # with the default budget (10000 sweeps) the mixing of 01e0032 failed on this input (the plain iteration
    # needs more than 30000 sweeps); now about 3100: a rejected candidate is now halved towards the plain step
    # (backtrack, otprior/_anderson.py) instead of being discarded, and the default is reached
    S = np.random.default_rng(1).standard_normal((8, 8))
    A = causal_ot_attention(S, 0.9999)
    np.testing.assert_allclose(A.sum(axis=1), 1.0, rtol=0, atol=1e-14)


@pytest.mark.slow
def test_rho_09999_agrees_with_the_plain_iteration():
    S = np.random.default_rng(0).standard_normal((8, 8))
    plain = causal_ot_attention(S, 0.9999, accelerate=False, max_iter=10**6)
    fast = causal_ot_attention(S, 0.9999)
    # both certified to max(dual_tol, 16 eps (1 + max|g|) / (1 - rho)) ~ 2e-9 in the duals
    np.testing.assert_allclose(fast, plain, rtol=1e-8, atol=0)


def test_errors_say_both_routes_failed_and_which_condition():
    S = np.random.default_rng(0).standard_normal((16, 16))
    with pytest.raises(ConvergenceError, match=r"prefixes 0\.\.15: the accelerated route failed and so did the plain "
                       r"route .* did not reach the tolerance .* after max_iter=3 sweeps \(residual reached") as err:
        causal_ot_attention(S, 0.9, max_iter=3)
    assert err.value.failures["tolerance"].size and err.value.partial is not None
    # one problem, not prefixes: the message says so (it said "prefixes 15..15")
    with pytest.raises(ConvergenceError, match=r"^the full problem: the accelerated route failed and so did the plain"):
        causal_ot_fixed_point(S, 0.9, max_iter=3, accelerate=True)
    with pytest.raises(ConvergenceError, match=r"^the full problem: the accelerated route failed and so did the plain"):
        causal_ot_attention(S, 0.9, max_iter=3, variant="full")


def test_mixing_slower_than_the_plain_iteration_switches_to_plain_steps(monkeypatch):
    # a linear 0.9-contraction with fixed point (30, -20, 10); the mixing's coefficients are replaced by a constant
    # 0.5, so every candidate is accepted but shrinks the residual more slowly than the plain step would: with the
    # contraction factor given, the stall rule hands the problem to plain steps from its best iterate, which finish
    # within the budget (543 sweeps); without it the budget runs out (837 sweeps needed)
    import otprior._anderson as anderson

    monkeypatch.setattr(anderson, "_gamma", lambda gram, rhs, ns: 0.5 * (np.arange(rhs.shape[1]) < ns[:, None]))
    fixed = np.array([30.0, -20.0, 10.0])

    def G(x, rows):
        return 0.9 * x + 0.1 * fixed

    out, info = anderson.anderson_solve(G, np.zeros((1, 3)), 1e-12, max_iter=800, memory=4, rate=0.9)
    assert info["stalled"][0]
    np.testing.assert_allclose(out[0], fixed, rtol=0, atol=1e-12 / (1 - 0.9))
    with pytest.raises(ConvergenceError, match="did not reach the tolerance"):
        anderson.anderson_solve(G, np.zeros((1, 3)), 1e-12, max_iter=800, memory=4)
