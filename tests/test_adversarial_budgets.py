"""Hostile input, the second surface: terminal-safe output, closed and full streams, parsing inside its budget.

The capped attacks of this class (expressions whose exact numbers sympy would build without bound,
49,000 per-head values, control characters in values) run with the other memory bombs in
``test_adversarial_cli.py`` (one capped process). Here: the output layer, standard output closed
or full (a real process each: the interpreter's own last flush is part of the case), and, marked
slow, the 49-term max and a fuzz of hostile expression texts. Every subprocess runs under an
address-space cap (``resource.setrlimit(RLIMIT_AS)`` before anything is imported) and a timeout;
each case must end within :data:`SECONDS` seconds and :data:`PEAK_BYTES` bytes of peak resident
memory per process.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Address space of the subprocesses: the interpreter with numpy, scipy, flint and sympy maps about
#: 0.3 GiB, so 512 MiB leaves the command and its budgeted children (which inherit the cap) 200 MiB.
AS_CAP = 512 << 20
#: What every case may take: wall-clock seconds and peak resident bytes (per process).
SECONDS = 30.0
PEAK_BYTES = 500 << 20


def _cap_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _controls(text):
    """Characters a terminal would act on (newlines and tabs excepted)."""
    return re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)


def test_control_characters_reach_no_terminal(capsys):
    """Any line printed passes the one output layer: controls from files and users are escaped, newlines kept."""
    from otprior.cli._common import emit, write_error

    emit({"model_type": "\x1b]0;owned\x07"}, ["model_type \x1b]0;owned\x07\x1b[2J", "second line\r", "\x9b1m \u202e"], False)
    out = capsys.readouterr().out
    assert out.count("\n") == 3 and not _controls(out) and "\\x1b]0;owned\\x07" in out
    emit({"model_type": "\x1b]0;owned\x07"}, [], True)
    out = capsys.readouterr().out
    assert not _controls(out) and json.loads(out) == {"model_type": "\x1b]0;owned\x07"}  # JSON escapes, data intact
    write_error("bad \x1b[2J value\nsecond\tline \x07")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not _controls(err) and "second line" in err


STREAMS = {
    # name: (argv, what is done to the streams before the command starts, expected status)
    "stdout closed": (["prior", "--rho", "0.5", "--n", "8"], "close1", 2),
    "stdout full": (["prior", "--rho", "0.5", "--n", "8", "--json"], "full1", 2),
    "help to a full stdout": (["--help"], "full1", 2),
    "version to a closed stdout": (["--version"], "close1", 2),
    "stdout and stderr closed": (["prior", "--rho", "0.5", "--n", "8"], "close12", 2),
    "stderr full, bad input": (["prior", "--rho", "2", "--n", "8"], "full2", 2),
    "stderr closed, bad input": (["prior", "--rho", "2", "--n", "8"], "close2", 2),
}


def _streams(how):
    def prepare():
        _cap_address_space()
        if how.startswith("close"):
            for fd in how[len("close"):]:
                os.close(int(fd))
        else:
            fd = os.open("/dev/full", os.O_WRONLY)
            os.dup2(fd, int(how[-1]))
            os.close(fd)

    return prepare


def _run_streams(names, tmp_path):
    """``otprior ... >&-`` and ``> /dev/full``: status 2, at most one line on stderr, never a traceback
    (stderr is captured here only where the case leaves it open)."""
    procs = {}
    for name in names:
        argv, how, _ = STREAMS[name]
        err = None if "2" in how else subprocess.PIPE
        procs[name] = subprocess.Popen([sys.executable, "-m", "otprior", *argv], stdout=None if "1" in how else subprocess.DEVNULL,
                                       stderr=err, env=_env(), cwd=tmp_path, preexec_fn=_streams(how))
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=SECONDS)
        assert proc.returncode == STREAMS[name][2], (name, proc.returncode, err)
        if err is not None:
            err = err.decode()
            assert "Traceback" not in err and "Exception ignored" not in err, (name, err)
            assert err.count("\n") == 1 and err.startswith("otprior: error: stdout: "), (name, err)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stdout_ends_with_status_two_and_one_line(tmp_path):
    _run_streams(["stdout full"], tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_closed_stdout_and_closed_or_full_stderr_end_quietly_with_status_two(tmp_path):
    _run_streams(["stdout closed", "stdout and stderr closed", "stderr full, bad input", "stderr closed, bad input",
                  "help to a full stdout", "version to a closed stdout"], tmp_path)


# --- slow: the long max and the fuzz of expression texts --------------------------------------------


LONG_MAX = textwrap.dedent(
    """
    import contextlib, io, json, resource, sys, time
    from otprior import cli
    import sympy  # noqa: F401
    out = io.StringIO()
    start, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out):
        code = cli.main(sys.argv[1:])
    print(json.dumps({"code": code, "out": out.getvalue(), "seconds": time.perf_counter() - start,
                      "cpu": time.process_time() - cpu,
                      "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "children_peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))
    """
)


@pytest.mark.slow
def test_a_long_max_spends_its_seconds_in_the_budgeted_child(tmp_path):
    """The 49-term max took 9 s outside any budget; now the command's own process spends well under a second
    of CPU time, the rest is the parse's and the verdict's children (each under its budget)."""
    text = "max(" + ",".join(f"sin(d*{k})" for k in range(1, 50)) + ")"
    proc = subprocess.run([sys.executable, "-c", LONG_MAX, "classify", "bias", "--expr", text, "--time-budget", "2"],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120, preexec_fn=_cap_address_space)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["code"] == 0 and "Bias('Max(" in r["out"], r
    assert r["cpu"] < 1.0 and r["seconds"] < SECONDS and r["peak"] < PEAK_BYTES and r["children_peak"] < PEAK_BYTES, r


FUZZ_RUNNER = textwrap.dedent(
    """
    import json, resource, sys, time
    from otprior import DomainError
    from otprior.expression import parse_bias
    import sympy  # noqa: F401
    worst = [0.0, 0]
    outcomes = {"parsed": 0, "refused": 0}
    bad = []
    for text in json.loads(sys.stdin.read()):
        start = time.perf_counter()
        try:
            parse_bias(text)
            outcomes["parsed"] += 1
        except DomainError as exc:
            outcomes["refused"] += 1
            if exc.parameter != "expr" or "\\n" in str(exc):
                bad.append([text, str(exc)[:300]])
        except BaseException as exc:
            bad.append([text, f"{type(exc).__name__}: {str(exc)[:300]}"])
        worst[0] = max(worst[0], time.perf_counter() - start)
    worst[1] = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024
    print(json.dumps({"outcomes": outcomes, "bad": bad, "seconds": worst[0], "peak": worst[1]}))
    """
)


def _hostile_expression(rng):
    """A text of the grammar built to be expensive: big literals, towers of powers, long sums and maxima."""
    big = lambda: rng.choice(["9" * rng.randint(1, 300), "1" + "0" * rng.randint(1, 300), f"{rng.random():.17g}",  # noqa: E731
                              "1e" + str(rng.randint(-320, 320)), str(rng.randint(2, 200))])

    def expr(depth):
        if depth <= 0 or rng.random() < 0.2:
            return rng.choice(["d", big(), "pi", "E", "(d+1)"])
        kind = rng.randrange(7)
        if kind == 0:
            return f"({expr(depth - 1)})**{rng.choice(['100', '99.5', '-100', '2', '(1/2)', big()])}"
        if kind == 1:
            return f"{expr(depth - 1)}{rng.choice('+-*/')}{expr(depth - 1)}"
        if kind == 2:
            return f"{rng.choice(['log', 'exp', 'sqrt', 'sin', 'cos', 'abs'])}({expr(depth - 1)})"
        if kind == 3:
            return f"{rng.choice(['max', 'min'])}({','.join(expr(depth - 2) for _ in range(rng.randint(2, 30)))})"
        if kind == 4:
            return f"exp({big()}*log({expr(depth - 1)}))"
        if kind == 5:
            return f"(1+1/{big()})**{rng.randint(1, 100)}*{expr(depth - 1)}"
        return f"-{rng.random() * 3:.3f}*log(d+1)+{expr(depth - 1)}"

    return expr(rng.randint(1, 6))[:1000]


@pytest.mark.slow
def test_fuzz_of_hostile_expressions_under_a_cap(tmp_path):
    rng = random.Random(21)
    texts = [_hostile_expression(rng) for _ in range(400)]
    proc = subprocess.run([sys.executable, "-c", FUZZ_RUNNER], input=json.dumps(texts), capture_output=True, text=True,
                          env=_env(), cwd=tmp_path, timeout=1800, preexec_fn=_cap_address_space)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert not report["bad"], report["bad"][:5]
    assert report["seconds"] < SECONDS and report["peak"] < PEAK_BYTES, report
    assert report["outcomes"]["parsed"] > 0 and report["outcomes"]["refused"] > 0, report
    print(f"\n{len(texts)} hostile expressions: {report['outcomes']}, largest {report['seconds']:.2f} s, "
          f"{report['peak'] / 2**20:.0f} MiB peak")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_command_writing_to_a_full_stderr_is_not_stopped_by_it(monkeypatch):
    """Progress lines and warnings go to stderr during a command; a full (or closed) stderr drops them."""
    import io

    from otprior._output import guarded_stderr

    full = open("/dev/full", "w")  # noqa: SIM115  (closed below)
    try:
        for stream in (full, None):
            monkeypatch.setattr(sys, "stderr", stream)
            with guarded_stderr():
                sys.stderr.write("progress " * 10_000)
                sys.stderr.flush()
                print("a log line", file=sys.stderr, flush=True)
            assert sys.stderr is stream
    finally:
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        full.close()


def test_a_model_type_holding_escape_sequences_reaches_no_terminal(tmp_path, capsys):
    """A config's ``model_type`` that clears the screen and sets the title is printed escaped."""
    torch = pytest.importorskip("torch")
    safetensors = pytest.importorskip("safetensors.torch")
    from otprior import cli

    safetensors.save_file({"transformer.h.0.self_attention.query_key_value.weight": torch.zeros(12, 4)}, str(tmp_path / "model.safetensors"))
    hostile = "\x1b]0;owned\x07\x1b[2J\x9b31mbloom"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": hostile, "n_head": 2, "n_layer": 1, "hidden_size": 4}))
    code = cli.main(["checkpoint", str(tmp_path), "--scheme", "alibi", "--num-heads", "2"])
    out, err = capsys.readouterr()
    assert code in (0, 2) and "Traceback" not in err, err
    assert not _controls(out) and not _controls(err), (out + err)[:500]
    if code == 0 and "owned" in out:
        assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m" in out
