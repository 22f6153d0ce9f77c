"""Execute the tutorial notebooks once per test session, for tests/test_notebooks.py and
tests/test_docs.py (which builds the documentation from these outputs instead of running the
notebooks again)."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "notebooks").glob("[0-9]*.py"))


def _environment() -> dict:
    """The kernel imports otprior from this checkout, whatever is installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def execute(script: Path):
    """Execute one jupytext percent script as a notebook (cwd ``notebooks/``); return the notebook."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(script, fmt="py:percent")
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(script.parent)}})
    client.execute(env=_environment())  # passed on to the kernel's process
    return nb


@functools.cache
def executed_folder() -> Path:
    """A temporary folder with every notebook executed, ``<stem>.ipynb``; made once per session."""
    import nbformat

    folder = Path(tempfile.mkdtemp(prefix="otprior-notebooks-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for script in SCRIPTS:
        nbformat.write(execute(script), folder / f"{script.stem}.ipynb")
    return folder
