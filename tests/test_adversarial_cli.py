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

# one valid value per encoding parameter (used when an encoding needs it)
VALID_ENCODING_VALUES = {
    "logit_bound": "1",
    "scale": "8",
    "slope": "0.5",
    "r1": "1.5",
    "r2": "1",
    "num_buckets": "32",
    "max_distance": "128",
    "c": "0.1",
    "L": "512",
    "min_increment": "0.05",
    "alpha": "1.2",
    "offset": "1",
    "rho": "0.5",
    "expr": "-2*log(d+1)",
}


def _subparsers():
    parser = cli.build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return parser, action.choices


def _value_count(action):
    if isinstance(action.nargs, int):
        return action.nargs
    return 1


def _flags(sub):
    """Options that take values, and positionals: (key, action)."""
    out = []
    for action in sub._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)) or action.nargs == 0:
            continue
        out.append(((max(action.option_strings, key=len) if action.option_strings else action.dest), action))
    return out


def _baselines(files):
    """A valid, fast command line per subcommand: (positionals, {flag: values})."""
    ckpt, data = str(files["checkpoint"]), str(files["data"])
    return {
        "margin": ([], {"--window": ["64"], "--lengths": ["512", "8192"], "--tol": ["0.05"]}),
        "classify": (["alibi"], {"--slope": ["0.5"]}),
        "prior": ([], {"--rho": ["0.5"], "--n": ["256"]}),
        "mass": ([], {"--window": ["4"], "--n": ["64"], "--alpha": ["1.2"]}),
        "report": ([], {"--out": [str(files["root"] / "new-report")]}),
        "checkpoint": ([ckpt], {}),
        "intervene": ([ckpt], {"--eval-length": ["24"], "--batches": ["1"], "--data": [data]}),
    }


def _encoding_taking(flag_dest):
    for name in cli.encoding_names():
        params = cli.encoding_parameters(name)
        if any(p.name == flag_dest for p in params):
            return name, params
    return None, []


def _argv(command, base, key, action, values):
    positionals, options = base
    positionals = list(positionals)
    options = dict(options)
    if command in ("classify", "mass") and action.dest in cli._all_encoding_parameters():
        # the encoding that takes this flag, with its other required flags
        name, params = _encoding_taking(action.dest)
        positionals = [name]
        options = {k: v for k, v in options.items() if k not in ("--slope", "--alpha")}
        for p in params:
            if p.required and p.name != action.dest:
                options["--" + p.name.replace("_", "-")] = [VALID_ENCODING_VALUES.get(p.name, "1")]
    argv = [command]
    if action.option_strings:
        options.pop(key, None)
        # one value as --flag=value, so that values such as -inf reach the flag
        argv += [f"{key}={values[0]}"] if len(values) == 1 else [key, *values]
    else:
        index = [a.dest for a in _positional_actions(command)].index(action.dest)
        positionals = positionals[:index] + values + positionals[index + 1 :]
    argv += positionals
    for flag, vals in options.items():
        argv += [flag, *vals]
    return argv + ["--json"]


def _positional_actions(command):
    _, subs = _subparsers()
    return [a for a in subs[command]._actions if not a.option_strings]


def _cases():
    _, subs = _subparsers()
    return [pytest.param(command, key, id=f"{command}-{key}") for command, sub in subs.items() for key, _ in _flags(sub)]


CASES = _cases()


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

    def plots(self, folder):
        # the figures' content is not under test here: two small files where the real ones go
        out = [Path(folder) / "exponents.png", Path(folder) / "distant_mass.png"]
        for path in out:
            path.write_bytes(b"png")
        return out

    monkeypatch.setattr(otprior.torch.CheckpointReport, "plots", plots)


