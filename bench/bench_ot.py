"""Benchmarks of the causal OT operator and the constant-score prior.

Every figure is a ratio against a baseline run in the same process:
- ``ot_prior(2048, 0.5)`` against the Sinkhorn fixed point of the same prefix (target >= 100x);
- ``ot_prior(10**6, 0.9)`` wall time (target: seconds);
- ``causal_ot_attention`` at n = 512 against POT solving each prefix from scratch
  (targets >= 3x at rho = 0.5, >= 10x at rho = 0.9, same answer to 1e-9);
- growth of ``causal_ot_attention`` time with n and rho;
- blocks of 128 prefixes solved cold against one block of all prefixes (n = 1024);
- Anderson memory chosen by rho against a fixed memory of 6 (rho = 0.99);
- the certified (Arb) constant-score prior against the double route.

Run: ``python bench/bench_ot.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import otprior


def timed(func, repeat=1):
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        out = func()
        best = min(best, time.perf_counter() - start)
    return best, out


def pot_prefixes(S, rho, tol):
    import ot

    n = S.shape[0]
    rows = np.zeros((n, n))
    for t in range(1, n + 1):
        M = np.where(np.tril(np.ones((t, t), dtype=bool)), -S[:t, :t], 1e3)
        plan = ot.sinkhorn_unbalanced(
            np.ones(t), np.ones(t), M, reg=1.0, reg_m=(np.inf, rho / (1 - rho)), numItermax=100_000, stopThr=tol
        )
        rows[t - 1, :t] = plan[-1]
    return rows


def main(quick=False):
    print("== ot_prior vs the Sinkhorn fixed point of the same prefix (n = 2048, rho = 0.5)")
    n = 2048
    t_fast, prior = timed(lambda: otprior.ot_prior(n, 0.5), repeat=5)
    t_sink, fp = timed(lambda: otprior.causal_ot_fixed_point(np.zeros((n, n)), 0.5, tol=1e-13))
    sink_row = fp.plan(np.zeros((n, n)))[-1, ::-1]
    print(f"ot_prior {t_fast * 1e3:.2f} ms, Sinkhorn {t_sink * 1e3:.0f} ms, ratio {t_sink / t_fast:.0f}x, "
          f"max |diff| {np.max(np.abs(prior - sink_row)):.1e}")

    print("== ot_prior(10**6, 0.9)")
    t_big, res = timed(lambda: otprior.ot_prior(10**6, 0.9))
    print(f"{t_big:.2f} s, {res.iterations} sweeps, certified log error {res.log_error_bound:.1e}")

    print("== certified ot_prior(n, rho, dps=16) against the double route")
    for n, rho in ((256, 0.5), (1024, 0.99), (64, 0.9999)):
        t_f, _ = timed(lambda n=n, rho=rho: otprior.ot_prior(n, rho), repeat=3)
        t_c, _ = timed(lambda n=n, rho=rho: otprior.ot_prior(n, rho, dps=16))
        print(f"n={n}, rho={rho}: double {t_f * 1e3:.1f} ms, certified {t_c:.2f} s, ratio {t_c / t_f:.0f}x")

    blocks_and_memory(quick)

    print("== causal_ot_attention vs POT per prefix from scratch (n = 512)")
    rng = np.random.default_rng(0)
    n = 256 if quick else 512
    S = rng.normal(size=(n, n))
    for rho in (0.5, 0.9):
        t_ours, A = timed(lambda rho=rho: otprior.causal_ot_attention(S, rho, dual_tol=1e-12), repeat=2)
        t_pot, B = timed(lambda rho=rho: pot_prefixes(S, rho, 1e-12))
        print(f"rho={rho}: ours {t_ours:.3f} s, POT {t_pot:.2f} s, ratio {t_pot / t_ours:.1f}x, "
              f"max |diff| {np.max(np.abs(A - B)):.1e}")

    print("== growth of causal_ot_attention with n and rho (seconds; ratio to n/2)")
    for rho in (0.3, 0.6, 0.9):
        prev = None
        cells = []
        for n in (128, 256, 512) if quick else (128, 256, 512, 1024):
            S = rng.normal(size=(n, n))
            t, _ = timed(lambda S=S, rho=rho: otprior.causal_ot_attention(S, rho, dual_tol=1e-12))
            cells.append(f"n={n}: {t:.3f}" + ("" if prev is None else f" ({t / prev:.1f}x)"))
            prev = t
        print(f"rho={rho}: " + ", ".join(cells))


def blocks_and_memory(quick=False):
    """Ratios for the two design choices of the operator, measured in this process."""
    import importlib

    co = importlib.import_module("otprior.causal_ot")
    an = importlib.import_module("otprior._anderson")
    rng = np.random.default_rng(1)
    n = 512 if quick else 1024
    S = rng.normal(size=(n, n))
    t_blocks, A = timed(lambda: co._attention_one(S, 0.5, 1e-12, 10_000, "prefix", True, block=128))
    t_one, B = timed(lambda: co._attention_one(S, 0.5, 1e-12, 10_000, "prefix", True, block=n))
    print(f"== blocks of 128 prefixes vs one block of {n}: {t_blocks:.2f} s vs {t_one:.2f} s, "
          f"ratio {t_one / t_blocks:.2f}x, max |diff| {np.max(np.abs(A - B)):.1e}")
    n = 256 if quick else 512
    S = rng.normal(size=(n, n))
    t_kernel, A = timed(lambda: co._attention_one(S, 0.6, 1e-12, 10_000, "prefix", True))
    spread = co._KERNEL_SPREAD
    co._KERNEL_SPREAD = -1.0  # force the log-domain path on the same input
    try:
        t_log, B = timed(lambda: co._attention_one(S, 0.6, 1e-12, 10_000, "prefix", True))
    finally:
        co._KERNEL_SPREAD = spread
    print(f"== log-domain path vs kernel path, n = {n}, rho = 0.6: {t_log:.2f} s vs {t_kernel:.2f} s, "
          f"ratio {t_log / t_kernel:.2f}x, max |diff| {np.max(np.abs(A - B)):.1e}")
    chosen = an.anderson_memory(0.99)
    t_chosen, A = timed(lambda: otprior.causal_ot_attention(S, 0.99))
    original = co.anderson_memory
    co.anderson_memory = lambda rho: 6
    try:
        t_fixed, B = timed(lambda: otprior.causal_ot_attention(S, 0.99))
    finally:
        co.anderson_memory = original
    print(f"== Anderson memory by rho ({chosen}) vs fixed 6 at rho = 0.99, n = {n}: {t_chosen:.2f} s vs "
          f"{t_fixed:.2f} s, ratio {t_fixed / t_chosen:.2f}x, max |diff| {np.max(np.abs(A - B)):.1e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
