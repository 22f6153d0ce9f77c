"""Run every computer check of proofs/checks: a proof whose algebra or inequality goes wrong fails CI.

Equalities (``checks.py``) are checked by sympy; inequalities (``inequalities.py``) by bisection with
outward-rounded interval arithmetic over Arb, on the library's own expressions where the library
evaluates the bound. Every check is mutation-tested (``mutation.py``, slow): each constant and each
exponent of each checked claim and of the library formula it guards is corrupted in turn, and the
check must fail for every corruption.
"""

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name, file):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "proofs" / "checks" / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ineq = _load("proof_inequalities", "inequalities.py")
checks = _load("proof_checks", "checks.py")
mutation = _load("proof_mutation", "mutation.py")
iv = ineq.iv

# the checks that take more than about half a second run under -m slow only
SLOW_CHECKS = {"check_margin_code_is_lemma_9", "check_lemma_2_1_positive_region", "check_falcon_bins"}


def test_there_are_checks():
    assert len(checks.ALL_CHECKS) >= 10


@pytest.mark.parametrize(
    "check",
    [pytest.param(c, marks=pytest.mark.slow) if c.__name__ in SLOW_CHECKS else c for c in checks.ALL_CHECKS],
    ids=lambda f: f.__name__,
)
def test_check(check):
    check()


def test_every_check_is_cited_by_a_proof():
    text = "".join(p.read_text() for p in (ROOT / "proofs").glob("*.md"))
    for check in checks.ALL_CHECKS:
        assert check.__name__ in text, f"{check.__name__} is not cited in proofs/"


def test_backward_recurrence_check_can_fail():
    with pytest.raises(AssertionError):
        checks.check_backward_recurrence(rhos=("0.5",), v_of_psi=lambda psi, rho: psi ** (-rho / 2))


def test_lemma_2_1_counterexample_is_outside_the_positive_region():
    # the old statement (N_0 increasing wherever Phi_1..Phi_t > 0) is false; the check says where
    low, high = checks.check_lemma_2_1_counterexample()
    assert float(low.mid()) == pytest.approx(-0.12909, abs=1e-5) and float(high.mid()) == pytest.approx(-0.19852, abs=1e-5)


# --- inequalities: proved on the stated box

DEFAULT = {claim.name: claim for claim in ineq.all_claims()}
QUICK = {
    "bounded_score_share", "bounded_score_linear", "bounded_score_monotone", "content_band",
    "growth_log_lipschitz_absolute_W1_L2_4_B0", "growth_decreasing_upper_absolute_W1_L2_4_B4",
    "growth_decreasing_upper_relative_W1_L3_6_B0", "tail_integral_W1", "tail_integral_W2", "forgetting_gates_worst_case",
    "stick_breaking_every_constant_below", "stick_breaking_every_constant_above", "softmax_scaled_band", "entmax_monotone",
    "entmax_flat_row", *(f"ssmax_threshold_{side}_s{float(ineq.Fraction(s)):g}" for side in ("above", "below") for s in ineq.SSMAX_SLOPES),
}


def test_every_inequality_check_is_listed_in_the_proofs_index():
    import re

    index = (ROOT / "proofs" / "README.md").read_text()
    families = re.findall(r"`(\w+)_\*`", index)
    for claim in ineq.all_claims(full=True):
        name = claim.name
        assert f"`{name}`" in index or any(name.startswith(f + "_") for f in families), name


@pytest.mark.parametrize(
    "name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow) for n in sorted(DEFAULT)]
)
def test_inequality_is_proved(name):
    claim = DEFAULT[name]
    record = ineq.prove(claim)
    assert record.verdict == "proved", record
    assert record.undecided_boxes == 0 and record.counterexample is None
    assert iv.tightness_failures(claim) == []


def test_window_law_bounds_on_grid():
    record = ineq.window_law_exact_bounds(t_max=5, rho_grid=[ineq.Fraction(k, 8) for k in range(1, 8)])
    assert record.verdict == "proved", record
    assert record.boxes > 50  # (rho, t, W) triples checked


def test_an_undecided_check_is_not_reported_proved():
    record = ineq.prove(ineq.growth_factors_monotone("relative", 1, 3, 6, B=0.125), budget=3)
    assert record.verdict == "undecided"
    assert record.undecided_boxes > 0


# --- mutation: every corruption of a constant or an exponent must fail its check


def _claim_ok(name, *args, budget=None, **kwargs):
    """The check of the claim built by ``ineq.<name>(*args)``, looked up at call time (so a mutant is seen);
    ``budget`` defaults to the claim's own."""

    def check():
        claim = getattr(ineq, name)(*args, **kwargs)
        record = ineq.prove(claim, budget=budget)
        return record.verdict == "proved" and not iv.tightness_failures(claim)

    return check


def _sympy_ok(name):
    def check():
        getattr(checks, name)()
        return True

    return check


def _all(*parts):
    return lambda: all(part() for part in parts)


