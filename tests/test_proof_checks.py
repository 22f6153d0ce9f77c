"""Run every computer check of proofs/checks: a proof whose algebra or inequality goes wrong fails CI.

Equalities (``checks.py``) are checked by sympy; inequalities (``inequalities.py``) by
bisection with outward-rounded interval arithmetic over Arb. For each inequality a mutated
claim (a wrong constant) must be refuted, so the check is shown able to fail.
"""

import dataclasses
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, ROOT / "proofs" / "checks" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checks = _load("proof_checks", "checks.py")
ineq = _load("proof_inequalities", "inequalities.py")


def test_there_are_checks():
    assert len(checks.ALL_CHECKS) >= 10


@pytest.mark.parametrize("check", checks.ALL_CHECKS, ids=lambda f: f.__name__)
def test_check(check):
    check()


def test_every_check_is_cited_by_a_proof():
    text = "".join(p.read_text() for p in (ROOT / "proofs").glob("*.md"))
    for check in checks.ALL_CHECKS:
        assert check.__name__ in text, f"{check.__name__} is not cited in proofs/"


def test_backward_recurrence_check_can_fail():
    with pytest.raises(AssertionError):
        checks.check_backward_recurrence(rhos=("0.5",), v_of_psi=lambda psi, rho: psi ** (-rho / 2))


# --- inequalities: proved on the stated box (default ranges take a few seconds in all)

DEFAULT = {claim.name: claim for claim in ineq.all_claims()}
FAST = {name: (lambda claim=claim: claim) for name, claim in DEFAULT.items()}


def test_every_inequality_check_is_listed_in_the_proofs_index():
    index = (ROOT / "proofs" / "README.md").read_text()
    for name in DEFAULT:
        assert f"`{name}`" in index or f"`{name.rsplit('_W', 1)[0]}_*`" in index, name


@pytest.mark.parametrize("name", sorted(FAST))
def test_inequality_is_proved(name):
    record = ineq.prove(FAST[name]())
    assert record.verdict == "proved", record
    assert record.undecided_boxes == 0 and record.counterexample is None


def test_window_law_bounds_on_grid():
    record = ineq.window_law_exact_bounds(t_max=6, rho_grid=None)
    assert record.verdict == "proved", record
    assert record.boxes > 100  # (rho, t, W) triples checked (15 rho values, 15 pairs 2 <= W <= t <= 6)


# Each mutation makes the claimed inequality false somewhere on its box: the check must refute it.


def _mutate_share(claim):
    def sides(ops, B, rho, m, a, b):
        K = ops.exp(B * (1 + rho) / (1 - rho))  # exponent halved: too small a factor
        Kt = ops.exp(2 * B * (1 + rho) / (1 - rho))
        x, y = 1 + (Kt - 1) * a, 1 + (Kt - 1) * b
        return [(x * m / (x * m + y * (1 - m)), K * m / (1 + (K - 1) * m))]

    return dataclasses.replace(claim, sides=sides)


def _mutate_linear(claim):
    def sides(ops, B, rho, m):
        K = ops.exp(2 * B * (1 + rho) / (1 - rho))
        K_half = ops.exp(B * (1 + rho) / (1 - rho))  # exponent halved
        return [(K * m / (1 + (K - 1) * m), K_half * m)]

    return dataclasses.replace(claim, sides=sides)


def _mutate_content(claim):
    original = claim.sides

    def sides(ops, B, m, a, b):
        (lower, D), (_, upper) = original(ops, B, m, a, b)
        upper = (1 - m) / ((1 - m) + ops.exp(-B) * m)  # e^-B instead of e^-2B
        return [(lower, D), (D, upper)]

    return dataclasses.replace(claim, sides=sides)


def _mutate_lipschitz(claim):
    original = claim.sides

    def sides(ops, alpha, s):
        return [(lhs, rhs / 4) for lhs, rhs in original(ops, alpha, s)]  # the bound divided by 4

    return dataclasses.replace(claim, sides=sides)


