"""Untrusted bias expressions: parsed by the whitelist grammar, classified under a budget."""

import os
import time

import pytest
import sympy as sp

from otprior import DomainError, classify
from otprior.encodings import Bias
from otprior.expression import BudgetExceeded, parse_bias, run_budgeted

d = sp.Symbol("d")


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch pwned')+d",
        "d.__class__",
        "().__class__.__bases__[0]",
        "open('/etc/passwd')",
        "lambda: 1",
        "[d for d in ()]",
        "d if d else 1",
        "exec('1')",
        "d; import os",
        "x + d",
        "log(d, base=2)",
        "sympify('d')",
        "'d'",
        "1j*d",
        "True + d",
        "d**1000",
        "2**10**10",
        "9**9**9**9",
        "exp(exp(exp(9)))",
        "(" * 300 + "d" + ")" * 300,
        "d+" * 600 + "d",
        "",
        "1/0",
        "(-8)**(1/3)*d",
        "sqrt(-1)*d",
        "log(-2) + d",
    ],
)
def test_refused_with_a_domain_error(text, tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        start = time.monotonic()
        with pytest.raises(DomainError) as info:
            parse_bias(text)
        assert info.value.parameter == "expr" and time.monotonic() - start < 1.0
        with pytest.raises(DomainError):
            Bias(text)
        assert not (tmp_path / "pwned").exists()
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-1.5*log(1+d)", -sp.Float("1.5") * sp.log(1 + d)),
        ("-d^2/3", -(d**2) / 3),
        ("-sqrt(d) + sin(d) - cos(2*d)", -sp.sqrt(d) + sp.sin(d) - sp.cos(2 * d)),
        ("-abs(d - 3) + min(d, 2) - max(1, d, 2)", -sp.Abs(d - 3) + sp.Min(d, 2) - sp.Max(1, d, 2)),
        ("-exp(-d) * pi - E", -sp.exp(-d) * sp.pi - sp.E),
        ("-d**d**d", -(d ** (d**d))),
    ],
)
def test_grammar_builds_the_same_tree(text, expected):
    # the distance symbol is positive (a distance): the reference is written in d and moved to it
    assert sp.simplify(parse_bias(text) - expected.subs(d, sp.Symbol("d", positive=True))) == 0


@pytest.mark.parametrize("text", ["-d**d**d", "-2*log(d+1)+sin(exp(d))", "-1.5*log(1+d) + sin(d)"])
def test_hard_expressions_end_within_the_budget(text):
    start = time.monotonic()
    v = classify(Bias(text, time_budget=1.0))
    elapsed = time.monotonic() - start
    assert elapsed < 4.0
    assert v.kind in ("undecided", "bounded", "diluting")
    if v.kind == "undecided":
        assert "budget" in v.reason or "decide" in v.reason


def test_budget_reports_time_and_memory():
    with pytest.raises(BudgetExceeded, match="time budget"):
        run_budgeted(time.sleep, 5, time_budget=0.3)
    with pytest.raises(BudgetExceeded, match="memory"):
        run_budgeted(bytearray, 1 << 33, time_budget=5.0, memory_budget=1 << 28)
    assert run_budgeted(sum, [1, 2, 3], time_budget=5.0) == 6


def test_text_and_sympy_give_the_same_verdict():
    assert classify(Bias("-2*log(d+1)")).kind == classify(Bias(-2 * sp.log(d + 1))).kind == "bounded"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ALPHABET = "d0123456789.+-*/^()_, 'abcdefghijklmnopqrstuvwxyzEO[]{}:;=<>!@#$%&|~`\\\""


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=ALPHABET, max_size=60), st.text(max_size=30)))
def test_any_text_is_parsed_or_refused_quickly(text):
    start = time.monotonic()
    try:
        expr = parse_bias(text)
    except DomainError as exc:
        assert exc.parameter in ("expr", "symbol")
    else:
        assert {str(s) for s in expr.free_symbols} <= {"d"}
    assert time.monotonic() - start < 1.0


def test_numeric_bias_values_are_checked():
    enc = Bias("-d**d**d")
    assert 0 < enc.window_mass(2, 50) <= 1  # the weights underflow to 0, never NaN
    with pytest.raises(DomainError):
        Bias("exp(d)").window_mass(2, 5000)  # +inf bias: refused, not a NaN mass
