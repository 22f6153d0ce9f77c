"""The float routes of a user's Bias after their speed-ups return the same bits as before them: Theorem 15's float
(``float_tail_log``, with Theorem 15i's proof now memoised per compiled expression and exact arguments) and Theorem
15f's sums (``mixed_log_sum``) against the modules as they were at the commit before the speed-ups (loaded from git), end to end through ``window_mass`` and
``distant_mass`` (Theorem 15 and Theorem 15f's twisted sums), cold (memo cleared) and warm (memo filled)."""

import math

import pytest

import otprior.encodings._bias_tail as tail
import otprior.encodings.bias as bias_mod
from otprior.encodings import Bias
from tests._git_module import module_at

BASE = "159daef543ab7f925d7f84ab95ed75b29c93bb81"  # the float routes before the speed-ups
BIG = int(1e300)

# (bias, W, n): Theorem 15 with a dropped tail (the first, at 1e300), a far window (W = n/10 at 1e300), Theorem 15f's
# twisted sums on both sides, a range short against its start (n - 1e5) and a length near 2^53
POINTS = [
    ("-0.7*log(1+d) - 0.01*sqrt(d)", 64, BIG),
    ("-0.7*log(1+d) - 0.01*sqrt(d)", 10**5, 10**6),
    ("-1.1*log(1+d)", BIG // 10, BIG),
    ("-1.1*log(1+d)", 64, 10**18),
    ("-1.1*log(1+d)", 10**18 - 10**5, 10**18),
    ("-1.2*log(1+d) + 0.5*sin(d)", 10**5, 10**6),
    ("-1.2*log(1+d) + 0.5*sin(d)", BIG // 10, BIG),
    ("-2*log(1+d) + 0.3*cos(2*d + 1)", 5000, 2**53 + 3),
    ("-1.1*log(d+1) + exp(-exp(d/1000))", 10**5, 10**6),  # Theorem 15k's reduced tail (memoised per exact range)
    ("sqrt(d)", 10**5, 10**6),  # the certified enclosure's midpoint (Theorem 15 in Arb, Theorem 15d's intervals)
]


@pytest.fixture(scope="module")
def base_tail():
    return module_at(BASE, "otprior/encodings/_bias_tail.py", "otprior.encodings._bias_tail_base", "otprior.encodings")


@pytest.fixture(scope="module")
def base_float():
    return module_at(BASE, "otprior/encodings/_bias_float.py", "otprior.encodings._bias_float_base", "otprior.encodings")


def _bits(x):
    return None if x is None else float(x).hex()


def _masses(B, W, n):
    return _bits(B.window_mass(W, n)), _bits(B.distant_mass(W, n))


@pytest.mark.slow  # 2 s; the bench re-run checks the same values at 260 points
def test_same_bits_as_before(base_tail, base_float, monkeypatch):
    before = {}
    with monkeypatch.context() as m:  # the old Theorem 15 float and Theorem 15f sums wherever the routes reach them
        m.setattr(tail, "float_tail_log", base_tail.float_tail_log)
        m.setattr(bias_mod, "float_tail_log", base_tail.float_tail_log)
        m.setattr(bias_mod, "mixed_log_sum", base_float.mixed_log_sum)
        for text, W, n in POINTS:
            before[text, W, n] = _masses(Bias(text), W, n)
    for text, W, n in POINTS:
        tail._PROOFS.clear()
        cold = _masses(Bias(text), W, n)
        warm = _masses(Bias(text), W, n)
        assert cold == before[text, W, n] == warm, (text, W, n, before[text, W, n], cold, warm)
        assert all(v is not None and math.isfinite(float.fromhex(v)) for v in cold)


def test_float_tail_log_same_bits(base_tail):
    """The function itself on ranges where its proof holds and where it declines (a growing bias: ``None``)."""
    for text, a, c, ref in [
        ("-0.7*log(1+d) - 0.01*sqrt(d)", 64, BIG - 1, -math.inf),
        ("-1.1*log(1+d)", 4096, 10**12, 3.0),
        ("-1.1*log(1+d)", BIG // 2, BIG - 1, -math.inf),
        ("sqrt(d)", 4096, 10**6, -math.inf),
    ]:
        d, b = Bias(text)._sym
        fns, tree, d3 = bias_mod._numpy_fns(b, d), bias_mod._compiled(b, d), bias_mod._derivative_trees(b, d, 3)
        old = base_tail.float_tail_log(fns, a, c, ref, d3, tree)
        tail._PROOFS.clear()
        new = [tail.float_tail_log(fns, a, c, ref, d3, tree) for _ in range(2)]
        assert [_bits(old)] * 2 == [_bits(v) for v in new], (text, a, c)


def test_interval_bounds_same_points(base_tail):
    """Theorem 15d's interval bounds (products of intervals included) are the same exact points as before."""
    import flint

    from otprior._balls import arb_precision

    for text in ["-0.7*log(1+d) - 0.01*sqrt(d)", "sqrt(d)", "-1.2*log(1+d)*(2 + sin(d)) - d/(d + 3)"]:
        d, b = Bias(text)._sym
        tree = bias_mod._compiled(b, d)
        for a, c in [(0, 3), (64, 10**6), (10**5, 10**18), (BIG // 2, BIG)]:
            with arb_precision(96 + c.bit_length()):
                old, new = base_tail._interval(tree, a, c), tail._interval(tree, a, c)
            for x, y in zip(old, new, strict=True):
                assert (x is None and y is None) or (isinstance(y, flint.arb) and x == y), (text, a, c, old, new)
