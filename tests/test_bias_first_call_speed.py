"""A user's ``Bias`` at a first call (``proofs/closed_form_tails.md``, Theorems 15g(vii), 15h, 15j): the kept range of
Theorem 15j cut where the head's proved bound allows (fewer terms, the masses still within 2^-38 of mpmath), and the
helpers made cheaper with the same bits as before (loaded from git: the commit before the change).

References are independent: Euler-Maclaurin in closed form in mpmath (private context), the previous code from git,
exact integer arithmetic."""

import random

import flint
import numpy as np
import pytest

import otprior.encodings._bias_tail as tail
from otprior._balls import arb_precision
from otprior.encodings import Bias
from otprior.encodings._bias_float import running_error
from otprior.encodings.bias import _compiled, _derivative_trees, _numpy_fns
from tests._git_module import module_at
from tests.test_bias_anchored import _sqrt_masses

BEFORE = "e931d649445ca814025adfdbe44cd33f8b81bd97"  # before the kept range was cut shorter and the helpers sped up
BIG = int(1e300)


def _previous(path, name):
    return module_at(BEFORE, path, name, "otprior.encodings")


def test_the_kept_range_is_cut_where_the_head_allows_and_the_masses_stay_within_the_acceptance(monkeypatch):
    """sqrt(d) at W = 1e5, n = 1e6: the distant side's kept range reached log N + 32 = 45.7 slopes below its top (91,421
    terms); the head's bound is asked below 2^-42 of the kept sum e^phi, not of its last term, so log N + 32 - phi_1
    (phi_1 = 7.6) suffices: 76,218 terms, 23,441 on the window side (27,520 before). Both masses within 2^-38 of Euler-
    Maclaurin in closed form (mpmath, 60 digits): 8.7e-14 and 0 relative, as before."""
    kept = []
    original = tail._kept_log

    def spy(tree, c, keep, *args):
        kept.append((c, keep))
        return original(tree, c, keep, *args)

    monkeypatch.setattr(tail, "_kept_log", spy)
    B = Bias("sqrt(d)")
    m, D = B._masses(10**5, 10**6)
    assert dict(kept) == {99999: 23441, 999999: 76218}, kept  # 27520 and 91421 before
    rm, rD = _sqrt_masses(10**5, 10**6, 60)
    assert abs(m - rm) <= 2.0**-38 * rm and abs(D - rD) <= 2.0**-38 * rD, (m, rm, D, rD)


@pytest.mark.parametrize("n, W", [(10**6, 10**6 - 1), (10**9, 10**9 - 10**5), (BIG, BIG - 1)], ids=["1e6", "1e9", "1e300"])
def test_sqrt_next_to_n_after_the_shorter_kept_range(n, W):
    """The shorter kept range next to n: the masses within 2^-38 (and within 1e-14) of the closed-form reference."""
    m, D = Bias("sqrt(d)")._masses(W, n)
    rm, rD = _sqrt_masses(W, n, 60 if n < 10**20 else 340)
    for v, r in ((m, rm), (D, rD)):
        assert abs(v - r) <= 1e-14 * r <= 2.0**-38 * r, (n, W, v, r)


def test_the_term_by_term_passes_give_the_same_bits_and_heavy_terms_as_before():
    """Theorem 15j(vi)'s passes (the largest term from argmax, no shift by a zero top, the heaviest terms' neighbours
    formed once): the same (phi, rel) and the same list of heavy terms as before, on growing, decaying, bumped,
    constant and non-finite rows."""
    old = _previous("otprior/encodings/_bias_tail.py", "otprior.encodings._bias_tail_before_speed")
    rows = [np.sqrt, lambda k: -k / 1000.0, lambda k: -1.1 * np.log1p(k) + 5 * np.exp(-(((k - 99998) / 5) ** 2)),
            lambda k: np.where(k == 5000.0, np.nan, np.sqrt(k)), lambda k: np.where(k == 5000.0, -np.inf, np.sqrt(k)),
            lambda k: 0.5 * np.sin(k), lambda k: 2.0]
    for f in rows:
        for K, c in ((4000, 9000), (0, 5), (72480, 99999), (983000, 999999)):
            for bc in (None, (1000.0, 1e-14)):
                h0, h1 = [], []
                assert old._direct_kept_log(f, K, c, bc, h0) == tail._direct_kept_log(f, K, c, bc, h1)
                assert h0 == h1


