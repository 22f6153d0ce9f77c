"""Corollary 4.8(d) on the bounds route for windows next to ``n`` up to 4096 (``proofs/ot_asymptotics.md``):
``1 - m_n(W) <= (n - W)/(n - W') (1 - f_{W'}(c_hi))`` at ``W' = n - 2^j (n - W)``, read on the same run from the
bracket's upper end. The reference is the exact certified route (Theorem 2 in Arb), an independent algorithm."""

from __future__ import annotations

import pytest

import otprior


@pytest.mark.parametrize("n, k, most", [
    (2000, 1, 1000.0),  # 36614 times the true 1 - m before
    (4097, 3, 400.0),  # 3704 times before
])
def test_the_distant_mass_next_to_n_is_enclosed_within_its_share(n, k, most):
    W = n - k
    bounds = otprior.ot_window_mass(W, n, 0.9, certified=True, method="bounds")
    exact = otprior.ot_window_mass(W, n, 0.9, certified=True, method="exact")
    assert bounds.lo <= exact.lo and exact.hi <= bounds.hi  # the proved enclosure holds the exact one
    true_distant = 1 - exact.hi
    assert 0 < 1 - bounds.lo <= most * true_distant, (1 - bounds.lo, true_distant)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_windows_next_to_n_keep_the_exact_value_inside(rho):
    """Asked together or alone, every window near ``n`` keeps the exact value inside and the same enclosure."""
    n = 3000
    windows = [n - 1, n - 2, n - 7, n - 100, 2000]
    together = otprior.ot_window_mass(windows, n, rho, certified=True, method="bounds")
    for i, W in enumerate(windows):
        alone = otprior.ot_window_mass(W, n, rho, certified=True, method="bounds")
        exact = otprior.ot_window_mass(W, n, rho, certified=True, method="exact")
        assert alone.lo <= exact.lo and exact.hi <= alone.hi
        assert (together.lo[i], together.hi[i]) == (alone.lo, alone.hi)
