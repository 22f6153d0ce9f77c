"""One name and one range per quantity across the API and the command line; old spellings refused by name."""

import json

import pytest

import otprior
from otprior import cli
from otprior import encodings as E
from otprior._validation import ALPHA, BAND_SCORE_BOUND, OFFSET, SCORE_BOUND, TOL, DomainError, RenamedError


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- YaRN speaks transformers' rope_scaling names --------------------------------------------------


def test_yarn_parameters_are_transformers_names():
    names = {p.name for p in E.parameters("yarn")}
    assert {"factor", "original_max_position_embeddings"} <= names
    assert not names & {"scale", "original_max_position"}
    # the same keywords as RoPE with rope_type="yarn": one vocabulary for one scaling
    y = E.YaRN(8.0, 1.0, original_max_position_embeddings=2048)
    r = E.RoPE(1.0, rope_type="yarn", factor=8.0, original_max_position_embeddings=2048)
    assert y.score_bound == r.score_bound and (y.inverse_frequencies() == r.inverse_frequencies()).all()


@pytest.mark.parametrize("old, new", [("scale", "factor"), ("original_max_position", "original_max_position_embeddings")])
def test_yarn_old_keywords_are_refused_naming_the_new_one(old, new):
    kwargs = {"factor": 8.0, "logit_bound": 1.0}
    kwargs[old] = kwargs.pop("factor") if old == "scale" else 4096
    for make in (lambda: E.YaRN(**kwargs), lambda: E.get("yarn", **kwargs)):
        with pytest.raises(RenamedError) as info:
            make()
        assert isinstance(info.value, DomainError) and info.value.parameter == old and info.value.new == new
        assert f"spelled {new} now" in str(info.value)


@pytest.mark.parametrize("old, new", [("--scale", "--factor"), ("--original-max-position", "--original-max-position-embeddings")])
def test_yarn_old_flags_are_refused_naming_the_new_one(capsys, old, new):
    code, out, err = run(capsys, "classify", "yarn", "--factor", "8", "--logit-bound", "1", old, "8")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{old}: a former name, spelled {new} now" in err
    code, out, _ = run(capsys, "classify", "yarn", "--help")
    assert old + " " not in out and new in out  # hidden from the help


# --- classify: the content bound is given once, as the encoding's --logit-bound ---------------------


def test_classify_score_bound_flag_refused_naming_logit_bound(capsys):
    code, out, err = run(capsys, "classify", "nope", "--normaliser", "ssmax", "--score-bound", "1")
    assert code == 2 and out == "" and "--score-bound: a former name, spelled --logit-bound now" in err
    code, out, err = run(capsys, "classify", "nope", "--normaliser", "ssmax", "--ssmax-s", "0.5", "--logit-bound", "1", "--json")
    assert code == 0
    data = json.loads(out)
    expected = otprior.classify(E.NoPE(1.0), otprior.normalisers.get("ssmax", s=0.5))
    assert data["kind"] == expected.kind == "content-dependent" and data["reason"] == expected.reason


