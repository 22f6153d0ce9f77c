"""Precision is local: 8 threads with mixed ``dps=`` while the caller sits at ``mpmath.mp.dps = 3``.

Each thread's answer must equal a single-threaded reference (computed beforehand at 30 more
digits, by an independent route where one is cheap) to the digits it asked for, and the
caller's mpmath context, warnings filters and numpy error state must be unchanged afterwards.
"""

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import mpmath
import numpy as np
import pytest
import sympy as sp

import otprior
from otprior import symbolic

DPS = (20, 50, 100, 30, 80, 40, 60, 25)  # one per thread
ROUNDS = 2  # calls per thread, so that the threads overlap (the barrier starts them together)


def _ctx(dps):
    ctx = mpmath.MPContext()
    ctx.dps = dps
    return ctx


def _hurwitz_window_mass(dps, window, n, alpha, offset):
    # independent route: m = (zeta(a, o) - zeta(a, W + o)) / (zeta(a, o) - zeta(a, n + o))
    ctx = _ctx(dps + 30)
    a, o = ctx.mpf(alpha), ctx.mpf(offset)
    head = ctx.zeta(a, o) - ctx.zeta(a, window + o)
    return head / (ctx.zeta(a, o) - ctx.zeta(a, n + o))


def _hurwitz_distant_mass(dps, window, n, alpha, offset):
    ctx = _ctx(dps + 30)
    a, o = ctx.mpf(alpha), ctx.mpf(offset)
    tail = ctx.zeta(a, window + o) - ctx.zeta(a, n + o)
    return tail / (ctx.zeta(a, o) - ctx.zeta(a, n + o))


def _gammainc_inverse_reference(dps, a, y):
    ctx = _ctx(dps + 30)
    am, ym = (ctx.mpf(int(t.split("/")[0])) / int(t.split("/")[1]) for t in (a, y))
    return ctx.findroot(lambda x: ctx.gammainc(am, 0, x, regularized=True) - ym, ctx.mpf(1))


CASES = {
    # name: (call(dps) -> number, reference(dps) -> number)
    "window_mass": (
        lambda dps: otprior.window_mass(64, 10**6, 1.05, offset=1.1, dps=dps),
        lambda dps: _hurwitz_window_mass(dps, 64, 10**6, 1.05, 1.1),
    ),
    "distant_mass": (
        lambda dps: otprior.distant_mass(16, 10**5, 0.75, offset=2.5, dps=dps),
        lambda dps: _hurwitz_distant_mass(dps, 16, 10**5, 0.75, 2.5),
    ),
    "ot_prior": (
        lambda dps: otprior.ot_prior(32, 0.5, dps=dps)[3],
        lambda dps: otprior.ot_prior(32, 0.5, dps=dps + 30)[3],
    ),
    "ot_window_mass": (
        # the window mass from the prior's entries at the thread's precision (Theorem 2)
        lambda dps: sum(otprior.ot_prior(32, 0.7, dps=dps).values[:4]),
        lambda dps: sum(otprior.ot_prior(32, 0.7, dps=dps + 30).values[:4]),
    ),
    "symbolic_gamma_inverse": (
        lambda dps: symbolic.RegularizedGammaInverse(sp.Rational(3, 2), sp.Rational(1, 3)).evalf(dps + 5),
        lambda dps: _gammainc_inverse_reference(dps, "3/2", "1/3"),
    ),
}

# distant_mass shares window_mass's code and ot_window_mass ot_prior's: those two run in the slow set (default-run budget)
PARAMS = [
    pytest.param(name, marks=pytest.mark.slow) if name in ("distant_mass", "ot_window_mass") else name for name in CASES
]


def _agree(value, reference, dps):
    ctx = _ctx(dps + 30)
    value = ctx.mpf(str(value)) if not isinstance(value, (int, float)) else ctx.mpf(value)
    reference = ctx.mpf(reference)
    return abs(value - reference) <= abs(reference) * ctx.mpf(10) ** (-dps + 1)


def run_scenario(name):
    """8 threads with mixed ``dps`` while this thread sits at ``mp.dps = 3``; returns what went wrong."""
    call, reference = CASES[name]
    references = {dps: reference(dps) for dps in set(DPS)}  # single-threaded, before anything else

    filters_before = list(warnings.filters)
    errstate_before = np.geterr()
    mpmath.mp.dps = 3
    prec_before = mpmath.mp.prec

    barrier = threading.Barrier(len(DPS))
    results, errors = {}, []

    def worker(i, dps):
        try:
            barrier.wait()
            results[i] = [call(dps) for _ in range(ROUNDS)]
        except Exception as exc:  # reported with the thread's precision
            errors.append((dps, repr(exc)))

    threads = [threading.Thread(target=worker, args=(i, dps)) for i, dps in enumerate(DPS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    problems = []
    if not (mpmath.mp.dps == 3 and mpmath.mp.prec == prec_before):
        problems.append(f"global mpmath precision changed to dps={mpmath.mp.dps}")
    if list(warnings.filters) != filters_before:
        problems.append("warnings.filters changed")
    if np.geterr() != errstate_before:
        problems.append(f"numpy error state changed to {np.geterr()}")
    problems += [f"dps={dps}: {exc}" for dps, exc in errors]
    problems += [
        f"dps={dps}, round {k}: off"
        for i, dps in enumerate(DPS)
        for k, value in enumerate(results.get(i, []))
        if not _agree(value, references[dps], dps)
    ]
    return problems


@pytest.mark.parametrize("name", PARAMS)
def test_threads_with_mixed_precision_and_a_caller_at_three_digits(name):
    # in a child process, so that a case that never finishes (a loop whose stopping test is
    # evaluated at the caller's 3 digits) is stopped by the timeout and cannot hold the session
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run(
            [sys.executable, __file__, name], capture_output=True, text=True, timeout=20, env=env, cwd=root
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: the threads did not finish within 20 s at a caller's mp.dps = 3")
    assert done.returncode == 0, done.stderr[-2000:]
    problems = json.loads(done.stdout.strip().splitlines()[-1])
    assert problems == [], problems


def test_float_paths_leave_global_state_alone():
    filters_before = list(warnings.filters)
    errstate_before = np.geterr()
    mpmath.mp.dps = 3
    results = []

    def worker():
        results.append(
            (
                otprior.window_mass_bounds(8, 4096, 1.2, offset=1.5),
                otprior.scale_invariant_cdf(0.25, 0.5),
                otprior.ot_window_mass(4, 64, 0.5),
            )
        )

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert mpmath.mp.dps == 3
    assert list(warnings.filters) == filters_before
    assert np.geterr() == errstate_before
    assert len(results) == 8 and all(r == results[0] for r in results)


if __name__ == "__main__":
    print(json.dumps(run_scenario(sys.argv[1])))
