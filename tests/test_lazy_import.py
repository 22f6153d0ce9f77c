"""``import otprior`` is light: scipy and python-flint are loaded on first use of a public name."""

import subprocess
import sys


def test_import_loads_neither_scipy_nor_flint_and_names_resolve():
    code = (
        "import sys, otprior\n"
        "heavy = [m for m in ('scipy', 'scipy.special', 'flint', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "import otprior.ot_prior\n"  # binds the submodule on the package: the function must stay
        "assert callable(otprior.ot_prior) and otprior.ot_prior.__name__ == 'ot_prior'\n"
        "from otprior import ot_prior, causal_ot_attention, encodings, Enclosure\n"
        "assert otprior.ot_prior is ot_prior and encodings.__name__ == 'otprior.encodings'\n"
        "assert all(hasattr(otprior, name) for name in otprior.__all__)\n"
        "assert set(otprior.__all__) <= set(dir(otprior))\n"
        "try:\n    otprior.no_such_name\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
