"""A decimal constant means the decimal as written, every digit up to 60 (``otprior/expression.py``): the certified
routes and the exact phase reductions enclose that decimal; the other float routes read its nearest double."""

from fractions import Fraction

import mpmath
import pytest

from otprior.encodings import Bias
from otprior.encodings._bias_tail import compile_bias
from otprior.expression import bias_text, parse_bias


def _constant(text):
    """The exact fraction the certified routes read for the first constant of ``c*...``."""
    B = Bias(text)
    d, b = B._sym
    node = compile_bias(b, d)
    while node[0] != "q":
        node = node[1][0]
    return Fraction(node[1], node[2])


@pytest.mark.parametrize("literal", ["1.10000000000000000001", "0.1000000000000000055511151231257827",
                                     "6.28318530717958647692", "2.5000000000000000000000000000000000000000000000000000001"])
def test_a_long_decimal_reaches_the_certified_routes_digit_for_digit(literal):
    """Before, the parser read a literal through its double and kept the double's shortest repr: 1.10000000000000000001
    became 11/10 for the certified routes. Now every digit (up to 60) is kept."""
    assert abs(_constant(f"-{literal}*log(1+d)")) == Fraction(literal)


def test_every_constant_sympy_forms_from_decimals_is_exact():
    """A decimal literal is the rational it writes, so sympy forms every constant exactly: ``(d - 99998.7)/0.7`` was
    ``1.42857142857143*d - 142855.285714286`` (binary floats rounded at parse time, then read as those 15-digit decimals
    by the certified routes, a bias up to 3e-10 away at d = 1e6). :func:`bias_text` writes the tree back as text that
    parses to the same tree, decimals where the rational is one."""
    import sympy as sp

    d = sp.Symbol("d", positive=True)
    assert parse_bias("(d-99998.7)/0.7") == (d - sp.Rational("99998.7")) / sp.Rational("0.7")
    assert parse_bias("0.7*(d + 0.3)") == sp.Rational(7, 10) * d + sp.Rational(21, 100)
    assert parse_bias("exp(0.2)*d") == sp.exp(sp.Rational(1, 5)) * d  # not a 15-digit float
    for text, shown in [("-0.7*log(1+d)", "-0.7*log(d + 1)"), ("(d-99998.7)/0.7", "10*d/7 - 999987/7"),
                        ("1e-300*d - log(1+d)", "1.0e-300*d - log(d + 1)"), ("d**0.5", "sqrt(d)"),
                        ("-1.10000000000000000001*log(1+d)", "-1.10000000000000000001*log(d + 1)")]:
        e = parse_bias(text)
        assert bias_text(e) == shown
        assert parse_bias(shown) == e
        assert repr(Bias(e)) == f"Bias({shown!r})"  # the sympy expression itself: no third parse


@pytest.mark.parametrize("W, n", [(64, 10**18), (10**6, 10**12), (64, int(1e300))])
def test_a_folded_constant_is_enclosed_for_the_expression_as_written(W, n):
    """``-1.1*log(1+d)/0.7`` is ``(d + 1)^(-11/7)`` in weights: the distant mass from Hurwitz zeta (mpmath, private
    context) at alpha = 11/7 exactly. Before, the certified routes enclosed alpha = 1.57142857142857 (the folded float's
    printed digits), 6e7 widths away from the reference."""
    ctx = mpmath.MPContext()
    ctx.dps = 50
    a = ctx.mpf(11) / 7
    S, T = ctx.zeta(a, 1) - ctx.zeta(a, W + 1), ctx.zeta(a, W + 1) - ctx.zeta(a, n + 1)
    ref = T / (S + T)
    B = Bias("-1.1*log(1+d)/0.7")
    enc = B.mass_enclosures(W, n).distant_mass
    assert enc.lo <= ref <= enc.hi
    assert abs(B.distant_mass(W, n) - ref) <= 1e-14 * ref


def _resonant_mass(omega, W, n):
    """m for sin(omega d) with omega = 2 pi + delta, |delta| n < 1e-10: e^{sin(delta k)} = 1 + delta k + (delta k)^2/2
    within (delta k)^3 (mpmath, private context, 60 digits), summed in closed form."""
    ctx = mpmath.MPContext()
    ctx.dps = 60
    delta = ctx.mpf(omega) - 2 * ctx.pi

    def part(c):  # sum_{k < c}
        return c + delta * c * (c - 1) / 2 + delta**2 * (c - 1) * c * (2 * c - 1) / 12

    S = part(W)
    return S / part(n)


