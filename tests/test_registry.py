"""The registry: the one list of encodings and normalisers, and the options derived from it."""

import numpy as np
import pytest

from otprior import DomainError, classify
from otprior import encodings as E
from otprior import normalisers as N
from otprior._registry import REQUIRED


def test_every_registered_encoding_builds_from_its_parameters():
    assert set(E.names()) >= {"nope", "rope", "yarn", "alibi", "kerple-log", "kerple-power", "t5", "fire", "cable", "log-distance", "causal-ot", "bias"}
    examples = {"rope": {"logit_bound": 1.0}, "yarn": {"factor": 4.0, "logit_bound": 1.0}, "alibi": {"slope": 0.1}, "kerple-log": {"r1": 1.2, "r2": 0.5},
                "kerple-power": {"r1": 0.5, "r2": 1.0}, "cable": {"min_increment": 0.1}, "log-distance": {"alpha": 1.1}, "causal-ot": {"rho": 0.5},
                "bias": {"expr": "-2*log(d+1)"}}
    for name in E.names():
        params = E.parameters(name)
        assert all(p.doc for p in params), name
        required = {p.name for p in params if p.default is REQUIRED}
        given = examples.get(name, {})
        assert required <= set(given), (name, required)
        enc = E.get(name, **given)
        assert isinstance(enc, E.lookup(name)) and enc.name == name
        v = classify(enc)
        assert v.kind in ("bounded", "diluting", "undecided")


def test_unknown_names_and_keywords_are_refused():
    with pytest.raises(DomainError) as info:
        E.get("sinusoidal")
    assert info.value.parameter == "encoding" and "alibi" in str(info.value)
    with pytest.raises(DomainError) as info:
        E.get("alibi", slope=0.1, c=3)
    assert info.value.parameter == "c"
    with pytest.raises(DomainError) as info:
        E.get("kerple-log", r1=1.0)
    assert info.value.parameter == "r2"
    assert N.parameters("ssmax")[0].name == "s"


def test_choices_are_declared():
    variant = {p.name: p for p in E.parameters("alibi")}["variant"]
    assert variant.choices == ("bloom", "mpt", "falcon")
    assert {p.name: p for p in E.parameters("rope")}["rope_type"].choices[0] == "default"


def test_multi_head_answers_per_head_and_n_is_vectorised():
    enc = E.ALiBi(heads=6)
    m = enc.window_mass(4, [10, 100, 1000])
    assert m.shape == (6, 3)
    for h, one in enumerate(enc.per_head()):
        assert np.allclose(m[h], [one.window_mass(4, n) for n in (10, 100, 1000)], rtol=0, atol=0)
    verdicts = classify(enc)
    assert len(verdicts) == 6 and all(v.kind == "bounded" for v in verdicts)
    assert np.asarray(E.LogDistance(1.2).distant_mass(3, np.array([[5, 6], [7, 8]]))).shape == (2, 2)


def test_verdict_prints_the_deciding_digits():
    v = classify(E.LogDistance(1.0000001))
    assert v.kind == "bounded" and "1.0000001 > 1" in v.reason
    v = classify(E.KerpleLog(0.99999999, 1.0))
    assert v.kind == "diluting" and "0.99999999 < 1" in v.reason
    assert "1 = 1" in classify(E.LogDistance(1.0)).reason


def test_kerple_stored_names_map_the_right_way_round():
    log = E.KerpleLog.from_stored(bias_p=1.4, bias_a=0.3)
    assert (log.r1, log.r2) == (1.4, 0.3)
    power = E.KerplePower.from_stored(bias_a=0.3, bias_p=1.4)
    assert (power.r1, power.r2) == (0.3, 1.4)
    assert E.KerplePower.from_stored(bias_a=0.001, bias_p=5.0).r2 == 2.0 and E.KerpleLog.from_stored(bias_p=-1, bias_a=0).r1 == 0.01


def test_allocations_are_checked_before_they_happen():
    from otprior.limits import ResourceError

    with pytest.raises(ResourceError):
        E.ALiBi.slopes(10**12)
    with pytest.raises(ResourceError):
        E.ALiBi(heads=10**12)
    with pytest.raises(DomainError):
        E.FIRE(f=lambda x: -8.0 * x).window_mass(4, 10**12)  # a general callable: no closed form, direct summation refused


def test_content_dependent_limit_at_constant_content():
    v = classify(E.NoPE(), N.SSMax(1.0), score_bound=1.0)
    assert v.kind == "content-dependent" and v.limit_distant_mass(4) == 1.0  # Delta = 0 < 1
    v = classify(E.NoPE(), N.Entmax(2.0), score_bound=1.0)
    assert v.threshold == 0.0 and v.threshold_strict and v.limit_distant_mass(4) == 1.0


