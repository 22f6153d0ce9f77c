"""A module file as it was at a given commit, loaded from git into this process, and the comparison the torch
bit-identity tests make with it."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[1]


def module_at(commit, path, name, package):
    """``path`` at ``commit`` as the module ``name`` inside ``package`` (its relative imports resolve to this
    checkout's helpers); the calling test is skipped where the checkout has no git history."""
    try:
        src = subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=_ROOT, capture_output=True, text=True, check=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip(f"commit {commit[:8]} is not available (no git history)")
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = package
    sys.modules.setdefault(name, mod)  # before it runs: a dataclass looks its module up while it is defined
    exec(compile(src, f"{commit[:8]}:{path}", "exec"), mod.__dict__)
    return mod


def values_and_grads(fn, S, W, rho, **kw):
    """``fn(S, rho, **kw)`` and the gradient of ``sum(fn(S) * W)`` with respect to the scores ``S`` (torch)."""
    Sg = S.clone().requires_grad_()
    A = fn(Sg, rho, **kw)
    (A * W).sum().backward()
    return A.detach(), Sg.grad


def assert_same_bits(reference_fn, fn, S, W, rho, **kw):
    """Values and gradients of ``fn`` and ``reference_fn`` equal bit for bit."""
    import torch

    A0, G0 = values_and_grads(reference_fn, S, W, rho, **kw)
    A1, G1 = values_and_grads(fn, S, W, rho, **kw)
    assert torch.equal(A0, A1), (tuple(S.shape), rho, S.dtype, kw)
    assert torch.equal(G0, G1), (tuple(S.shape), rho, S.dtype, kw)
