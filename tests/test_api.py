"""The public face: __all__ resolves, the import is light, docstrings exist."""

import subprocess
import sys

import pytest

import otprior


def test_all_names_resolve_and_are_documented():
    for name in otprior.__all__:
        obj = getattr(otprior, name)
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, name


def test_import_is_light():
    code = "import sys, otprior; print(any(m in sys.modules for m in ('torch', 'matplotlib', 'ot')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_errors_are_value_errors():
    assert issubclass(otprior.DomainError, ValueError)
    with pytest.raises(ValueError):
        otprior.ot_prior(-1, 0.5)
