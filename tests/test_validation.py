"""Refusals at the boundary: numbers are refused rather than truncated, integers converted exactly,
huge parameters refused by name rather than overflowing, bias expressions real and finite."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
import warnings
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import otprior
from otprior import encodings as E
from otprior import normalisers as N
from otprior._validation import DomainError, check_int, check_real, check_rho
from otprior.cli import main
from otprior.encodings import Bias
from otprior.expression import parse_bias
from otprior.log_distance import distant_mass, window_mass
from otprior.margin import margin_for

COMPLEX = [np.complex128(1.05 + 2j), np.complex64(1 + 0j), np.array(1.05 + 2j), 1.05 + 2j]


@pytest.mark.parametrize("value", COMPLEX)
def test_complex_numbers_are_refused_not_truncated(value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning would mean a truncation happened
        with pytest.raises(DomainError) as info:
            window_mass(4, 100, value)
        assert info.value.parameter == "alpha"
        with pytest.raises(DomainError):
            window_mass(4, 100, 1.05, offset=value)
        with pytest.raises(DomainError):
            check_rho(value)
        with pytest.raises(DomainError):
            margin_for(64, (512, 8192), value)
        with pytest.raises(DomainError):
            otprior.classify(E.get("nope"), score_bound=value)
        with pytest.raises(DomainError):
            E.get("alibi", slope=value)


@pytest.mark.parametrize("value", [np.True_, np.False_, True, np.array(True)])
def test_booleans_are_refused_as_numbers(value):
    with pytest.raises(DomainError):
        E.get("log-distance", alpha=value)
    with pytest.raises(DomainError):
        check_real(value, "x")
    with pytest.raises(DomainError):
        check_int(value, "n")


@pytest.mark.parametrize("value", [np.timedelta64(10, "s"), np.timedelta64(10), np.timedelta64("NaT"),
                                   np.datetime64("2020-01-01")])
def test_numpy_durations_and_dates_are_refused_as_numbers(value):
    # numpy registers timedelta64 as an integer type: int() of one raised a TypeError, or a unitless one
    # passed as a length
    for call in (lambda: check_int(value, "n"), lambda: check_real(value, "x"), lambda: check_rho(value),
                 lambda: otprior.ot_window_mass(1, value, 0.5), lambda: otprior.ot_window_mass(value, 100, 0.5),
                 lambda: otprior.ot_window_mass_bound(1, value, 0.5), lambda: otprior.ot_window_law(1, value, 0.5),
                 lambda: otprior.ot_dilution_bound(1, value, 0.5, 0.3), lambda: otprior.ot_prior(value, 0.5)):
        with pytest.raises(DomainError):
            call()


def test_integers_convert_exactly_never_through_a_double():
    n = 2**53 + 1  # not a double: float(n) == 2**53 would make the window the whole row
    reference = distant_mass(2**53, n, 1.0)
    assert reference > 0.0
    for form in (Fraction(n), Decimal(n), np.uint64(n), np.int64(n)):
        assert check_int(form, "n") == n
        assert distant_mass(2**53, form, 1.0) == reference
    assert check_int(1e300, "n") == int(1e300)  # a float is the exact integer it represents
    for bad in (Fraction(3, 2), Decimal("2.5"), 2.5, float("inf"), float("nan"), Decimal("NaN"), "3", None):
        with pytest.raises(DomainError):
            check_int(bad, "n")


def test_lengths_beyond_the_bound_are_refused_by_name():
    for n in (Fraction(10**400), 10**400, Decimal(10) ** 400, 1e301):
        with pytest.raises(DomainError) as info:
            window_mass(1, n, 1.0)
        assert info.value.parameter == "n"
    # the double 1e300 lies just above 10**300; the documented bound includes it
    assert 0.0 < window_mass(1, 1e300, 1.0) < window_mass(1, 10**300 // 2, 1.0)


@pytest.mark.parametrize("lengths", [{512: 1, 8192: 2}, {512, 8192}, iter((512, 8192)), "ab", np.array([[512, 8192]])])
def test_margin_lengths_must_be_a_sequence_of_two(lengths):
    with pytest.raises(DomainError) as info:
        margin_for(64, lengths, 0.05)
    assert info.value.parameter == "Lrange"


def test_margin_lengths_as_an_array_match_the_tuple():
    assert margin_for(64, np.array([512, 8192]), 0.05).margin == margin_for(64, [512, 8192], 0.05).margin


@pytest.mark.parametrize(
    "name, params, parameter",
    [
        ("t5", {"max_distance": 10**300}, "max_distance"),
        ("t5", {"values": [10**400] * 32}, "values"),
        ("t5", {"values": [1 + 1j] * 32}, "values"),
        ("rope", {"head_dim": 10**400, "logit_bound": 1.0}, "head_dim"),
        ("rope", {"rope_type": "longrope", "short_factor": [10**400] * 32, "long_factor": [1.0] * 32,
                  "logit_bound": 1.0, "original_max_position_embeddings": 4096}, "short_factor"),
        ("alibi", {"heads": 10**400}, "num_heads"),
    ],
)
def test_huge_parameters_are_refused_by_name(name, params, parameter):
    with pytest.raises(DomainError) as info:
        otprior.classify(E.get(name, **params))
    assert info.value.parameter == parameter


@pytest.mark.parametrize("name, params", [("rope", {"logit_bound": 1e300}), ("yarn", {"factor": 1e300, "logit_bound": 1.0})])
def test_huge_logit_bounds_are_classified_without_overflow(name, params):
    v = otprior.classify(E.get(name, **params))
    assert v.kind == "diluting" and "e+" in v.rate  # e^(2B) written in powers of ten


def test_every_parameter_at_the_extremes_is_answered_or_refused_by_name():
    """1e300, 1e-300 and 10**400 for every parameter of every encoding: a verdict or a named refusal."""
    base = {"rope": {"logit_bound": 1.0}, "yarn": {"logit_bound": 1.0}}
    checked = 0
    for name in E.names():
        if name in ("bias", "fire"):  # an expression / a callable: their refusals are tested elsewhere
            continue
        for p in E.parameters(name):
            for value in (1e300, 1e-300, 10**400):
                kw = dict(base.get(name, {}))
                kw[p.name] = value
                try:
                    verdicts = otprior.classify(E.get(name, **kw))
                except (DomainError, otprior.PrecisionError):
                    continue
                checked += 1
                for v in verdicts if isinstance(verdicts, tuple) else (verdicts,):
                    assert v.rate is None or not (isinstance(v.rate, float) and math.isnan(v.rate))
                    assert v.threshold is None or not math.isnan(v.threshold)
    assert checked > 20
    for name in N.names():
        for p in N.parameters(name):
            for value in (1e300, 1e-300, 10**400):
                try:
                    otprior.classify(E.get("alibi", slope=0.5), N.get(name, **{p.name: value}))
                except (DomainError, otprior.PrecisionError):
                    pass


@pytest.mark.parametrize(
    "text, where",
    [
        ("sqrt(-d)", "not real"),
        ("-log(d)+1/(d-5)", "not finite at d = 0"),
        ("-log(d+1)+1/(d-5)", "not finite at d = 5"),
        ("-log(d)", "not finite at d = 0"),
        ("log(3-d)", "not finite at d = 3"),
        ("sqrt(d-2)", "not real at d = 0"),
        ("(d**2-25)/(d-5)", "not finite at d = 5"),
        ("-log(d+1) + (d-40)**(-2)", "not finite at d = 40"),
    ],
)
def test_biases_must_be_real_and_finite_at_every_distance(text, where):
    with pytest.raises(DomainError) as info:
        parse_bias(text)
    assert where in str(info.value)
    with pytest.raises(DomainError):
        Bias(text)


def test_sympy_expressions_given_directly_are_checked_too():
    import sympy as sp

    d = sp.Symbol("d")
    with pytest.raises(DomainError):
        Bias(-sp.log(d + 1) + 1 / (d - 7))
    with pytest.raises(DomainError):
        Bias(sp.sqrt(-d - 1))


def test_classify_of_a_bias_keeps_the_warnings_filters():
    # a fresh interpreter, so that sympy's first import (which installs a filter) happens inside otprior
    code = (
        "import warnings, otprior; from otprior.encodings import Bias; before = list(warnings.filters); "
        "v = otprior.classify(Bias('-2*log(d+1)')); assert v.kind == 'bounded', v.kind; "
        "assert list(warnings.filters) == before, [f for f in warnings.filters if f not in before]"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(otprior.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_cli_mass_work_is_capped_before_computing(capsys):
    start = time.monotonic()
    code = main(["mass", "alibi", "--heads", "1000000", "--window", "64", "--n", "1024"])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - start < 5.0
    assert "--heads" in err and len(err.strip().splitlines()) == 1


def test_cli_expression_may_start_with_a_minus(capsys):
    assert main(["classify", "bias", "--expr", "-2*log(d+1)"]) == 0
    separate = capsys.readouterr().out
    assert main(["classify", "bias", "--expr=-2*log(d+1)"]) == 0
    assert capsys.readouterr().out == separate and "BOUNDED" in separate


# --- huge and odd values: refused fast, naming the parameter, whatever their size --------------------

HUGE = [2**100000, -(2**100000), Decimal("1e999999"), Decimal("-1e999999"), Fraction(2**100000, 3)]


@pytest.mark.parametrize("value", HUGE, ids=["2^100000", "-2^100000", "Decimal 1e999999", "-Decimal 1e999999", "Fraction"])
def test_huge_numbers_are_refused_fast_and_named(value):
    """Python writes no integer of more than 4300 digits as text and ``int(Decimal('1e999999'))`` takes a
    minute: both are refused by their size, and the message names the parameter."""
    cases = [
        ("n", lambda v: otprior.ot_prior(v, 0.5)),
        ("n", lambda v: window_mass(4, v, 1.5)),
        ("window", lambda v: window_mass(v, 100, 1.5)),
        ("alpha", lambda v: window_mass(4, 100, v)),
        ("heads", lambda v: E.ALiBi(heads=v)),
        ("delta", lambda v: otprior.scale_invariant_cdf(v, 0.5)),
        ("rho", lambda v: otprior.scale_invariant_cdf(0.5, v)),
        ("max_distance", lambda v: E.get("t5", max_distance=v)),
    ]
    for name, call in cases:
        start = time.process_time()
        with pytest.raises(DomainError) as info:
            call(value)
        assert info.value.parameter == name, (name, str(info.value)[:200])
        assert str(info.value).startswith(f"{name}=") and len(str(info.value)) < 2000
        assert time.process_time() - start < 0.5, name


def test_a_huge_integer_is_described_by_its_size():
    from otprior._validation import describe_value

    assert describe_value(2**100000) == "an integer of 100001 bits (about 10^30103)"
    assert describe_value(-(2**100000)).startswith("-an integer of 100001 bits")
    assert describe_value([2**100000]) == "<a list that cannot be shown>"
    assert describe_value(10**400) == repr(10**400)  # up to 1000 digits: written out
    assert len(describe_value("x" * 10**6)) < 1100

    class Hostile:
        def __repr__(self):
            raise RuntimeError("no")

    assert describe_value(Hostile()) == "<a Hostile that cannot be shown>"
    import json

    from otprior._json import to_strict_json

    assert json.loads(json.dumps(to_strict_json({"n": 2**100000, "m": 10**50}))) == {"n": describe_value(2**100000), "m": 10**50}
    assert check_int(Decimal("123456789012345678901234567890"), "n") == 123456789012345678901234567890
    assert check_int(Decimal("1e20"), "n") == 10**20
    with pytest.raises(DomainError):
        check_int(Decimal("1.5e-999999"), "n")
    assert check_int(Decimal("0E-999999"), "n", minimum=0) == 0


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.array([True, False]), "0.5", 0.5 + 0j, [0.5, 1j]])
def test_the_scale_invariant_prior_refuses_what_is_not_a_real_fraction(value):
    """Booleans are documented as refused; ``scale_invariant_cdf(True, .)`` returned 1.0."""
    for fn in (otprior.scale_invariant_cdf, otprior.scale_invariant_density):
        with pytest.raises(DomainError) as info:
            fn(value, 0.5)
        assert info.value.parameter == "delta"


def test_zero_d_arrays_are_one_head_and_memoryviews_are_refused():
    """A 0-d array is a scalar everywhere (one head, as ``check_real`` reads it); a memoryview, whose items
    may be raw bytes, is refused as per-head values and as lengths."""
    for enc, single in [
        (E.get("log-distance", alpha=np.array(1.5)), E.get("log-distance", alpha=1.5)),
        (E.ALiBi(np.array(0.5)), E.ALiBi(0.5)),
        (E.get("kerple-log", r1=np.array(1.0), r2=np.array(0.5)), E.get("kerple-log", r1=1.0, r2=0.5)),
    ]:
        assert enc.heads is None and enc.per_head() is None and enc == single
    for call, name in [
        (lambda: E.get("log-distance", alpha=memoryview(b"abc")), "alpha"),
        (lambda: E.ALiBi(memoryview(np.array([0.5, 0.25]))), "slope"),
        (lambda: E.get("kerple-log", r1=memoryview(b"\x01\x02"), r2=0.5), "r1"),
        (lambda: E.ALiBi(0.5).window_mass(4, memoryview(b"abc")), "n"),
        (lambda: otprior.scale_invariant_cdf(memoryview(b"\x00"), 0.5), "delta"),
    ]:
        with pytest.raises(DomainError) as info:
            call()
        assert info.value.parameter == name


def test_alibi_counts_its_heads_from_the_slopes():
    """The caps count heads through ``heads``: given slopes, it is their number (it was None)."""
    enc = E.ALiBi((0.5, 0.25, 0.125))
    assert enc.heads == 3 and len(enc.per_head()) == 3 and all(h.heads is None for h in enc.per_head())
    assert E.ALiBi((0.5,)).heads is None and E.ALiBi(heads=4).heads == 4
    assert E.ALiBi((0.5, 0.25), heads=2) == E.ALiBi((0.5, 0.25))


def test_callable_bias_with_complex_values_is_refused():
    from otprior.encodings import Bias

    b = Bias(lambda d: -2 * np.log(d + 1) + 1j, asymptotic="-2*log(d+1)")
    with pytest.raises(otprior.DomainError, match="real values"):
        b.bias([0, 1, 2])


@pytest.mark.parametrize("func", ["ot_window_mass", "ot_window_law", "ot_window_mass_bound"])
def test_ot_masses_refuse_memoryview_lengths(func):
    raw = memoryview(b"\x40\x00\x00\x00")
    with pytest.raises(otprior.DomainError, match="n="):
        getattr(otprior, func)(4, raw, 0.5)
