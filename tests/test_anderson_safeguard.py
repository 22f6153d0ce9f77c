"""Safeguarded Anderson mixing: the accelerated operator succeeds wherever the plain iteration does.

The reference is the plain iteration ``x <- G(x)`` (``accelerate=False``), which converges
for every input by Theorem 1 (``proofs/contraction.md``); acceleration only chooses other
evaluation points, so both routes must give the same attention to the certified accuracy.
"""

import numpy as np
import pytest

import otprior
import otprior.causal_ot as causal_ot
from otprior import ConvergenceError
from otprior._anderson import anderson_solve

# (n, spread factor, rho, seed): the two inputs on which unguarded mixing failed (overflow
# of exp beyond the kernel's safe range; a shape error), and a few from the sweep below
SAMPLE = [(32, 10.0, 0.99, 0), (8, 50.0, 0.99, 23), (8, 1e3, 0.99, 3), (8, 5.0, 0.999, 1)]


def _both_routes(n, scale, rho, seed, max_iter):
    S = np.random.default_rng(seed).normal(size=(n, n)) * scale
    try:
        plain = otprior.causal_ot_attention(S, rho, accelerate=False, max_iter=max_iter)
    except ConvergenceError:
        plain = None
    try:
        fast = otprior.causal_ot_attention(S, rho, max_iter=max_iter)
    except ConvergenceError:
        fast = None
    return plain, fast


@pytest.mark.parametrize("n, scale, rho, seed", SAMPLE)
def test_accelerated_route_agrees_with_the_plain_one(n, scale, rho, seed):
    plain, fast = _both_routes(n, scale, rho, seed, 100_000)
    assert plain is not None, "the plain iteration converges here (Theorem 1)"
    assert fast is not None, "the accelerated route failed where the plain one succeeded"
    np.testing.assert_allclose(fast, plain, rtol=0, atol=1e-10)


@pytest.mark.slow
def test_seeded_sweep_finds_no_input_where_only_the_accelerated_route_fails():
    failures, worst = [], 0.0
    for scale in (1.0, 5.0, 10.0, 50.0, 100.0, 1e3):
        for rho in (0.5, 0.9, 0.99, 0.999):
            for n in (8, 32):
                for seed in range(10):
                    plain, fast = _both_routes(n, scale, rho, seed, 100_000)
                    if plain is not None and fast is None:
                        failures.append((n, scale, rho, seed))
                    if plain is not None and fast is not None:
                        worst = max(worst, float(np.max(np.abs(fast - plain))))
    assert not failures
    assert worst <= 1e-10


def test_candidates_never_leave_the_kernel_safe_range(monkeypatch):
    # every point at which the kernel map is evaluated has |g| <= the safe bound
    # and the safeguard is exercised: some candidates are rejected on this input
    seen, rejected = [], []
    solve = causal_ot.anderson_solve

    def recording(G, x0, threshold, **kw):
        def G2(x, rows):
            if kw.get("bound") is not None:
                seen.append((float(np.max(np.abs(x))), kw["bound"]))
            return G(x, rows)

        out, info = solve(G2, x0, threshold, **kw)
        rejected.append(int(info["rejected"].sum()))
        return out, info

    monkeypatch.setattr(causal_ot, "anderson_solve", recording)
    S = np.random.default_rng(0).normal(size=(32, 32)) * 10
    otprior.causal_ot_attention(S, 0.99)
    assert seen and all(v <= b for v, b in seen)
    assert sum(rejected) > 0


def test_errors_say_which_condition_failed():
    S = np.random.default_rng(0).normal(size=(16, 16))
    with pytest.raises(ConvergenceError, match=r"did not reach the tolerance .* after max_iter=3 sweeps") as err:
        otprior.causal_ot_attention(S, 0.9, max_iter=3)
    assert "0.000e+00" not in str(err.value)
    assert err.value.failures["tolerance"].size > 0 and err.value.partial is not None
    with pytest.raises(ConvergenceError, match=r"1 of 2 problems failed: 1 produced non-finite values \(first at sweep 1\)"):
        anderson_solve(lambda x, rows: np.where(x > 5, np.nan, 0.5 * x - 1), np.array([[10.0], [0.0]]), 1e-12, max_iter=50)
    with pytest.raises(ConvergenceError, match=r"left the safe range \|x\| <= 10 \(first at sweep 1\)"):
        anderson_solve(lambda x, rows: 0.5 * x + 30.0, np.zeros((1, 2)), 1e-12, max_iter=50, bound=10.0)


def test_batched_solve_matches_each_problem_solved_alone():
    # problems with contraction rates 0.2..0.95 finish at different sweeps (the rows of the
    # last active problems then move into their places): every answer must be the problem's
    # own fixed point, found by a plain loop written here, and the sweeps those of the problem
    # solved alone
    rng = np.random.default_rng(5)
    B, m = 9, 20
    rates = np.linspace(0.2, 0.95, B)[[0, 8, 2, 6, 4, 1, 7, 3, 5]]  # holes in the middle
    W = rng.normal(size=(B, m, m))
    W /= np.abs(W).sum(axis=2).max(axis=1)[:, None, None]  # sup-norm 1
    c = rng.normal(size=(B, m)) * 3

    def G(x, rows):
        # a rate-contraction in the sup norm (tanh is 1-Lipschitz)
        return rates[rows, None] * np.tanh(np.einsum("bij,bj->bi", W[rows], x)) + c[rows]

    fixed = np.zeros((B, m))
    for _ in range(2000):
        fixed = G(fixed, np.arange(B))
    tol = 1e-12
    out, info = anderson_solve(G, np.zeros((B, m)), tol * (1 - rates), max_iter=500, memory=5)
    assert len(set(info["iterations"].tolist())) > 3  # the problems finish at different sweeps
    np.testing.assert_allclose(out, fixed, rtol=0, atol=2 * tol)
    for b in range(B):
        alone, one = anderson_solve(
            lambda x, rows, b=b: G(x, np.full(rows.size, b)), np.zeros((1, m)), tol * (1 - rates[b]),
            max_iter=500, memory=5,
        )
        np.testing.assert_allclose(out[b], alone[0], rtol=0, atol=2 * tol)
        assert abs(int(info["iterations"][b]) - int(one["iterations"][0])) <= 1


def test_rejected_candidates_raise_no_overflow_warning():
    """Scores x1e200: the mixing's products overflow, the safeguard rejects the candidate, and
    no RuntimeWarning escapes (the plain iteration issues none either)."""
    import warnings

    from otprior import causal_ot_attention

    s = np.random.default_rng(0).standard_normal((129, 129)) * 1e200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = causal_ot_attention(s, 0.9)
    assert np.array_equal(a, causal_ot_attention(s, 0.9, accelerate=False))
