"""Window-mass regressions: windows next to ``n``, the floor at ``W = 4096`` near ``rho = 1``,
monotone lower ends beyond the count's reach, list-independent enclosures, small masses on the
exact route (Lemma 4.3 and Corollaries 4.4-4.5, proofs/ot_asymptotics.md)."""

import math

import numpy as np
import pytest

from otprior import ot_window_mass


@pytest.mark.parametrize(("n", "rho"), [(10**9, 0.1), (10**12, 0.5)])
def test_float_mass_near_n_answers_inside_the_enclosure(n, rho):
    # the six-term series of the continued count turned negative for windows near n and
    # math.log raised "math domain error"; a list holding such a window lost every value
    ws = [4097, n // 2, n - 1000, n - 10, n - 2, n - 1]
    m = np.asarray(ot_window_mass(ws, n, rho))
    e = ot_window_mass(ws, n, rho, certified=True)
    slack = 1e-12
    assert np.all(np.isfinite(m))
    assert np.all(m >= np.asarray(e.lo) - slack) and np.all(m <= np.asarray(e.hi) + slack)


@pytest.mark.parametrize(("n", "rho"), [(10**6, 1 - 1e-9), (70000, 0.99)])
def test_certified_lower_end_increases_in_the_window(n, rho):
    # near rho = 1 Lemma 4.3's bracket is unavailable and the floor m(W) >= m(4096) was not
    # applied (lower end 0.483 at W = 4096, 0.004 at 4097); beyond the count's reach the lower
    # end fell back to the floor at 4096 instead of the largest reached window
    ws = sorted({w for w in (4096, 4097, 10566, 12765, 10**5, n // 2, n - 1) if w < n})
    lo = np.asarray(ot_window_mass(ws, n, rho, certified=True).lo)
    assert np.all(np.diff(lo) >= 0.0), dict(zip(ws, lo.tolist(), strict=True))


def test_certified_enclosure_does_not_depend_on_the_other_windows():
    n, rho = 10**6, 0.5
    ws = [4097, 5000, 10**5, n // 2]
    both = ot_window_mass(ws, n, rho, certified=True)
    for i, w in enumerate(ws):
        alone = ot_window_mass(w, n, rho, certified=True)
        assert (alone.lo, alone.hi) == (both.lo[i], both.hi[i]), w


def test_exact_route_small_mass_relative_accuracy():
    # at rho = 1e-300 the prior is uniform to within 1e-295: m(W) = W / n; 1 - Phi_{n-W}/Phi_n
    # gave 1/65536 with a relative error of -8.7e-13
    n = 65536
    m, route = ot_window_mass([1, 2, 64], n, 1e-300, return_route=True)
    assert np.all(route == "exact")
    for w, v in zip([1, 2, 64], m, strict=True):
        assert math.isclose(v, w / n, rel_tol=1e-14), (w, v)
