"""The causal unbalanced OT operator (Theorem 1, Lemma 2 of proofs/)."""

import warnings

import numpy as np
import ot
import pytest
from conftest import plain_prefix_row
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp, softmax

import otprior
from otprior import DomainError, causal_ot_attention, causal_ot_fixed_point


def pot_prefix_row(scores, rho, t):
    """POT's semi-unbalanced Sinkhorn on the t x t prefix (rows exact, KL on columns)."""
    tri = np.tril(np.ones((t, t), dtype=bool))
    M = np.where(tri, -scores[:t, :t], 1e3)  # cost 1e3 above the diagonal: exp(-1e3) == 0
    reg_m = (np.inf, rho / (1 - rho)) if rho > 0 else (np.inf, 0.0)
    plan = ot.sinkhorn_unbalanced(np.ones(t), np.ones(t), M, reg=1.0, reg_m=reg_m, numItermax=200_000, stopThr=1e-15)
    return plan[-1]


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9])
def test_operator_equals_pot_on_every_prefix(rho):
    rng = np.random.default_rng(1)
    n = 24
    S = rng.normal(scale=1.5, size=(n, n))
    A = otprior.causal_ot_attention(S, rho)
    for t in range(1, n + 1):
        np.testing.assert_allclose(A[t - 1, :t], pot_prefix_row(S, rho, t), rtol=0, atol=1e-11)
    assert np.all(A[np.triu_indices(n, 1)] == 0.0)


@pytest.mark.parametrize("rho", [0.3, 0.8])
def test_operator_equals_plain_iteration(rho):
    rng = np.random.default_rng(2)
    n = 40
    S = rng.uniform(-3, 3, size=(n, n))
    A = otprior.causal_ot_attention(S, rho)
    for t in (1, 2, 7, 20, 40):
        np.testing.assert_allclose(A[t - 1, :t], plain_prefix_row(S, rho, t, tol=1e-13), rtol=1e-10, atol=0)


def test_rho_zero_is_causal_softmax():
    rng = np.random.default_rng(3)
    S = rng.normal(size=(16, 16))
    masked = np.where(np.tril(np.ones((16, 16), dtype=bool)), S, -np.inf)
    np.testing.assert_allclose(otprior.causal_ot_attention(S, 0.0), softmax(masked, axis=1), atol=1e-15)


def test_prefix_consistency_holds_for_operator_and_fails_for_full_variant():
    rng = np.random.default_rng(4)
    S = rng.normal(scale=2.0, size=(30, 30))
    A = otprior.causal_ot_attention(S, 0.6)
    for k in (5, 17, 29):
        np.testing.assert_allclose(otprior.causal_ot_attention(S[:k, :k], 0.6), A[:k, :k], atol=1e-12)
    full = otprior.causal_ot_attention(S, 0.6, variant="full")
    full_k = otprior.causal_ot_attention(S[:17, :17], 0.6, variant="full")
    assert np.max(np.abs(full[:17, :17] - full_k)) > 1e-3  # rows change when tokens are appended
    np.testing.assert_allclose(full[-1], A[-1], atol=1e-12)  # the last row is the same problem
    np.testing.assert_allclose(full.sum(axis=1), 1.0, atol=1e-13)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_contraction_rate_rho_is_observed(rho):
    rng = np.random.default_rng(5)
    S = rng.normal(size=(20, 20))
    fp = otprior.causal_ot_fixed_point(S, rho, dual_tol=1e-13)
    r = fp.residuals
    ratios = r[1:] / r[:-1]
    # Theorem 1 on the quotient by constants: every sweep contracts osc by at most rho
    assert np.all(ratios[r[1:] > 1e-10] <= rho * (1 + 1e-4))  # below 1e-10 rounding noise dominates
    # the duals solve the fixed-point equations, to the certified accuracy
    assert fp.error_bound <= 1e-12
    np.testing.assert_allclose(fp.plan(S).sum(axis=1), 1.0, atol=1e-13)
    # without the normalisation the constant mode contracts at exactly rho (Theorem 1(1))
    s = np.where(np.tril(np.ones((20, 20), dtype=bool)), S, -np.inf)
    g, res = np.zeros(20), []
    for _ in range(60):
        f = -logsumexp(s + g[None, :], axis=1)
        g_new = -rho * logsumexp(s + f[:, None], axis=0)
        res.append(np.max(np.abs(g_new - g)))
        g = g_new
    res = np.array(res) + 1e-300
    tail = (res[1:] / res[:-1])[(res[:-1] > 1e-9) & (res[1:] > 1e-11)][-5:]
    np.testing.assert_allclose(tail, rho, rtol=2e-3)


def test_large_scores_do_not_overflow():
    rng = np.random.default_rng(6)
    S = rng.choice([-1e3, 1e3], size=(12, 12)) + rng.normal(size=(12, 12))
    A = otprior.causal_ot_attention(S, 0.7)
    assert np.all(np.isfinite(A))
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-13)
    for t in (3, 8, 12):
        np.testing.assert_allclose(A[t - 1, :t], plain_prefix_row(S, 0.7, t), rtol=1e-9, atol=1e-300)