@pytest.mark.slow
def test_one_piece_of_theorem_15h_gives_the_same_bits_as_the_array_form():
    """Theorem 15h's single piece on Python floats (n - 1e5 at n >= 1e9): the same (log S, rel) as before, bit for bit,
    for decays, growths, linear biases (b''' = 0) and steep slopes (the closed form of E[t^2], |beta w| > 0.1)."""
    old = _previous("otprior/encodings/_bias_tail.py", "otprior.encodings._bias_tail_before_speed")
    cases = 0
    for text in ("-1.2*log(1+d)", "sqrt(d)", "-d/1e3", "-1e-3*d + 1e-20*d**3", "0.5*d**0.6"):
        d, b = Bias(text)._sym
        fns, third = _numpy_fns(b, d), _derivative_trees(b, d, 3)
        for n in (10**6, 10**12, 2**53 + 7, BIG):
            for gap in (17, 10**5):
                a, c = n - gap, n - 1
                with arb_precision(80):
                    L3, U3 = tail._interval(third[1], a, c)
                    M3 = flint.arb(abs(L3).upper()).max(flint.arb(abs(U3).upper()))
                    H = tail._largest_h(flint.arb((M3 / 6).upper()), -41, 3)
                    M3u = flint.arb(M3.upper())
                got = tail._taylor_sum_log(fns[0], fns[1], a, gap, H, M3u)
                assert got == old._taylor_sum_log(fns[0], fns[1], a, gap, H, M3u), (text, n, gap)
                cases += got is not None and (H is None or 2 * H + 1 >= gap)
    assert cases >= 10


def test_the_integer_root_is_the_floor_of_the_root():
    """FLINT's exact root for the piece width: floor(Y^(1/k)) by r^k <= Y < (r + 1)^k, on random integers up to
    6000 bits and on perfect powers and their neighbours."""
    rng = random.Random(5)
    for _ in range(400):
        k = rng.choice((2, 3))
        Y = rng.getrandbits(rng.choice((1, 7, 64, 65, 300, 3031, 6000)))
        if rng.random() < 0.3:
            Y = max(0, rng.getrandbits(rng.choice((10, 1000))) ** k + rng.choice((-1, 0, 1)))
        r = tail._iroot(Y, k)
        assert r**k <= Y < (r + 1) ** k


@pytest.mark.slow
def test_running_error_compiled_once_gives_the_same_arrays_as_the_tree_walk():
    """Theorem 15g(vii)'s running error, its tree walked once per expression: the same values and errors as the walk
    at every call, for every node kind (sums, products, constant and variable powers, exp, log, sin, cos, abs, min,
    max; decimals and pi)."""
    old = _previous("otprior/encodings/_bias_float.py", "otprior.encodings._bias_float_before_speed")
    texts = ("sqrt(d)", "-1.2*log(1+d) + 0.5*sin(d)", "-1.1*log(d+1) + exp(-exp(d/1000))", "d**(d**0.1)/1e5",
             "abs(d-5)*min(d,3)-max(d,7)", "-1.1*log(d+1) + 5*exp(-((d-99998)/5)**2)", "2*cos(pi*d/3 + 1)", "7")
    ks_sets = (np.arange(0, 300, dtype=float), np.array([1e15, 2.0**53, 1e300, 0.0]), np.array(7.0))
    for text in texts:
        d, b = Bias(text)._sym
        for ks in ks_sets:
            with np.errstate(all="ignore"):
                new, before = running_error(b, d, ks), old.running_error(b, d, ks)
            for x, y in zip(new, before, strict=True):
                assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True), (text, ks)
    assert _compiled(*reversed(Bias("sqrt(d)")._sym)) is not None
