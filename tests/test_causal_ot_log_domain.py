"""The log-domain path of the causal OT operator: sparse supports, the aligned stabiliser and its
reuse, and the Anderson memory kept in a workspace. References: scipy's ``logsumexp`` on the
dense rows, and the plain dense iteration of ``conftest.plain_prefix_row`` (no kernel, no
acceleration, no supports)."""

import numpy as np
import pytest
from conftest import plain_prefix_row
from scipy.special import logsumexp

import otprior
import otprior.causal_ot as causal_ot
from otprior._anderson import anderson_solve


def _triangle(w, scale, seed):
    rng = np.random.default_rng(seed)
    return np.where(np.tril(np.ones((w, w), dtype=bool)), rng.normal(size=(w, w)) * scale, -np.inf)


@pytest.mark.parametrize("scale", [500.0, 5.0])  # supports that fit, and rows too flat for them
def test_sparse_supports_equal_dense_logsumexp(scale):
    w, problems = 40, 6
    A = _triangle(w, scale, 1)
    X = np.random.default_rng(2).normal(size=(problems, w)) * scale
    for p in range(problems):
        X[p, 30 + p :] = -np.inf  # prefix 30 + p - 1: its columns only
    sup = causal_ot._Supports(problems, w)
    rows = np.arange(problems)
    pp, ii = np.nonzero(np.isfinite(X[:, :w]) & (np.arange(w)[None, :] < 30))
    ref = logsumexp(A[ii] + X[pp], axis=1)
    first = sup.lse(A, ii, X, pp, rows)  # dense: supports are found
    again = sup.lse(A, ii, X, pp, rows)  # sparse where they fit
    X2 = X + np.random.default_rng(3).uniform(-5, 5, size=X.shape)  # moves within the drift bound
    ref2 = logsumexp(A[ii] + X2[pp], axis=1)
    moved = sup.lse(A, ii, X2, pp, rows)
    np.testing.assert_allclose(first, ref, rtol=1e-15, atol=0)
    np.testing.assert_allclose(again, ref, rtol=1e-15, atol=0)
    np.testing.assert_allclose(moved, ref2, rtol=1e-15, atol=0)
    e = pp * w + ii
    # at x500 every entry keeps a support; at x5 the long rows have more than _KMAX terms within
    # _MARGIN of their largest and stay dense
    assert sup.known[e].all() == (scale > 100)


def test_kernel_reuse_and_alignment_are_exact(monkeypatch):
    # the stabiliser only decides which products underflow: forming the kernel every sweep,
    # or reusing it while it moves by 20, gives the same attention to rounding
    S = np.random.default_rng(4).normal(size=(140, 140)) * 500.0
    reuse = otprior.causal_ot_attention(S, 0.6)
    monkeypatch.setattr(causal_ot, "_REFORM", 0.0)
    fresh = otprior.causal_ot_attention(S, 0.6)
    assert np.max(np.abs(reuse - fresh)) <= 1e-12
    for t in (129, 140):  # a row of each block against the dense plain iteration
        np.testing.assert_allclose(reuse[t - 1, :t], plain_prefix_row(S, 0.6, t, tol=1e-14), rtol=0, atol=1e-11)


def test_scores_spread_over_thousands_match_the_plain_iteration():
    S = np.random.default_rng(5).normal(size=(60, 60)) * 3e3
    A = otprior.causal_ot_attention(S, 0.9)
    for t in (1, 2, 31, 60):
        np.testing.assert_allclose(A[t - 1, :t], plain_prefix_row(S, 0.9, t, tol=1e-14), rtol=0, atol=1e-11)


def test_a_workspace_with_stale_values_changes_nothing(monkeypatch):
    # the mixing's memory kept in a caller's workspace (as the operator does across blocks):
    # a buffer holding non-finite leftovers of an earlier solve must give the same iterates
    monkeypatch.setattr("otprior._anderson._REUSE", 1)
    rng = np.random.default_rng(6)
    W = rng.normal(size=(30, 30))
    W /= np.abs(W).sum(axis=1).max()
    c = rng.normal(size=(4, 30))

    def G(x, rows):
        return 0.9 * np.tanh(x @ W.T) + c[rows]

    plain, info = anderson_solve(G, np.zeros((4, 30)), 1e-13, max_iter=300, memory=6)
    workspace = {"anderson": np.full(2 * 4 * 6 * 30 + 7, np.nan)}
    reused, info2 = anderson_solve(G, np.zeros((4, 30)), 1e-13, max_iter=300, memory=6, workspace=workspace)
    assert np.array_equal(plain, reused)
    assert np.array_equal(info["iterations"], info2["iterations"])
