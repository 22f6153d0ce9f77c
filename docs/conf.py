"""Sphinx configuration of otprior's documentation site.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages that mirror files elsewhere in the repository are written here at build time, never
copied into git (``docs/.gitignore``):

* ``proofs/<name>.md`` includes ``../proofs/<name>.md`` (MyST ``{include}``), so the proofs are
  typeset from the one copy at the repository root;
* ``notebooks/<name>.ipynb`` is the jupytext percent script ``../notebooks/<name>.py`` with its
  outputs. This file executes it (nbclient, with CurveZMQ-encrypted kernel connections where the
  kernel supports them, so that no kernel warns of plain TCP) unless ``OTPRIOR_EXECUTED_NOTEBOOKS``
  names a folder holding the same notebook already executed (same code cells), as the test suite
  does to run each notebook once, or the page written by a previous build was executed from the
  same script and the same ``otprior`` source; MyST-NB then renders it without executing;
* ``cli.md`` is the ``--help`` text of every ``otprior`` command.

Maths is typeset by MathJax served from the site itself (``sphinx-mathjax-offline``, in the
``docs`` extra), so the pages need no network. The ``docs`` extra alone builds the site.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this checkout, not another installed copy
# ... and execute the notebooks against it too (their kernels inherit the environment).
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])

import otprior  # noqa: E402

project = "otprior"
author = "otprior contributors"
copyright = "otprior contributors"
release = version = otprior.__version__

extensions = [
    "myst_nb",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax copied into _static: maths typeset with no network
    "sphinx.ext.viewcode",
    "matplotlib.sphinxext.plot_directive",
    "sphinx_copybutton",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_templates", "**.ipynb_checkpoints", ".gitignore"]
html_theme = "furo"
html_title = f"otprior {release}"
html_static_path: list[str] = []

# MyST: $...$ and $$...$$ maths in the proofs and notebooks; headings get anchors.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_dmath_double_inline = True  # the proofs write $$...$$ display maths inside paragraphs
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]

# MyST-NB renders the notebooks that this file executes (below); a failing cell fails the build.
nb_execution_mode = "off"
nb_merge_streams = True

# API reference from the docstrings (numpydoc format).
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

# Gallery figures: the plot directive runs each example at build time from the repository root.
plot_working_directory = str(ROOT)
plot_include_source = True
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 110)]


def _write(path: Path, text: str) -> None:
    """Write only when the content changes, so Sphinx rebuilds only what changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _proof_pages() -> None:
    names = sorted(p.stem for p in (ROOT / "proofs").glob("*.md") if p.stem != "README")
    for name in names:
        _write(DOCS / "proofs" / f"{name}.md", f"```{{include}} ../../proofs/{name}.md\n```\n")
    toctree = "\n".join(names)
    _write(
        DOCS / "proofs" / "index.md",
        f"```{{include}} ../../proofs/README.md\n```\n\n```{{toctree}}\n:hidden:\n\n{toctree}\n```\n",
    )


def _code_cells(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _source_key(script: Path) -> str:
    """What a notebook's outputs depend on: its script and the ``otprior`` source it imports."""
    digest = hashlib.sha256(script.read_bytes())
    for path in sorted((ROOT / "otprior").rglob("*.py")):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _execute(nb, cwd: Path) -> None:
    """Execute ``nb`` in place in a fresh kernel started in ``cwd``."""
    import zmq
    from nbclient import NotebookClient
    from traitlets.config import Config

    config = Config()
    if zmq.has("curve"):  # the kernel manager provisions CurveZMQ keys when the kernel supports them
        config.KernelManager.transport_encryption = "auto"
    NotebookClient(nb, config=config, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()


def _notebook_pages() -> None:
    import jupytext
    import nbformat

    executed = os.environ.get("OTPRIOR_EXECUTED_NOTEBOOKS")
    for script in sorted((ROOT / "notebooks").glob("[0-9]*.py")):
        nb = jupytext.read(script, fmt="py:percent")
        key = _source_key(script)
        page = DOCS / "notebooks" / f"{script.stem}.ipynb"
        ran = None
        done = Path(executed) / f"{script.stem}.ipynb" if executed else None
        if done is not None and done.exists():
            candidate = nbformat.read(done, as_version=4)
            if _code_cells(candidate) == _code_cells(nb):  # executed with these very cells: take its outputs
                ran = candidate
        if ran is None and page.exists():
            candidate = nbformat.read(page, as_version=4)
            if candidate.metadata.get("otprior", {}).get("source") == key:  # a previous build, same inputs
                ran = candidate
        if ran is None:
            ran = nbformat.from_dict(nb)
            _execute(ran, script.parent)
        outputs = iter(c for c in ran.cells if c.cell_type == "code")
        for cell in nb.cells:
            if cell.cell_type == "code":
                done_cell = next(outputs)
                cell.outputs, cell.execution_count = done_cell.outputs, done_cell.execution_count
        nb.metadata["mystnb"] = {"execution_mode": "off"}
        nb.metadata["otprior"] = {"source": key}
        _write(page, nbformat.writes(nb))


def _cli_page() -> None:
    import argparse

    from otprior.cli import build_parser, main

    def help_text(argv):
        buf, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            try:
                main([*argv, "--help"])
            except SystemExit as exc:
                if exc.code not in (0, None):
                    raise RuntimeError(f"otprior {' '.join(argv)} --help failed: {err.getvalue().strip()}") from None
        return buf.getvalue().rstrip()

    top = help_text([])
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parts = [
        "# Command line\n",
        "`otprior` prints what the library returns; every command takes `--json` for machine-readable "
        "output. This page is the `--help` text of the installed version.\n",
        f"```text\n$ otprior --help\n{top}\n```\n",
    ]
    for cmd in sub.choices:
        parts.append(f"## `otprior {cmd}`\n\n```text\n$ otprior {cmd} --help\n{help_text([cmd])}\n```\n")
    _write(DOCS / "cli.md", "\n".join(parts))


_proof_pages()
_notebook_pages()
_cli_page()
