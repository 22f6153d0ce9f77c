"""Run every computer check of proofs/checks: a proof whose algebra goes wrong fails CI."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("proof_checks", ROOT / "proofs" / "checks" / "checks.py")
checks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checks)


def test_there_are_checks():
    assert len(checks.ALL_CHECKS) >= 10


@pytest.mark.parametrize("check", checks.ALL_CHECKS, ids=lambda f: f.__name__)
def test_check(check):
    check()


def test_every_check_is_cited_by_a_proof():
    text = "".join(p.read_text() for p in (ROOT / "proofs").glob("*.md"))
    for check in checks.ALL_CHECKS:
        assert check.__name__ in text, f"{check.__name__} is not cited in proofs/"