# --- one domain for alpha, offset and tol ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05", "--offset", "1e-300"],  # was refused below 1e-6
        ["classify", "log-distance", "--alpha", "1e15", "--json"],
    ],
)
def test_cli_accepts_what_the_api_accepts(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 0, err


@pytest.mark.parametrize(
    "argv, flag, domain",
    [
        (["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "1"], "--tol", TOL),
        (["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05", "--offset", "1e301"], "--offset", OFFSET),
        (["classify", "log-distance", "--alpha", "2e15"], "--alpha", ALPHA),
        (["classify", "log-distance", "--alpha", "1.5", "--offset", "1e-301"], "--offset", OFFSET),
    ],
)
def test_cli_refuses_what_the_api_refuses_with_its_domain(capsys, argv, flag, domain):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith(f"otprior: error: {flag}:") and str(domain) in err


@pytest.mark.parametrize(
    "argv, attr, expected",
    [
        (["--tol", "5e-324"], "tol", 5e-324),  # the smallest positive double: in TOL, so the command line takes it
        (["--offset", "1e300"], "offset", OFFSET.high),
        (["--score-bound", "350"], "score_bound", BAND_SCORE_BOUND.high),
        (["--lengths", "512", "1e300"], "lengths", [512, 10**300]),  # margin_for takes lengths up to 1e300, read exactly
    ],
)
def test_margin_flags_take_the_whole_api_domain(argv, attr, expected):
    """No time limits of the command line's own: every value of the API's domain parses (the run's
    time is bounded by the library); parsed only, so that the test does not time the library."""
    args, extra = cli.build_parser().parse_known_args(["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0.05", *argv])
    assert not extra and args.func is cli.margin.run and getattr(args, attr) == expected


def test_content_bound_one_domain_for_verdicts_one_for_the_band(capsys):
    """B: any finite B >= 0 for a verdict (Theorem 11); [0, 350] where e^(2B) is evaluated (Theorem 10's
    band), refused beyond with the reason, by the API and the command line alike."""
    assert SCORE_BOUND.high == float("inf") and BAND_SCORE_BOUND.high == 350.0
    big = 1e300
    assert otprior.classify(E.LogDistance(1.5, logit_bound=big)).kind == "bounded"
    assert otprior.classify("nope", "ssmax", score_bound=big).kind == "content-dependent"
    assert otprior.ot_dilution_bound(4, 64, 0.5, big).bound <= 1.0
    code, out, err = run(capsys, "classify", "log-distance", "--alpha", "1.5", "--logit-bound", "1e300", "--json")
    assert code == 0 and json.loads(out)["kind"] == "bounded", err
    enc = E.NoPE(logit_bound=351.0)  # the encoding holds it; its band refuses it, naming the reason
    for call in (lambda: enc.distant_mass_range(4, 64), lambda: otprior.content_band(0.5, 351.0),
                 lambda: otprior.distant_mass_bounds(4, 64, 1.5, score_bound=351.0),
                 lambda: otprior.margin_for(4, (8, 16), 0.5, score_bound=351.0)):
        with pytest.raises(DomainError, match="score_bound") as info:
            call()
        assert "350" in str(info.value)
    assert "overflows a double" in str(pytest.raises(DomainError, otprior.content_band, 0.5, 351.0).value)
    lo, hi = otprior.content_band(0.5, 350.0)
    assert 0.0 < lo < 1e-300 and hi == 1.0
    for argv in (["mass", "nope", "--logit-bound", "351", "--window", "4", "--n", "64"],
                 ["margin", "--window", "4", "--lengths", "8", "16", "--tol", "0.5", "--score-bound", "351"]):
        code, _, err = run(capsys, *argv)
        flag = "--score-bound" if argv[0] == "margin" else "--logit-bound"
        assert code == 2 and err.startswith(f"otprior: error: {flag}:") and str(BAND_SCORE_BOUND) in err
        assert BAND_SCORE_BOUND.reason in err


def test_api_domains_agree_at_the_ends():
    # the mass routines, the encoding and the margin check the same intervals
    for a in (ALPHA.high, 1e-300):
        E.LogDistance(a)
        otprior.window_mass(2, 4, a)
    with pytest.raises(DomainError, match="alpha"):
        E.LogDistance(ALPHA.high * 2)
    with pytest.raises(DomainError, match="alpha"):
        otprior.window_mass(2, 4, ALPHA.high * 2)
    for o in (OFFSET.low, OFFSET.high):
        E.LogDistance(1.5, offset=o)
    for bad in (OFFSET.low / 10, OFFSET.high * 10):
        with pytest.raises(DomainError, match="offset"):
            E.LogDistance(1.5, offset=bad)
        with pytest.raises(DomainError, match="offset"):
            otprior.margin_for(64, (512, 8192), 0.05, offset=bad)
    for bad in (0.0, 1.0):
        with pytest.raises(DomainError, match="tol"):
            otprior.margin_for(64, (512, 8192), bad)


# --- classify accepts a registered name, as normaliser= does -------------------------------------


def test_classify_accepts_an_encoding_name_like_the_normaliser():
    by_name = otprior.classify("nope", "ssmax", score_bound=1.0)
    by_instance = otprior.classify(E.NoPE(), otprior.normalisers.get("ssmax"), score_bound=1.0)
    assert by_name.kind == by_instance.kind == "content-dependent" and by_name.threshold == by_instance.threshold
    with pytest.raises(DomainError) as info:
        otprior.classify("alibi")  # built as encodings.get builds it: the missing parameter is named
    assert info.value.parameter == "slope" and "encodings.get('alibi'" in str(info.value)
    with pytest.raises(DomainError) as info:
        otprior.classify("alibj")
    assert info.value.parameter == "encoding" and "alibi" in str(info.value)


# --- a multi-head verdict prints as a summary ------------------------------------------------------


def test_multi_head_verdicts_summary_and_still_a_tuple():
    v = otprior.classify(E.ALiBi(heads=64))
    assert isinstance(v, tuple) and isinstance(v, otprior.Verdicts) and len(v) == 64
    assert v == tuple(v) and tuple(v) == v and v[3] is tuple(v)[3] and list(v) == list(tuple(v))
    text = repr(v)
    assert len(text) < 200 and text.count("\n") == 1 and "64 heads of ALiBi" in text and "bounded  64  heads 0-63" in text
    mixed = otprior.classify(E.LogDistance((1.5, 0.5, 0.5, 2.0, 0.9)))
    lines = repr(mixed).splitlines()
    assert len(lines) == 3
    assert lines[1].split() == ["bounded", "2", "heads", "0,", "3"] and lines[2].rstrip(")").split() == ["diluting", "3", "heads", "1-2,", "4"]
    assert otprior.Verdicts(()).__repr__() == "Verdicts()"


def test_did_you_mean_never_suggests_a_former_spelling(capsys):
    code, _, err = run(capsys, "classify", "yarn", "--factor", "8", "--logit-bound", "1", "--scal", "8")
    assert code == 2 and "(did you mean --factor?)" in err and "--scale" not in err
    code, _, err = run(capsys, "classify", "rope", "--logit-bound", "1", "--score-bound")  # even without its value
    assert code == 2 and "spelled --logit-bound now" in err