def test_batches_match_single_matrices():
    rng = np.random.default_rng(7)
    S = rng.normal(size=(2, 3, 10, 10))
    A = otprior.causal_ot_attention(S, 0.5)
    assert A.shape == S.shape
    for idx in np.ndindex(2, 3):
        np.testing.assert_allclose(A[idx], otprior.causal_ot_attention(S[idx], 0.5), atol=1e-15)


def test_acceleration_does_not_change_the_answer():
    rng = np.random.default_rng(8)
    S = rng.normal(size=(32, 32))
    fast = otprior.causal_ot_attention(S, 0.9)
    slow = otprior.causal_ot_attention(S, 0.9, accelerate=False)
    np.testing.assert_allclose(fast, slow, atol=1e-11)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 12),
    rho=st.floats(0.0, 0.95),
    scale=st.floats(0.0, 5.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_fixed_point_equations_hold(n, rho, scale, seed):
    S = np.random.default_rng(seed).normal(scale=scale, size=(n, n))
    A = otprior.causal_ot_attention(S, rho)
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(A[-1, :n], plain_prefix_row(S, rho, n), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("rho", [-0.1, 1.0, 1.5, float("nan"), float("inf"), "0.5", None])
def test_refuses_bad_rho(rho):
    with pytest.raises(DomainError, match="rho"):
        otprior.causal_ot_attention(np.zeros((3, 3)), rho)


@pytest.mark.parametrize(
    "scores",
    [np.zeros((3, 4)), np.zeros(5), np.zeros((0, 0)), np.array([[0.0, 0.0], [np.nan, 0.0]]), np.array([[np.inf]])],
)
def test_refuses_bad_scores(scores):
    with pytest.raises(DomainError, match="scores"):
        otprior.causal_ot_attention(scores, 0.5)


def test_nan_above_diagonal_is_ignored():
    S = np.array([[0.0, np.nan], [1.0, 0.0]])
    assert np.all(np.isfinite(otprior.causal_ot_attention(S, 0.5)))


def test_refuses_bad_variant_and_tolerance():
    with pytest.raises(DomainError, match="variant"):
        otprior.causal_ot_attention(np.zeros((2, 2)), 0.5, variant="rows")
    with pytest.raises(DomainError, match="dual_tol"):
        otprior.causal_ot_attention(np.zeros((2, 2)), 0.5, dual_tol=0.0)


def test_large_spread_sparse_log_domain_matches_the_dense_plain_iteration():
    # spread x 500 over two blocks: the log-domain path evaluates the underflowing entries
    # on sparse supports reused across sweeps; the reference is dense and unaccelerated
    S = np.random.default_rng(9).normal(size=(129, 129)) * 500.0
    A = otprior.causal_ot_attention(S, 0.7)
    for t in (100, 129):
        np.testing.assert_allclose(A[t - 1, :t], plain_prefix_row(S, 0.7, t, tol=1e-14), rtol=0, atol=1e-11)


@pytest.mark.parametrize("func", [causal_ot_attention, causal_ot_fixed_point])
@pytest.mark.parametrize("bad", ["no", None, [], 1])
def test_accelerate_is_a_bool(func, bad):
    with pytest.raises(DomainError, match="accelerate"):
        func(np.zeros((3, 3)), 0.5, accelerate=bad)


def test_plan_does_not_touch_the_masked_triangle():
    s = np.zeros((3, 3))
    s[0, 2] = 1e3  # above the diagonal: never used, and must not overflow
    fp = causal_ot_fixed_point(s, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = fp.plan(s)
    assert P[0, 2] == 0.0 and np.allclose(P.sum(axis=1), 1.0)


@pytest.mark.parametrize("accelerate", [True, False])
def test_one_huge_score_does_not_disturb_the_earlier_prefixes(accelerate):
    """Prefix consistency with one huge score in a later row: the rows before it depend only on
    their own prefix (they were off by 1.5e-5, sharing a log-domain block's stabiliser)."""
    s = np.tril(np.array([[2.0, 0, 0, 0], [-0.5, -0.2, 0, 0], [-0.9, 3.3, 0.2, 0], [1e12, -0.7, -1.1, -0.4]]))
    full = causal_ot_attention(s, 0.99, accelerate=accelerate)
    for k in range(3):
        alone = causal_ot_attention(s[: k + 1, : k + 1], 0.99, accelerate=accelerate)[k]
        assert np.max(np.abs(full[k, : k + 1] - alone)) < 1e-10, k
    if not accelerate:
        return  # the plain iteration at rho = 0.99 on n = 65 takes seconds; the 4 x 4 case covers it
    s = np.random.default_rng(2).standard_normal((65, 65))
    s[40, 0] = 1e12
    full = causal_ot_attention(s, 0.99, accelerate=accelerate)
    for k in (20, 39):
        alone = causal_ot_attention(s[: k + 1, : k + 1], 0.99, accelerate=accelerate)[k]
        assert np.max(np.abs(full[k, : k + 1] - alone)) < 1e-10, k
