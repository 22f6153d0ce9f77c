"""Untrusted bias expressions: parsed by the whitelist grammar, classified under a budget."""

import ast
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    v = classify(Bias(text, time_budget=0.5))
    elapsed = time.monotonic() - start
    # two budgeted steps (the verdict, then the limit), each ended by its CPU budget or at the
    # latest by the wall-clock backstop 4 x 0.5 + 1 s
    assert elapsed < 2 * 3.0 + 2.0
    assert v.kind in ("undecided", "bounded", "diluting")
    if v.kind == "undecided":
        assert "budget" in v.reason or "decide" in v.reason


def _spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "done"


def _nap_then_answer(seconds):
    time.sleep(seconds)
    return "done"


def test_budget_reports_time_and_memory():
    # the budget counts CPU time: a child computing past it is stopped ...
    with pytest.raises(BudgetExceeded, match="time budget of 0.3 s"):
        run_budgeted(_spin, 5.0, time_budget=0.3)
    # ... a child that waits longer than the budget without computing still answers (a busy
    # machine gives the same verdict as an idle one) ...
    assert run_budgeted(_nap_then_answer, 0.5, time_budget=0.2) == "done"
    # ... and one that waits past the wall-clock backstop (4 x budget + 1 s) is stopped
    with pytest.raises(BudgetExceeded, match="wall-clock backstop"):
        run_budgeted(time.sleep, 30, time_budget=0.05)
    with pytest.raises(BudgetExceeded, match="memory"):
        run_budgeted(bytearray, 1 << 33, time_budget=5.0, memory_budget=1 << 28)
    assert run_budgeted(sum, [1, 2, 3], time_budget=5.0) == 6


def test_text_and_sympy_give_the_same_verdict():
    assert classify(Bias("-2*log(d+1)")).kind == classify(Bias(-2 * sp.log(d + 1))).kind == "bounded"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ALPHABET = "d0123456789.+-*/^()_, 'abcdefghijklmnopqrstuvwxyzEO[]{}:;=<>!@#$%&|~`\\\""


@settings(max_examples=100, deadline=None)
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
    # weights beyond double's range (e^(e^d), d up to 4999): the far end outweighs the window by far
    # more than e^746, so the window's share is 0 in double (Theorem 15d), never a NaN
    assert Bias("exp(d)").window_mass(2, 5000) == 0.0
    assert Bias("exp(d)").distant_mass(2, 5000) == 1.0
    w = [math.exp(-math.exp(k)) for k in range(10)]  # the mirror: e^(-e^d) is below 1e-4000 beyond d = 9
    assert Bias("-exp(d)").distant_mass(2, 5000) == pytest.approx(math.fsum(w[2:]) / math.fsum(w), rel=1e-13)
    with pytest.raises(DomainError, match="finite"):  # +-inf in double and no side dominates: refused
        Bias("exp(d)*sin(d)").window_mass(2, 5000)


# --- the text is checked without sympy; sympy runs in the budgeted child ---------------------------

NINES = "9" * 299


@pytest.mark.parametrize(
    "text, why",
    [
        (f"((1+1/{NINES})**100)**100", "exact numbers within"),  # a 3-million-digit fraction, were it built
        (f"(1+1/{NINES})**100*d", "exact numbers within"),  # 4300-digit str() limit, were it built
        (f"(d/{NINES})**100", "exact numbers within"),  # sympy expands (d/N)**k = d**k/N**k
        ("exp(101*log(d+3))", "exp of a logarithm is a power"),  # exp(c log x) is x**c
        ("exp(1e300*log(d+3))", "numeric exponents"),
        ("d**(10**10)", "numeric exponents within"),
        ("d**(1/(1-1))", "numeric exponents real"),
        ("(1e200)**2+d", "constants within"),
        ("9" * 302 + "+d", "constants within"),
        ("-log(d+1)\x1b]0;owned\x07", "alphabet"),
        ("-log(d+1)\u202e", "alphabet"),
        ("d" + "+1" * 450, "nodes"),
        ("-" * 60 + "d", "nesting"),
    ],
)
def test_the_text_is_refused_before_sympy_sees_it(text, why, monkeypatch):
    """Stage 1 refuses without starting the budgeted child (it would fail the test) and names ``expr``."""
    import otprior.expression as ex

    def no_child(*args, **kwargs):
        raise AssertionError("the budgeted child was started")

    monkeypatch.setattr(ex, "run_budgeted", no_child)
    start = time.process_time()
    with pytest.raises(DomainError) as info:
        parse_bias(text)
    assert info.value.parameter == "expr" and why in str(info.value), str(info.value)
    assert time.process_time() - start < 0.2


