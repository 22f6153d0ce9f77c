"""proofs/: every file cites tests that exist, and the index lists every file."""

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROOFS = sorted(p for p in (ROOT / "proofs").glob("*.md") if p.name != "README.md")
CITATION = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


@functools.cache
def _test_names(path):
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_proof_cites_existing_tests():
    assert PROOFS
    for proof in PROOFS:
        cites = CITATION.findall(proof.read_text())
        assert cites, f"{proof.name} cites no test"
        for file, name in cites:
            assert (ROOT / file).exists(), f"{proof.name}: {file} does not exist"
            assert name in _test_names(ROOT / file), f"{proof.name}: {file}::{name} does not exist"


def test_index_lists_every_proof():
    index = (ROOT / "proofs" / "README.md").read_text()
    for proof in PROOFS:
        assert f"]({proof.name})" in index, proof.name