def _mutate_tail(claim):
    def sides(ops, alpha, s):
        W = 1
        return [(ops.zeta(alpha, W + 1 + s), ops.exp((1 - alpha) * ops.log(W + 1 + s)) / (alpha - 1))]  # W+1

    return dataclasses.replace(claim, sides=sides)


def _mutate_euler_maclaurin(claim):
    original = claim.sides

    def sides(ops, alpha, s):
        (lo, total), (_, hi) = original(ops, alpha, s)  # p = 1: E_1 + tau_2 <= sum <= E_1
        return [((lo + hi) / 2, total), (total, hi)]  # half the remainder term: false

    return dataclasses.replace(claim, sides=sides)


def _mutate_monotone(claim):
    def sides(ops, K, m):
        den = (1 + (K - 1) * m) ** 2
        return [(0, K / den), (0, m * (1 - 2 * m) / den)]  # a wrong derivative in K

    return dataclasses.replace(claim, sides=sides)


def _mutate_growth_monotone(claim):
    original = claim.sides

    def sides(ops, alpha, s):
        return [(rhs, lhs) for lhs, rhs in original(ops, alpha, s)]  # "increasing" instead

    return dataclasses.replace(claim, sides=sides)


MUTATIONS = {
    "growth_monotone_W2_L4_8": _mutate_growth_monotone,
    "bounded_score_share": _mutate_share,
    "bounded_score_linear": _mutate_linear,
    "bounded_score_monotone": _mutate_monotone,
    "content_band": _mutate_content,
    "lipschitz_absolute_W1_L2_4": _mutate_lipschitz,
    "lipschitz_relative_W3_L5_12": _mutate_lipschitz,
    "tail_integral_W1": _mutate_tail,
    "euler_maclaurin_a1_b6_p1": _mutate_euler_maclaurin,
}


def test_every_kind_of_inequality_has_a_mutation():
    kinds = {name.split("_W")[0].split("_a")[0] for name in DEFAULT}
    assert kinds <= {name.split("_W")[0].split("_a")[0] for name in MUTATIONS}, kinds


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_wrong_constant_is_refuted(name):
    claim = MUTATIONS[name](FAST[name]())
    record = ineq.prove(claim, budget=400)
    assert record.verdict == "refuted", record
    assert record.counterexample is not None
    assert not record.certificate_checked  # sympy rejects the old certificate for the new sides


def test_window_law_check_can_fail():
    # a grid check of a false bound (the upper bound halved) must report a failure
    original = ineq._recurrence

    record_true = ineq.window_law_exact_bounds(t_max=4, rho_grid=[ineq.Fraction(1, 2)])
    assert record_true.verdict == "proved"
    try:
        def halved(c, rho, t):
            phi, Psi, ok = original(c, rho, t)
            return phi, {k: v * 4 for k, v in Psi.items()}, ok  # at rho = 1/2: every Psi^-rho halved

        ineq._recurrence = halved
        record = ineq.window_law_exact_bounds(t_max=4, rho_grid=[ineq.Fraction(1, 2)])
    finally:
        ineq._recurrence = original
    assert record.verdict != "proved"


def test_an_undecided_check_is_not_reported_proved():
    record = ineq.prove(ineq.lipschitz("relative", 3, 5, 12, s=(-0.5, 2.0)), budget=3)
    assert record.verdict == "undecided"
    assert record.undecided_boxes > 0


@pytest.mark.slow
@pytest.mark.parametrize("claim", ineq.all_claims(full=True)[len(DEFAULT) :], ids=lambda c: c.name)
def test_inequality_full_range(claim):
    # the full ranges; the verdict is recorded, and a refutation is a failure
    record = ineq.prove(claim)
    assert record.verdict != "refuted", record


@pytest.mark.slow
def test_window_law_bounds_on_larger_grid():
    record = ineq.window_law_exact_bounds(t_max=12)
    assert record.verdict == "proved", record