def test_exact_size_bound_is_an_upper_bound():
    """The bound B of stage 1 is at least the bits of the numerators and denominators sympy builds (in this process;
    a fuzz of 2,500 hostile texts found none above it)."""
    import otprior.expression as ex

    dp = sp.Symbol("d", positive=True)
    for text in ["(1+1/7)**100", "(d/12345)**100", "(1+1/999999)**34*(d+1)", "(1+1/10**15)**91*pi", "(3*d+1/7)**50 - 2**90*(2**90)", "max(1/3, d/5)**20", "sqrt(12345678901234567)**7",
                 "(1/3+1/5+1/7+1/11)**60", "exp(2*log(123456789))+d"]:
        facts = ex._static(ast.parse(text, mode="eval").body, text, "d", 0)
        built = ex._build(ast.parse(text, mode="eval").body, text, dp, "d", 0)
        bits = max([max(int(a.p).bit_length(), int(a.q).bit_length()) for a in sp.preorder_traversal(built) if a.is_Rational] + [0])
        assert bits <= facts.bits, (text, bits, facts.bits)


REBUILT = [
    "-1.5*log(1+d)", "-d^2/3", "-sqrt(d) + sin(d) - cos(2*d)", "-abs(d - 3) + min(d, 2) - max(1, d, 2)",
    "-exp(-d) * pi - E", "-d**d**d", "max(" + ",".join(f"sin({k}*d)" for k in range(1, 8)) + ")",
    "-(1/3)*log(d+1/7)**2 + 0.1*(d+1)**(-1.5)", "-2*log(d+1) + log(log(d+3)) - 1e-300*d", "(d+1)**(-2) * exp(-d/1000)",
]


@pytest.mark.parametrize("text", REBUILT)
def test_the_tree_crosses_the_process_boundary_unchanged(text):
    """What the child sends back rebuilds, without evaluation, into the tree sympy builds in one process."""
    import otprior.expression as ex

    dp = sp.Symbol("d", positive=True)
    direct = ex._build(ast.parse(text.replace("^", "**"), mode="eval").body, text, dp, "d", 0)
    status, data = ex._parse_child(text, "d")
    assert status == "ok"
    rebuilt = ex._rebuild(data, dp)
    assert rebuilt == direct and sp.srepr(rebuilt) == sp.srepr(direct)
    assert parse_bias(text) == direct  # and through the child process


def test_a_parse_that_outlasts_its_budget_is_a_refusal_naming_expr():
    text = "max(" + ",".join(f"sin(d*{k})" for k in range(1, 50)) + ")"  # seconds of sympy's Max simplification
    start = time.monotonic()
    with pytest.raises(DomainError) as info:
        parse_bias(text, time_budget=0.05)
    assert info.value.parameter == "expr" and "budget" in str(info.value)
    assert time.monotonic() - start < 3.0


@pytest.mark.slow
def test_a_long_max_spends_its_time_in_the_child():
    """The 49-term max: seconds of sympy work, all of it in the budgeted child (this process's CPU time stays small)."""
    text = "max(" + ",".join(f"sin(d*{k})" for k in range(1, 50)) + ")"
    start = time.process_time()
    enc = Bias(text, time_budget=1.0)
    assert repr(enc).startswith("Bias('Max(")
    assert time.process_time() - start < 0.5


def test_checked_values_of_a_sympy_expression_run_in_the_child(monkeypatch):
    """A sympy expression given directly is checked in the budgeted child; one that was parsed is not checked again."""
    import otprior.expression as ex

    calls = []
    real = ex.run_budgeted

    def counting(fn, *args, **kwargs):
        calls.append(fn.__name__)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(ex, "run_budgeted", counting)
    expr = parse_bias("-2*log(d+1)")
    ex.check_bias_values(expr, sp.Symbol("d", positive=True))
    assert calls == ["_parse_child"]
    with pytest.raises(DomainError, match="not finite at d = 7"):
        ex.check_bias_values(-sp.log(d + 1) + 1 / (d - 7), d)
    assert calls == ["_parse_child", "_check_child"]


CHILD_DIES = """
import os, sys, time
from otprior.expression import run_budgeted

def work(path):
    with open(path + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(60)

run_budgeted(work, sys.argv[1], time_budget=60)
"""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_budgeted_child_ends_with_its_parent(tmp_path):
    """SIGTERM to the parent (no handler: it dies at once) must not leave the computation running."""
    marker = tmp_path / "child.pid"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    parent = subprocess.Popen([sys.executable, "-c", CHILD_DIES, str(marker)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(marker.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the budgeted child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