def _strict_json(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def _known_names(command):
    _, subs = _subparsers()
    names = set()
    for action in subs[command]._actions:
        names.update(action.option_strings)
        names.add(action.dest)
    return names


def check_outcome(command, code, out, err, value=None):
    """0 with strict JSON, or 2 with one line naming only real flags; never a traceback."""
    assert "Traceback" not in err and "Traceback" not in out
    assert code in (0, 2), f"status {code}: {err}"
    if code == 0:
        _strict_json(out)
        return
    assert err.count("\n") == 1 and err.startswith("otprior: error: "), err
    known = _known_names(command)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", err))
    assert named <= known, f"names flags the command lacks: {named - known}: {err}"
    # the line names a flag, a positional, or the file or value at fault
    words = [n for n in known if not n.startswith("-")] + ([value[:40]] if value and value.strip() else [])
    assert named or any(w in err for w in words) or "unrecognized arguments" in err, err


# values given as separate arguments that argparse takes for options (multi-valued flags only)
_LOOKS_LIKE_OPTION = re.compile(r"^-(?!\d|\.\d)")


def _fuzz(command, key, values, files, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    _, subs = _subparsers()
    action = dict(_flags(subs[command]))[key]
    base = _baselines(files)[command]
    failures = []
    for value in values:
        argv = _argv(command, base, key, action, [value] * _value_count(action))
        start = time.process_time()
        code = cli.main(argv)
        spent = time.process_time() - start
        out, err = capsys.readouterr()
        try:
            check_outcome(command, code, out, err, value)
            assert spent < 1.0, f"{spent:.2f} s of CPU"
        except AssertionError as exc:
            failures.append(f"{ascii(value)[:30]}: {str(exc)[:300]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("command, key", CASES)
def test_bad_values(command, key, files, quick_report, capsys, monkeypatch, tmp_path):
    _fuzz(command, key, QUICK_VALUES, files, capsys, monkeypatch, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("command, key", CASES)
def test_bad_values_all(command, key, files, quick_report, capsys, monkeypatch, tmp_path):
    _fuzz(command, key, BAD_VALUES, files, capsys, monkeypatch, tmp_path)


def test_every_subcommand_has_a_baseline(files, quick_report, capsys, monkeypatch):
    """The valid command lines the fuzz starts from succeed, with strict JSON; a new subcommand needs one."""
    monkeypatch.chdir(files["root"])
    _, subs = _subparsers()
    baselines = _baselines(files)
    assert set(subs) == set(baselines)
    for command in subs:
        positionals, options = baselines[command]
        argv = [command, *positionals] + [x for flag, vals in options.items() for x in (flag, *vals)] + ["--json"]
        code = cli.main(argv)
        out, err = capsys.readouterr()
        assert code == 0, (argv, err)
        _strict_json(out)


def test_the_fuzz_covers_every_flag():
    _, subs = _subparsers()
    covered = {(c.values[0], c.values[1]) for c in CASES}
    assert len(covered) * len(BAD_VALUES) >= 1000
    for command, sub in subs.items():
        for action in sub._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                assert (command, max(action.option_strings, key=len)) in covered


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
    results = []
    for argv in json.loads(sys.stdin.read()):
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue(),
                        "seconds": time.perf_counter() - start})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"results": results, "peak_bytes": peak}))
    """
)


def run_capped(argvs, cap, cwd, torch=False, **caps):
    env = dict(os.environ, PYTHONPATH=str(Path(cli.__file__).resolve().parents[1]), **caps)
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(cap), "torch" if torch else "-"], input=json.dumps(argvs), capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


BOMBS = [
    ["prior", "--rho", "0.5", "--n", "1e12"],
    ["prior", "--rho", "0.5", "--n", "1e9", "--json"],
    ["prior", "--rho", "0.0", "--n", "1e8", "--full"],
    ["mass", "causal-ot", "--rho", "0.5", "--window", "4", "--n", "1e12"],
    ["mass", "alibi", "--heads", "1e12", "--window", "4", "--n", "64"],
    ["mass", "alibi", "--heads", "1000", "--window", "4", "--n", *["64"] * 2000],
    ["mass", "t5", "--max-distance", "1e12", "--window", "4", "--n", "64"],
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
    ["margin", "--window", "64", "--lengths", "512", "8192", "--tol", "1e-300"],
    ["mass", "--window", "64", "--n", "1e12", "--alpha", "1", "--dps", "1e9"],
    ["report", "--out", ""],
    ["report", "--out", "/proc"],
    ["report", "--out", "/proc/otprior-report"],
    ["report", "--out", "/etc/hostname"],
]


def _check_bombs(report, cap):
    for r in report["results"]:
        command = r["argv"][0]
        assert r["code"] == 2, r
        named_value = next((a for a in r["argv"][1:] if len(a) > 3 and a in r["err"]), None)
        check_outcome(command, r["code"], r["out"], r["err"], named_value)
        assert r["seconds"] < 5.0, r  # wall clock on a shared machine; about 0.01 s alone
    assert report["peak_bytes"] < cap


def test_memory_bombs_refused_under_a_cap(tmp_path):
    report = run_capped(BOMBS, AS_CAP, tmp_path)
    _check_bombs(report, AS_CAP)
    assert not any(tmp_path.iterdir())  # nothing was written, no payload ran


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
