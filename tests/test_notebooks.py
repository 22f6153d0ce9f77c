"""The tutorial notebooks: readable scripts, executed top to bottom, every figure shown.

The notebooks are jupytext percent scripts (``notebooks/NN_*.py``); they are executed once per
session by ``tests/_notebooks.py``, whose outputs ``tests/test_docs.py`` also renders.
"""

import re
import subprocess
import sys

import pytest
from _notebooks import ROOT, SCRIPTS, executed_folder

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("jupytext")


def _executed(script):
    return nbformat.read(executed_folder() / f"{script.stem}.ipynb", as_version=4)


def test_there_are_four_stories():
    names = [s.stem for s in SCRIPTS]
    assert len(names) == 4
    assert [n[:3] for n in names] == ["01_", "02_", "03_", "04_"]


def test_no_committed_ipynb_and_no_generator():
    """The scripts are the only source: no stored notebooks to drift, no escaped-string builder."""
    tracked = subprocess.run(["git", "ls-files", "notebooks"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    assert not [name for name in tracked.stdout.split() if name.endswith(".ipynb")]
    assert not (ROOT / "notebooks" / "build_notebooks.py").exists()


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_is_percent_format_and_lint_clean(script):
    text = script.read_text()
    assert "format_name: percent" in text
    assert text.count("# %% [markdown]") >= 2 and text.count("\n# %%\n") >= 2
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--quiet", str(script)], capture_output=True, text=True)
    if "No module named ruff" in ruff.stderr:
        pytest.skip("ruff is not installed")
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_executes_and_shows_every_figure(script):
    nb = _executed(script)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        draws = "plots.plot_" in cell.source or "plt.show()" in cell.source
        # a cell that draws shows its figure there, once (not later, not twice)
        assert len(images) == (1 if draws else 0), cell.source[:80]


def test_digits_printed_are_the_digits_asked_for():
    """Notebook 02 prints the window mass at 40 digits: 40 significant digits must appear."""
    nb = _executed(next(s for s in SCRIPTS if s.stem.startswith("02_")))
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    found = re.search(r"40 digits:\s*0\.(\d+)", text)
    assert found, text
    assert len(found.group(1).lstrip("0")) == 40


def test_certified_bracket_is_printed_with_ends_that_differ():
    """Notebook 03 prints the margin's certified bracket rounded outward: two different ends
    that still enclose the library's bracket."""
    import otprior

    nb = _executed(next(s for s in SCRIPTS if s.stem.startswith("03_")))
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    found = re.search(r"certified bracket: \[([0-9.]+), ([0-9.]+)\]", text)
    assert found, text
    lo, hi = (float(x) for x in found.groups())
    bracket = otprior.margin_for(64, (512, 8192), 0.05).bracket
    assert found.group(1) != found.group(2) and lo <= bracket[0] and bracket[1] <= hi
    assert hi - lo < 10 * (bracket[1] - bracket[0])  # printed to the bracket's own precision


def test_every_figure_has_alt_text():
    """A cell that draws carries the figure's description (``mystnb.image.alt``), which the
    documentation site gives its image instead of a file hash."""
    import jupytext

    for script in SCRIPTS:
        for cell in jupytext.read(script, fmt="py:percent").cells:
            if cell.cell_type == "code" and ("plots.plot_" in cell.source or "plt.show()" in cell.source):
                alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
                assert len(alt.split()) >= 8, (script.stem, cell.source[:60])