def test_command_line_strings_convert_through_the_parameters():
    p = {q.name: q for q in E.parameters("alibi")}
    assert p["slope"].convert("0.25") == 0.25 and p["heads"].convert("12") == 12 and p["bf16"].convert("yes") is True
    assert p["variant"].convert("mpt") == "mpt"
    with pytest.raises(DomainError) as info:
        p["variant"].convert("gpt")
    assert info.value.parameter == "variant"
    with pytest.raises(DomainError) as info:
        p["slope"].convert("__import__('os')")
    assert info.value.parameter == "slope"
    values = {q.name: q for q in E.parameters("t5")}["values"].convert("0, -1, -2; 0, -0.5, -1")
    assert values == ((0.0, -1.0, -2.0), (0.0, -0.5, -1.0))
    enc = E.get("t5", num_buckets=3, max_distance=8, values=values)
    assert enc.heads == 2
    expr = {q.name: q for q in E.parameters("bias")}["expr"].convert("-2*log(d+1)")
    assert classify(E.get("bias", expr=expr)).kind == "bounded"


# --- the extension points: register, the hooks, and CONTRIBUTING.md's worked example ------------

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _contributing_example() -> str:
    import re

    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text[text.index("## Add a positional encoding"):text.index("## Add a theorem")]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the encoding section holds one complete example"
    return blocks[0]


def test_register_and_the_hooks_are_public():
    assert "register" in E.__all__ and E.register == E.REGISTRY.register

    from dataclasses import dataclass

    @dataclass(frozen=True, repr=False)
    class Bare(E.Encoding):  # implements nothing: each hook names itself
        name = "bare"

    with pytest.raises(NotImplementedError, match=r"Bare does not implement _verdict\(self\)"):
        classify(Bare())
    with pytest.raises(NotImplementedError, match=r"Bare does not implement bias\(self, d, n=None\)"):
        Bare().distant_mass(4, 16)


def test_contributing_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """The worked example of CONTRIBUTING.md, executed from the file itself (the project's own
    text), registers, classifies, plots into the caller's axes and reaches the command line."""
    import matplotlib.pyplot as plt
    import mpmath

    from otprior import cli

    monkeypatch.setattr(E.REGISTRY, "_classes", dict(E.REGISTRY._classes))  # undone after the test
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "contributing_example"}
    try:
        exec(compile(_contributing_example(), str(ROOT / "CONTRIBUTING.md"), "exec"), namespace)
        printed = capsys.readouterr().out
        assert "gaussian" in E.names() and (tmp_path / "gaussian.png").stat().st_size > 1000
        enc, v, ax = namespace["enc"], namespace["verdict"], namespace["ax"]
        assert v.kind == "bounded" and len(ax.lines) >= 3  # two curves and the bounded one's limit marker
        # D_oo(4) for s = 4 by an independent route: mpmath's sums at 40 digits
        ctx = mpmath.MPContext()
        ctx.dps = 40
        w = lambda d: ctx.exp(-((d / ctx.mpf(4)) ** 2))  # noqa: E731
        reference = ctx.nsum(w, [4, ctx.inf]) / ctx.nsum(w, [0, ctx.inf])
        assert v.limit_distant_mass(4) == pytest.approx(float(reference), rel=1e-12)
        assert enc.distant_mass(4, 1024) == pytest.approx(float(reference), rel=1e-12)
        assert "Gaussian(s=4.0): BOUNDED" in printed
        assert cli.main(["classify", "--help"]) == 0 and "gaussian" in capsys.readouterr().out
        assert cli.main(["classify", "gaussian", "--s", "-1"]) == 2
        assert "--s: s=-1.0" in capsys.readouterr().err
    finally:
        plt.close("all")


def test_diluting_limit_is_one_and_verdicts_print_short():
    from otprior.plots import default_encodings

    for enc in [*default_encodings().values(), E.ALiBi(0.0), E.LogDistance(1.0)]:
        for norm in (None, "ssmax"):
            v = classify(enc, norm)
            if v.kind == "diluting":
                assert v.limit_distant_mass(64) == 1.0, (enc, norm)
    heads = classify(E.ALiBi(heads=8))  # one short line per head (the reason and rate are attributes)
    assert len(heads) == 8 and len(repr(heads)) < 8 * 60
    assert repr(heads[0]) == f"<Verdict bounded: {heads[0].encoding!r}>"
    long = classify(E.T5Buckets(values=np.linspace(0.0, -4.0, 32)), "ssmax")
    assert "\n" not in repr(long) and len(repr(long)) < 200 and "SSMax" in repr(long)
