"""A user's bias that is the log-distance prior, ``beta log(g d + a)`` with ``beta < 0`` (``otprior/encodings/bias.py``,
``_log_distance_form``): its float masses beyond ``2^16`` come from the log-distance prior's O(1) route, checked against
Hurwitz zeta (digamma at exponent one) in a private mpmath context, with the exponent and offset as written."""

import mpmath
import pytest

from otprior.encodings import Bias
from otprior.encodings.bias import _log_distance_form

BIG = int(1e300)


def _form(text):
    import sympy as sp

    d = sp.Symbol("d", positive=True)
    return _log_distance_form(sp.sympify(text, locals={"d": d}), d)  # a trusted test literal (the parser is tested elsewhere)


def test_the_form_is_recognised_only_where_it_holds():
    assert _form("-11*log(1+d)/10") == (1.1, 1.0)
    assert _form("3 - 7*log(2*d + 1)/10") == (0.7, 0.5)  # 3 - 0.7 log 2 cancels in every mass
    assert _form("-log(d + pi)") == (1.0, float(mpmath.pi))
    for text in ["11*log(1+d)/10", "-11*log(1+d)/10 - sqrt(d)/100", "-log(1+d)**2", "-log(1+d**2)", "-log(log(d+3))",
                 "-log(1+d) + sin(d)/2", "-d", "-log(d - 1)", "-log(1e400*d + 1)"]:
        assert _form(text) is None, text


@pytest.mark.parametrize("text, alpha, offset", [
    pytest.param("-1.1*log(1+d)", (11, 10), (1, 1), marks=pytest.mark.slow), ("-log(1+d)", (1, 1), (1, 1)),
    pytest.param("-0.7*log(2*d+1)", (7, 10), (1, 2), marks=pytest.mark.slow),
    pytest.param("-2.5*log(d+1e-3)", (5, 2), (1, 1000), marks=pytest.mark.slow)])
def test_masses_against_hurwitz_zeta(text, alpha, offset):
    """Within ``2^-38`` (the float routes' acceptance) of the masses of the exponent and offset as written, at lengths
    from ``2^17`` to ``1e300`` and windows from 1 to ``n - 1``: the log-distance route's own bound is
    ``8 eps (1 + |ln v|)`` for its doubles, plus the exponent's rounding to a double (``ln n`` of it)."""
    ctx = mpmath.MPContext()
    ctx.dps = 360  # the differences of zeta at q ~ 1e300 lose 300 digits
    a = ctx.mpf(alpha[0]) / alpha[1]
    o = ctx.mpf(offset[0]) / offset[1]
    B = Bias(text)
    for W, n in [(1, 1 << 17), (64, 10**6), (10**5, 10**6), (64, 10**18), (10**17, 10**18), (64, BIG), (10**299, BIG),
                 (BIG - 10**5, BIG), (BIG - 1, BIG)]:
        if a == 1:
            S, T = ctx.digamma(o + W) - ctx.digamma(o), ctx.digamma(o + n) - ctx.digamma(o + W)
        else:
            S, T = ctx.zeta(a, o) - ctx.zeta(a, o + W), ctx.zeta(a, o + W) - ctx.zeta(a, o + n)
        m_ref, D_ref = S / (S + T), T / (S + T)
        m, D = B.window_mass(W, n), B.distant_mass(W, n)
        # below 2^-1022 a double carries absolute error 2^-1074 (6e-457 is 0.0)
        assert abs(m - m_ref) <= 2.0**-38 * m_ref + 2.0**-1074, (W, n, m, m_ref)
        assert abs(D - D_ref) <= 2.0**-38 * D_ref + 2.0**-1074, (W, n, D, D_ref)
