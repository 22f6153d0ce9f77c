"""Execute the tutorial notebooks once per test session, for tests/test_notebooks.py and
tests/test_docs.py (which builds the documentation from these outputs instead of running the
notebooks again)."""

from __future__ import annotations

import atexit
import concurrent.futures
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
    """Execute one jupytext percent script as a notebook (cwd ``notebooks/``); return the notebook.

    Safe to call from several threads at once: each call runs its own kernel on its own event loop.
    """
    import asyncio

    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(script, fmt="py:percent")
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(script.parent)}})
    asyncio.run(client.async_execute(env=_environment()))  # env is passed on to the kernel's process
    return nb


@functools.cache
def executed_folder() -> Path:
    """A temporary folder with every notebook executed, ``<stem>.ipynb``; made once per session."""
    import nbformat

    folder = Path(tempfile.mkdtemp(prefix="otprior-notebooks-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    # the kernels run side by side: most of a notebook's time is its own process's imports and
    # sympy derivations, so the test run's second core does useful work meanwhile
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(SCRIPTS) or 1) as pool:
        for script, nb in zip(SCRIPTS, pool.map(execute, SCRIPTS), strict=True):
            nbformat.write(nb, folder / f"{script.stem}.ipynb")
    return folder
