"""The command line under hostile input.

Every option of every subcommand is found by walking the argparse parser, so a new flag is
fuzzed without editing this file. Each is fed values of the wrong type, non-finite, huge,
negative, empty, over-long and not UTF-8, on top of a valid command line for its
subcommand. Each case must end with status 0 (the value happened to be valid; ``--json``
output must then be strict JSON) or 2 with exactly one line on stderr that names only
flags the subcommand has, without a traceback, in under a second of CPU time.

Memory bombs run in a subprocess under ``resource.setrlimit(RLIMIT_AS)``
(:data:`AS_CAP`, :data:`AS_CAP_TORCH`) and must be refused the same way; the subprocess
reports its peak resident memory.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from otprior import cli
from otprior.cli import _main

# --- the parser, walked ----------------------------------------------------------------------------

BAD_VALUES = [
    "abc",  # wrong type
    "1,5",
    "0x10",
    "[1]",
    "true",
    "nan",  # non-finite
    "inf",
    "-inf",
    "1e400",
    "1e12",  # huge
    "1e300",
    "-1e300",
    "99999999999999999999999",
    "-1",  # negative, zero
    "-0.5",
    "0",
    "",  # empty
    " ",
    "\udcff\udcfe",  # bytes that are not UTF-8, as Python passes them in argv
    "9" * 5000,  # over-long
    "a\x00b",
]

# one valid value per required encoding parameter (the flag's name in the registry)
VALID_ENCODING_VALUES = {
    "logit_bound": "1",
    "factor": "8",
    "r1": "1.5",
    "r2": "1",
    "min_increment": "0.05",
    "alpha": "1.2",
    "rho": "0.5",
    "expr": "-0.5*log(d+1)",
}
# encodings whose parameters are all optional but that need some of them: ALiBi a slope,
# T5's masses a learned table
EXTRA_BASELINE = {"alibi": {"--slope": ["0.5"]}, "t5": {"--values": [",".join(["-1"] * 16 + ["-2"] * 16)]}}


@functools.lru_cache(maxsize=1)
def _leaves():
    """Every parser that runs a command, by path: ``("margin",)``, ``("classify", "alibi")``, ..."""
    out = {}

    def walk(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out[path] = parser
            return
        for name, child in subs[0].choices.items():
            walk(child, path + (name,))

    walk(cli.build_parser(), ())
    return out


def _commands():
    return sorted({path[0] for path in _leaves()})


def _value_count(action):
    if isinstance(action.nargs, int):
        return action.nargs
    return 1


def _flags(sub):
    """Options that take values, and positionals: (key, action)."""
    out = []
    for action in sub._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)) or action.nargs == 0:
            continue
        out.append(((max(action.option_strings, key=len) if action.option_strings else action.dest), action))
    return out


def _baselines(files):
    """A valid, fast command line per command: (positionals, {flag: values}); the encoding
    commands get their encoding and its required flags per leaf (:func:`_baseline`)."""
    ckpt, data = str(files["checkpoint"]), str(files["data"])
    return {
        "margin": ([], {"--window": ["64"], "--lengths": ["512", "8192"], "--tol": ["0.05"]}),
        "classify": ([], {}),
        "prior": ([], {"--rho": ["0.5"], "--n": ["256"]}),
        "mass": ([], {"--window": ["4"], "--n": ["64"]}),
        "report": ([], {"--out": [str(files["root"] / "new-report")]}),
        "checkpoint": ([ckpt], {}),
        "intervene": ([ckpt], {"--eval-length": ["24"], "--batches": ["1"], "--data": [data]}),
        "study": ([str(Path(__file__).resolve().parents[1] / "plans" / "cpu-toy.toml")], {"--dry-run": []}),
    }


def _baseline(path, files):
    positionals, options = _baselines(files)[path[0]]
    positionals, options = list(positionals), dict(options)
    if len(path) == 2:  # classify or mass of one encoding: its name and its required flags
        positionals = [path[1], *positionals]
        options.update(EXTRA_BASELINE.get(path[1], {}))
        for p in cli.encoding_parameters(path[1]):
            if p.required:
                options["--" + p.name.replace("_", "-")] = [VALID_ENCODING_VALUES[p.name]]
    return positionals, options


def _argv(path, base, key, action, values):
    positionals, options = base
    options = dict(options)
    argv = [path[0]]
    if action.option_strings:
        options.pop(key, None)
        # one value as --flag=value, so that values such as -inf reach the flag
        flag = [f"{key}={values[0]}"] if len(values) == 1 else [key, *values]
    else:
        flag = []
        index = [a.dest for a in _leaves()[path]._actions if not a.option_strings].index(action.dest)
        positionals = positionals[:index] + values + positionals[index + 1 :]
    argv += positionals + flag
    return argv + _options(options) + ["--json"]


def _options(options):
    """Flags and values; a single value as ``--flag=value`` (a value may start with '-')."""
    out = []
    for name, vals in options.items():
        out += [f"{name}={vals[0]}"] if len(vals) == 1 else [name, *vals]
    return out


def _cases(quick):
    """(path, flag) for every flag of every leaf; ``quick``: the flags of the classify and mass
    leaves that every encoding shares (--window, --json, the normaliser's) for one encoding only,
    and the encodings' own flags under classify only (mass generates them the same way)."""
    out = []
    for path, sub in _leaves().items():
        own = set()
        if len(path) == 2:
            own = {"--" + p.name.replace("_", "-") for p in cli.encoding_parameters(path[1])}
        for key, _ in _flags(sub):
            if quick and len(path) == 2:
                if key in own and path[0] != "classify":
                    continue
                if key not in own and path[1] != "log-distance":
                    continue
            out.append(pytest.param(path, key, id="-".join(path) + f"-{key}"))
    return out


CASES = _cases(quick=False)
QUICK_CASES = _cases(quick=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    torch = pytest.importorskip("torch")
    import matplotlib.backend_bases  # noqa: F401  (imported once here, not timed in a case)
    import sympy  # noqa: F401

    import otprior.plots  # noqa: F401
    from otprior.torch.model import ModelConfig, ReferenceModel, save_model

    root = tmp_path_factory.mktemp("hostile")
    torch.manual_seed(0)
    cfg = ModelConfig(scheme="log-distance", d_model=8, n_layers=1, n_heads=2, d_ff=16, train_length=16)
    ckpt = save_model(ReferenceModel(cfg), root / "model.safetensors")
    data = root / "data.txt"
    data.write_text("def f(x):\n    return x * 2 + 1\n" * 800)
    return {"root": root, "checkpoint": ckpt, "data": data}


#: one value of each kind, for the default run; the slow run feeds every value
QUICK_VALUES = ["abc", "nan", "-inf", "1e300", "-1", "0", "", "\udcff\udcfe", "9" * 5000]


@pytest.fixture
def quick_report(monkeypatch):
    """``report`` with the folder handling of the real one and none of its minute of work."""
    import otprior.report
    from otprior._output import staged_folder

    def build_report(out, *, progress=True, force=False):
        with staged_folder(out, force=force) as staging:
            (staging / "index.html").write_text("<html></html>")
        return Path(out) / "index.html"

    monkeypatch.setattr(otprior.report, "build_report", build_report)

    import otprior.torch

    def plot(self, ax=None):
        # the figure's content is not under test here: an empty one where the real one goes
        from matplotlib.figure import Figure

        return Figure(figsize=(1, 1)).add_subplot()

    monkeypatch.setattr(otprior.torch.CheckpointReport, "plot", plot)

    # an expression's verdict runs in a child process under a time budget (tested in
    # test_expression.py and by the capped bombs below); here only the flags are under test
    import otprior.encodings.bias
    from otprior.expression import BudgetExceeded

    def no_child(*args, **kwargs):
        raise BudgetExceeded("not run in the flag fuzz")

    monkeypatch.setattr(otprior.encodings.bias, "run_budgeted", no_child)


def _strict_json(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def _known_names(path):
    names = set()
    for action in _leaves()[tuple(path)]._actions:
        names.update(action.option_strings)
        names.add(action.dest)
    return names


def check_outcome(path, code, out, err, value=None):
    """0 with strict JSON, or 2 with one line naming only real flags; never a traceback."""
    assert "Traceback" not in err and "Traceback" not in out
    assert code in (0, 2), f"status {code}: {err}"
    if code == 0:
        _strict_json(out)
        return
    assert err.count("\n") == 1 and err.startswith("otprior: error: "), err
    known = _known_names(path)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", err))
    assert named <= known, f"names flags the command lacks: {named - known}: {err}"
    # the line names a flag, a positional, or the file or value at fault
    words = [n for n in known if not n.startswith("-")] + ([value[:40]] if value and value.strip() else [])
    assert named or any(w in err for w in words) or "unrecognized arguments" in err, err


# values given as separate arguments that argparse takes for options (multi-valued flags only)
_LOOKS_LIKE_OPTION = re.compile(r"^-(?!\d|\.\d)")


def _fuzz(path, key, values, files, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    action = dict(_flags(_leaves()[path]))[key]
    base = _baseline(path, files)
    failures = []
    # one untimed call first: the command's one-time imports (matplotlib for --plot, about 1 s of CPU)
    # are not the cost of a hostile value, which is what the 1 s bound below is about
    cli.main(_argv(path, base, key, action, [values[0]] * _value_count(action)))
    capsys.readouterr()
    for value in values:
        argv = _argv(path, base, key, action, [value] * _value_count(action))
        start = time.process_time()
        code = cli.main(argv)
        spent = time.process_time() - start
        out, err = capsys.readouterr()
        try:
            check_outcome(path, code, out, err, value)
            assert spent < 1.0, f"{spent:.2f} s of CPU"
        except AssertionError as exc:
            failures.append(f"{ascii(value)[:30]}: {str(exc)[:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("path, key", QUICK_CASES)
def test_bad_values(path, key, files, quick_report, capsys, monkeypatch, tmp_path):
    _fuzz(path, key, QUICK_VALUES, files, capsys, monkeypatch, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("path, key", CASES)
def test_bad_values_all(path, key, files, quick_report, capsys, monkeypatch, tmp_path):
    _fuzz(path, key, BAD_VALUES, files, capsys, monkeypatch, tmp_path)


def test_every_subcommand_has_a_baseline(files, quick_report, capsys, monkeypatch):
    """The valid command lines the fuzz starts from succeed, with strict JSON; a new subcommand needs one."""
    monkeypatch.chdir(files["root"])
    assert set(_commands()) == set(_baselines(files))
    for path in _leaves():
        positionals, options = _baseline(path, files)
        argv = [path[0], *positionals] + _options(options) + ["--json"]
        code = cli.main(argv)
        out, err = capsys.readouterr()
        assert code == 0, (argv, err)
        _strict_json(out)


@pytest.mark.parametrize("command", ["classify", "mass"])
def test_bad_encoding_names(command, capsys):
    """The ENCODING argument of the encoding commands: one line naming it, status 2."""
    for value in BAD_VALUES + ["sinusoidal", "ALIBI", "alibi "]:
        code = cli.main([command, value, "--json"])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("otprior: error: "), (value, err)
        if not value.startswith("-"):  # a value such as -inf reads as an option, refused as such
            assert "encoding" in err, (value, err)


def test_the_fuzz_covers_every_flag():
    """Every flag of every leaf (each encoding's own flags, the normalisers' flags) is fuzzed in
    the slow run; the quick run fuzzes every distinct flag of every command."""
    covered = {(c.values[0], c.values[1]) for c in CASES}
    quick = {(c.values[0], c.values[1]) for c in QUICK_CASES}
    assert len(covered) * len(BAD_VALUES) >= 1000
    for path, sub in _leaves().items():
        for action in sub._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                assert (path, max(action.option_strings, key=len)) in covered
    # the generated flags are there: per encoding, per normaliser
    from otprior import normalisers

    for name in cli.encoding_names():
        for p in cli.encoding_parameters(name):
            assert (("classify", name), "--" + p.name.replace("_", "-")) in quick
            assert (("mass", name), "--" + p.name.replace("_", "-")) in covered
    for name in normalisers.names():
        for p in normalisers.parameters(name):
            assert (("classify", "log-distance"), cli.normaliser_flag(name, p.name)) in quick
    # and only where they belong: no --c or --L outside fire, no --r1 outside KERPLE
    assert (("classify", "alibi"), "--c") not in covered and (("mass", "nope"), "--L") not in covered
    assert (("classify", "log-distance"), "--r1") not in covered


# --- memory bombs, under an address-space cap -----------------------------------------------------

#: Address-space caps of the subprocesses (the interpreter with numpy, scipy, sympy and
#: matplotlib maps about 0.4 GiB; with torch about 0.9 GiB).
AS_CAP = 1536 << 20
AS_CAP_TORCH = 3 << 30

_RUNNER = textwrap.dedent(
    """
    import io, json, resource, sys, time, contextlib
    cap = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    from otprior import cli
    if sys.argv[2] == "torch":
        import otprior.torch  # imported before the clock starts: the import is not the refusal
    def peak():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    results = []
    for argv in json.loads(sys.stdin.read()):
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # the peak resident set (VmHWM) starts again from the current one
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue(),
                        "seconds": time.perf_counter() - start, "peak": peak(),
                        # the budgeted children (expression parses, verdicts) this process waited for
                        "children_peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"results": results, "peak_bytes": peak}))
    """
)


def run_capped(argvs, cap, cwd, torch=False, **caps):
    env = dict(os.environ, PYTHONPATH=str(Path(cli.__file__).resolve().parents[2]), **caps)
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(cap), "torch" if torch else "-"], input=json.dumps(argvs), capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


BOMBS = [
    ["prior", "--rho", "0.5", "--n", "1e12", "--full"],
    ["prior", "--rho", "0.5", "--n", "1e9", "--json", "--plot", "p.png"],
    ["prior", "--rho", "0.0", "--n", "1e8", "--full"],
    ["mass", "causal-ot", "--rho", "0.5", "--window", "4", "--n", "1e12"],
    ["mass", "alibi", "--heads", "1e12", "--window", "4", "--n", "64"],
    ["mass", "alibi", "--heads", "1000", "--window", "4", "--n", *["64"] * 2000],
    ["mass", "t5", "--max-distance", "1e12", "--window", "4", "--n", "64"],
    ["mass", "alibi", "--heads", "5e6", "--window", "4", "--n", "64"],
    ["classify", "alibi", "--heads", "5e6"],
    ["classify", "log-distance", "--alpha", ",".join(["1.5"] * 1_000_001)],
    ["classify", "t5", "--values", ";".join(["0"] * 100_000)],
    ["classify", "t5", "--num-buckets", "1e15"],
    ["classify", "bias", "--expr", "9**9**9**9"],
    ["classify", "bias", "--expr", "(" * 5000 + "d" + ")" * 5000],
    ["classify", "bias", "--expr", "exp(" * 100 + "d" + ")" * 100],
    ["classify", "bias", "--expr", "((9**1000)**1000)**1000+d"],
    ["classify", "bias", "--expr", "9" * 500 + "+d"],
    ["classify", "bias", "--expr", "d.__class__"],
    ["classify", "bias", "--expr", "__import__('os').system('touch pwned')+d"],
    ["classify", "bias", "--expr", "lambda: 0"],
    ["classify", "bias", "--expr", "[d]*10**9"],
    ["classify", "bias", "--expr", "exp(d, x=1)"],
    ["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "0"],
    ["mass", "--window", "64", "--n", "1e12", "--alpha", "1", "--dps", "1e9"],
    ["report", "--out", ""],
    ["report", "--out", "/proc"],
    ["report", "--out", "/proc/otprior-report"],
    ["report", "--out", "/etc/hostname"],
]


def _leaf_of(argv):
    """The leaf parser an argv reaches (``mass`` without an encoding is ``mass log-distance``)."""
    argv = _main._with_default_encoding(list(argv))
    if (argv[0],) in _leaves():
        return (argv[0],)
    return (argv[0], argv[1])


def _check_bombs(report, cap):
    for r in report["results"]:
        assert r["code"] == 2, r
        named_value = next((a for a in r["argv"][1:] if len(a) > 3 and a in r["err"]), None)
        check_outcome(_leaf_of(r["argv"]), r["code"], r["out"], r["err"], named_value)
        assert r["seconds"] < 5.0, r  # wall clock on a shared machine; about 0.01 s alone
    assert report["peak_bytes"] < cap


NINES = "9" * 299
#: The second surface (class, argv, the flag its one line must name): expressions whose exact numbers
#: sympy would build without bound, caps that counted one head for 49,000 per-head values, and control
#: characters in values. Each must end in one line on stderr, status 2, within SECOND_SURFACE_SECONDS
#: and SECOND_SURFACE_PEAK bytes of resident memory (this process and its budgeted children).
SECOND_SURFACE = [
    ("expression size", ["classify", "bias", "--expr", f"((1+1/{NINES})**100)**100"], "--expr"),
    ("expression size", ["classify", "bias", "--expr", f"(1+1/{NINES})**100*d"], "--expr"),
    ("expression size", ["classify", "bias", "--expr", f"(d/{NINES})**100"], "--expr"),
    ("expression size", ["classify", "bias", "--expr", "exp(101*log(d+3))"], "--expr"),
    ("expression size", ["classify", "bias", "--expr", "exp(" * 30 + "d" + ")" * 30], "--expr"),
    ("expression size", ["classify", "bias", "--expr", "max(" + ",".join(["9" * 300 + "*d"] * 27) + ")"], "--expr"),
    ("expression size", ["mass", "bias", "--expr", f"(1+1/{NINES})**100*d", "--window", "4", "--n", "64"], "--expr"),
    ("head count", ["mass", "alibi", "--slope", ",".join(["1"] * 49_000), "--window", "4", "--n", *[str(64 + k) for k in range(200)]], "--slope"),
    ("head count", ["mass", "log-distance", "--alpha", ",".join(["2"] * 49_000), "--window", "4", "--n", *[str(64 + k) for k in range(200)]], "heads"),
    ("head count", ["mass", "kerple-log", "--r1", ",".join(["1"] * 49_000), "--r2", "0.5", "--window", "4", "--n", *[str(64 + k) for k in range(200)]], "heads"),
    ("control characters", ["classify", "bias", "--expr", "-log(d+1)\x1b]0;owned\x07"], "--expr"),
    ("control characters", ["classify", "bias", "--expr", "-log(d+1)\u202e"], "--expr"),
    ("control characters", ["prior", "--rho", "\x1b[2J\x1b[H0.5", "--n", "8"], "--rho"),
    ("control characters", ["mass", "alibi", "--slope", "\x9b31m", "--window", "4", "--n", "64"], "--slope"),
]
SECOND_SURFACE_SECONDS = 30.0
SECOND_SURFACE_PEAK = 500 << 20
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _check_second_surface(results):
    worst = {}
    for (kind, _, flag), r in zip(SECOND_SURFACE, results, strict=True):
        assert r["code"] == 2 and r["out"] == "" and "Traceback" not in r["err"], r
        assert r["err"].count("\n") == 1 and r["err"].startswith("otprior: error: "), r["err"][:500]
        assert flag in r["err"] and not _TERMINAL_CONTROLS.search(r["err"]), (flag, r["err"][:300])
        assert r["seconds"] < SECOND_SURFACE_SECONDS, r["seconds"]
        assert r["peak"] < SECOND_SURFACE_PEAK and r["children_peak"] < SECOND_SURFACE_PEAK, (r["peak"], r["children_peak"])
        seconds, peak = worst.get(kind, (0.0, 0))
        worst[kind] = (max(seconds, r["seconds"]), max(peak, r["peak"], r["children_peak"]))
    return worst


def test_memory_bombs_refused_under_a_cap(tmp_path):
    report = run_capped(BOMBS + [argv for _, argv, _ in SECOND_SURFACE], AS_CAP, tmp_path)
    second = report["results"][len(BOMBS):]
    report["results"] = report["results"][: len(BOMBS)]
    _check_bombs(report, AS_CAP)
    worst = _check_second_surface(second)
    assert not any(tmp_path.iterdir())  # nothing was written, no payload ran
    print("\n" + "\n".join(f"{k}: {sum(a[0] == k for a in SECOND_SURFACE)} attacks, largest {s:.2f} s, {p / 2**20:.0f} MiB peak"
                            for k, (s, p) in worst.items()))


def test_torch_bombs_refused_under_a_cap(files, tmp_path):
    ckpt, root = str(files["checkpoint"]), files["root"]
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    (tmp_path / "pipe.json").write_text((root / "model.json").read_text())
    huge_cfg = tmp_path / "huge.safetensors"
    huge_cfg.write_bytes(files["checkpoint"].read_bytes())
    (tmp_path / "huge.json").write_text(json.dumps({**json.loads((root / "model.json").read_text()), "n_heads": 10**9}))
    link = tmp_path / "zero.safetensors"
    link.write_bytes(files["checkpoint"].read_bytes())
    os.symlink("/dev/zero", tmp_path / "zero.json")
    text_pt = tmp_path / "notes.pt"
    text_pt.write_text("not a checkpoint\n" * 10)
    model_cfg = json.loads((root / "model.json").read_text())
    broken = {}
    for label, content in {
        "latin1": "{\"scheme\": \"log-distance\", \"note\": \"\xe9\"}".encode("latin-1"),
        "strings": json.dumps({**model_cfg, "n_heads": "2"}).encode(),
        "nan": json.dumps({**model_cfg, "train_length": float("nan")}).encode(),
        "array": b"[1, 2, 3]",
        "deep": b"[" * 100_000 + b"]" * 100_000,
    }.items():
        target = tmp_path / f"{label}.safetensors"
        target.write_bytes(files["checkpoint"].read_bytes())
        (tmp_path / f"{label}.json").write_bytes(content)
        broken[label] = str(target)
    bombs = [
        ["checkpoint", str(text_pt)],
        ["checkpoint", str(tmp_path)],
        *[["intervene", path, "--eval-length", "24"] for path in broken.values()],
        ["intervene", ckpt, "--eval-length", "100000"],
        ["intervene", ckpt, "--eval-length", "24", "--data", "/dev/zero"],
        ["intervene", ckpt, "--eval-length", "24", "--data", str(fifo)],
        ["intervene", ckpt, "--eval-length", "24", "--max-bytes", "1e15"],
        ["intervene", str(fifo), "--eval-length", "24"],
        ["intervene", str(huge_cfg), "--eval-length", "24"],
        ["intervene", str(link), "--eval-length", "24"],
        ["intervene", ckpt, "--eval-length", "24", "--shifts", *["0.1"] * 1001],  # above the item cap of this run
        ["checkpoint", str(fifo)],
        ["checkpoint", "/dev/zero"],
        ["checkpoint", ckpt, "--lengths", "8192", "512"],
        ["checkpoint", ckpt, "--plot", "/proc"],
    ]
    report = run_capped(bombs, AS_CAP_TORCH, tmp_path, torch=True, OTPRIOR_MAX_ITEMS="1000")
    _check_bombs(report, AS_CAP_TORCH)