def test_a_resonance_is_enclosed_for_the_decimal_as_written():
    """sin(6.28318530717958647692 d) at W = 1000, n = 66000: the decimal and its double (6.283185307179586) give masses
    1.55e-11 apart. The enclosure contains the decimal's and not the double's, and the float (Theorem 15e's exact phase
    reduction) is within 2^-38 of the decimal's (before: of the double's)."""
    W, n = 1000, 66000
    text = "sin(6.28318530717958647692*d)"
    ref = float(_resonant_mass("6.28318530717958647692", W, n))
    other = float(_resonant_mass("6.283185307179586", W, n))
    assert abs(ref - other) > 1e-11 * ref
    B = Bias(text)
    e = B.mass_enclosures(W, n).window_mass
    assert e.lo <= ref <= e.hi and not e.lo <= other <= e.hi
    assert abs(B.window_mass(W, n) - ref) <= 2.0**-38 * ref


def test_the_float_reads_a_long_decimal_as_its_double_within_its_bound():
    """-1.10000000000000000001 log(1 + d) at n = 1e6: the float routes read the constant as its nearest double (1e-20
    away); the mass is within 2^-38 of the decimal's Hurwitz zeta reference, and the enclosure contains it."""
    ctx = mpmath.MPContext()
    ctx.dps = 40
    s = ctx.mpf("1.10000000000000000001")
    W, n = 64, 10**6
    z, zw, zn = ctx.zeta(s), ctx.zeta(s, W + 1), ctx.zeta(s, n + 1)
    rm = float((z - zw) / (z - zn))
    B = Bias("-1.10000000000000000001*log(1+d)")
    assert abs(B.window_mass(W, n) - rm) <= 2.0**-38 * rm
    e = B.mass_enclosures(W, n).window_mass
    assert e.lo <= rm <= e.hi


def test_the_running_error_counts_a_decimal_s_rounding_to_double():
    """Theorem 15g(vii): the direct sums' error estimate reads a decimal constant as written (what the certified routes
    enclose), so 1.1's rounding to double (|11/10 - fl(1.1)| = 8.9e-17) is counted; before, a 53-bit Float was taken as
    exact (0)."""
    import numpy as np
    import sympy as sp

    from otprior.encodings._bias_float import running_error

    d = sp.Symbol("d", positive=True)
    for text, exact in [("1.1", Fraction(11, 10)), ("1.10000000000000000001", Fraction("1.10000000000000000001"))]:
        node = parse_bias(f"{text}*d").as_coeff_Mul()[0]
        v, e = running_error(node, d, np.array([1.0]))
        assert float(e[0]) == abs(float(exact - Fraction(float(v[0])))) > 0


def test_fractional_powers_of_exact_constants_are_bounded_before_sympy():
    """Decimals are exact rationals, so sympy combines a fractional power with the powers inside it
    (``((0.3**99)**0.99)**0.99`` held a 14,680-digit integer, beyond the 8192-bit bound, and an unnamed ``ValueError``
    followed; three more ran out the 10 s parse budget): stage 1 bounds them by the exponent's numerator and refuses by
    name, before sympy; ordinary fractional powers still parse."""
    from otprior import DomainError

    for text in ["((0.3**99)**0.99)**0.99*d", "((0.123**99)**0.999)**0.999*d", "((((0.3**99)**0.99)**0.99)**0.99)**0.99*d"]:
        with pytest.raises(DomainError, match="exact numbers within"):
            parse_bias(text)
    for text in ["0.5**0.5*d", "2.5**1.5*d - log(1+d)", "2**(1/3)*d"]:
        e = parse_bias(text)
        assert parse_bias(bias_text(e)) == e


def test_bias_text_keeps_long_decimals_as_fractions():
    """1.1**99 is a decimal of 104 digits: written as a decimal it re-parsed as its double (the parser keeps 60)."""
    e = parse_bias("1.1**99*d")
    assert parse_bias(bias_text(e)) == e


def test_bias_text_refuses_what_is_not_an_expression():
    from otprior import DomainError

    for bad in ["-0.7*log(1+d)", 1.5, None]:
        with pytest.raises(DomainError, match="expr"):
            bias_text(bad)