def _window_law_ok():
    record = ineq.window_law_exact_bounds(t_max=5, rho_grid=[ineq.Fraction(k, 8) for k in range(1, 8)], independent_root=True)
    return record.verdict == "proved"


T = mutation.Target
_ot_prior = importlib.import_module("otprior.ot_prior")
_content = importlib.import_module("otprior.content_bound")
_margin = importlib.import_module("otprior.margin")
_power_sums = importlib.import_module("otprior._power_sums")
_GROWTH = [T(ineq, "margin_growth"), T(ineq, "_sum_terms"), T(_margin._Growth, "__init__"), T(_margin._Growth, "_record")]

# (claim, the inequality checked, targets whose constants and exponents are corrupted, the check)
MUTATION_GROUPS = {
    "Theorem 5 (share)": (
        [T(ineq, "bounded_score_share"), T(ineq, "_theorem5_spread"), T(_ot_prior, "ot_dilution_bound", only=("log_k", "val"))],
        _claim_ok("bounded_score_share"),
    ),
    "Theorem 5 (linear)": ([T(ineq, "bounded_score_linear"), T(ineq, "_window_share")], _claim_ok("bounded_score_linear")),
    "Theorem 5 (monotone)": ([T(ineq, "bounded_score_monotone"), T(ineq, "_window_share")], _claim_ok("bounded_score_monotone")),
    "Theorem 10": ([T(ineq, "content_band"), T(_content, "content_band_balls")], _claim_ok("content_band")),
    "Lemma 9a(i)": (
        [T(ineq, "growth_log_lipschitz"), *_GROWTH],
        _all(*[_claim_ok("growth_log_lipschitz", *c[:4], B=c[4]) for c in ineq.GROWTH_CASES],
             _sympy_ok("check_margin_code_is_lemma_9"), _sympy_ok("check_term_sums_match_the_library")),
    ),
    "Lemma 9a(ii)": (
        [T(ineq, "growth_factors_monotone"), *_GROWTH],
        _all(*[_claim_ok("growth_factors_monotone", *c[:4], B=c[4]) for c in ineq.GROWTH_CASES],
             _sympy_ok("check_margin_code_is_lemma_9"), _sympy_ok("check_term_sums_match_the_library")),
    ),
    "Lemma 9b": (
        [T(ineq, "growth_decreasing_upper"), T(_margin._Growth, "decreasing_upper"), *_GROWTH],
        _all(*[_claim_ok("growth_decreasing_upper", *c) for c in ineq.UPPER_CASES], _sympy_ok("check_margin_code_is_lemma_9"),
             _sympy_ok("check_term_sums_match_the_library")),
    ),
    "Lemma 9b (integral step)": ([T(ineq, "tail_integral")], _all(*[_claim_ok("tail_integral", W) for W in (1, 2, 8)])),
    "Theorem 8": (
        [T(ineq, "euler_maclaurin"), T(ineq, "_b2j_over_fact"), T(_power_sums, "_B2J_FRACTIONS", table=True)],
        _all(_claim_ok("euler_maclaurin", 1, 6, 1), _claim_ok("euler_maclaurin", 2, 6, 1, budget=1500),
             _claim_ok("euler_maclaurin", 20, 40, 1, alpha=(1.0, 1.0), tight_abs=2.0**-30),
             _claim_ok("euler_maclaurin", 20, 40, 2, alpha=(1.0, 1.0), tight_abs=2.0**-40),
             _claim_ok("euler_maclaurin", 1, 6, 2, budget=1500), _sympy_ok("check_euler_maclaurin_ingredients")),
    ),
    "Theorem 4(i)": (
        [T(ineq, "window_law_exact_bounds"), T(ineq, "_recurrence"), T(ineq, "_theorem4_factor"), T(ineq, "_iteration_prior_top")],
        _window_law_ok,
    ),
}
_scalable = importlib.import_module("otprior.normalisers.scalable")
_softmax = importlib.import_module("otprior.normalisers.softmax")
_alibi = importlib.import_module("otprior.encodings.alibi")
MUTATION_GROUPS["Lemma 9a(iii) (interval_bound)"] = ([T(_margin._Growth, "interval_bound")], _sympy_ok("check_interval_bound_is_lemma_9a"))
MUTATION_GROUPS["Theorem N4(iii)"] = ([T(ineq, "stick_breaking_every_constant"), T(ineq, "_sigmoid")],
                                      _all(_claim_ok("stick_breaking_every_constant", "below"),
                                           _claim_ok("stick_breaking_every_constant", "above")))
