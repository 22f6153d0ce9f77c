"""A module file as it was at a given commit, loaded from git into this process (for bit-identity tests)."""

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
    exec(compile(src, f"{commit[:8]}:{path}", "exec"), mod.__dict__)
    sys.modules.setdefault(name, mod)
    return mod