MUTATION_GROUPS["Lemma N0, Theorems N1, N2 (softmax family)"] = (
    [T(ineq, "softmax_scaled_band"), T(ineq, "_softmax_on"), T(_softmax.Temperature, "attention")],  # content_band_balls: Theorem 10
    _claim_ok("softmax_scaled_band"),
)
MUTATION_GROUPS["Lemma N0 (entmax)"] = (
    [T(ineq, "entmax_monotone"), T(ineq, "_entmax_closed_forms")],
    _all(_claim_ok("entmax_monotone"), _sympy_ok("check_normaliser_shift_and_jacobian"),
         _sympy_ok("check_entmax_closed_forms_match_the_library")),
)
MUTATION_GROUPS["Theorem N3"] = (
    [T(ineq, "ssmax_threshold"), T(ineq, "_library_threshold"), T(ineq, "_vmax"), T(_scalable, "_scaled_classify", only=("threshold",))],
    _all(*[_claim_ok("ssmax_threshold", side, sl) for side in ("above", "below") for sl in ineq.SSMAX_SLOPES]),
)
MUTATION_GROUPS["Theorem N6"] = (
    [T(ineq, "entmax_flat_row"), T(ineq, "_entmax_closed_forms")],
    _all(_claim_ok("entmax_flat_row"), _sympy_ok("check_entmax_closed_forms_match_the_library")),
)
MUTATION_GROUPS["Theorem N5"] = ([T(ineq, "forgetting_gates_worst_case"), T(ineq, "_prod")], _claim_ok("forgetting_gates_worst_case"))
MUTATION_GROUPS.update(
    {f"checks.{c.__name__}": ([T(checks, c.__name__)], _sympy_ok(c.__name__)) for c in checks.ALL_CHECKS}
)
# the library tables and code that a check compares, corrupted with the check itself
_LIBRARY_OF_CHECK = {
    "check_euler_maclaurin_ingredients": [T(_power_sums, "_B2J_OVER_FACT", table=True), T(_power_sums, "_B2J_FRACTIONS", table=True)],
    "check_falcon_bins": [T(_alibi, "bf16_round"), T(_alibi.ALiBi, "tied_keys")],
}
for _name, _targets in _LIBRARY_OF_CHECK.items():
    MUTATION_GROUPS[f"checks.{_name}"] = ([T(checks, _name), *_targets], _sympy_ok(_name))


def mutation_table(groups=None):
    """``{claim: (mutants, killed, survivors, equivalents)}`` for the named groups (all by default)."""
    return {name: mutation.run(*MUTATION_GROUPS[name]) for name in groups or MUTATION_GROUPS}


def test_k_replaced_by_e_to_the_b_is_caught(monkeypatch):
    # the first corruption: the library's factor K = e^(2B(1+rho)/(1-rho)) replaced by e^B
    import inspect
    import textwrap
    import types

    fn = _ot_prior.ot_dilution_bound
    source = textwrap.dedent(inspect.getsource(fn)).replace("log_k = 2 * b * (1 + r) / (1 - r)", "log_k = b")
    assert "log_k = b\n" in source
    corrupted = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__)
    corrupted.__mutated_source__ = source
    monkeypatch.setattr(_ot_prior, "ot_dilution_bound", corrupted)
    assert not _claim_ok("bounded_score_share", budget=200)()


def test_bernoulli_number_changed_is_caught(monkeypatch):
    # the second: B_4 = -1/30 changed to -1/31 in the table the ball route and the interval check share
    table = list(_power_sums._B2J_FRACTIONS)
    table[1] = (-1, 31 * 24)  # B_4/4! with B_4 = -1/31
    monkeypatch.setattr(_power_sums, "_B2J_FRACTIONS", table)
    with pytest.raises(AssertionError):
        checks.check_euler_maclaurin_ingredients()


def test_lower_bound_exponent_halved_is_caught(monkeypatch):
    # the third: Theorem 4(i)'s lower-bound exponent rho changed to rho/2 (a true but wrong window bound at
    # small t; the proof's entry bound at d = 1 is then false, which the check sees)
    def halved(x, rho):
        inner = iv.iv_max0(1 - x)
        return inner ** (rho / 2) if inner.lo > 0 else iv._exact(0)

    assert ineq.window_law_exact_bounds(t_max=4, rho_grid=[ineq.Fraction(1, 2)]).verdict == "proved"
    monkeypatch.setattr(ineq, "_theorem4_factor", halved)
    assert ineq.window_law_exact_bounds(t_max=4, rho_grid=[ineq.Fraction(1, 2)]).verdict == "refuted"


# Corruptions that survive: none. Each bound is checked where it is attained (or approached), each hypothesis
# where its edge is reached, so a weaker bound, a stronger bound or a stronger hypothesis fails. The test
# fails on any survivor.
DOCUMENTED_SURVIVORS = {}  # none: every corruption of a constant or an exponent fails its check


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(MUTATION_GROUPS))
def test_every_corruption_is_caught(group):
    total, dead, survivors, same = mutation_table([group])[group]
    print(f"\nmutation score | {group} | {total} | {dead} | equivalent {len(same)}")  # the table of proofs/README.md (-s)
    # a sympy identity may have no numeric constant (LSE's shift); the softmax family's formulas (the library's
    # Temperature.attention, a softmax) have none: the constants of content_band_balls, which it also runs, are
    # corrupted in the Theorem 10 group
    assert total > 0 or group.startswith("checks.") or group == "Lemma N0, Theorems N1, N2 (softmax family)"
    assert not survivors and not DOCUMENTED_SURVIVORS, survivors


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
