"""The documentation site builds with warnings as errors, and shows what it promises.

The build runs the README's command (``python -m sphinx -W --keep-going -b html docs
docs/_build/html``) into a temporary folder, using the notebooks executed once for this test
session (``tests/_notebooks.py``) instead of running them again.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _notebooks import ROOT, SCRIPTS, executed_folder

pytest.importorskip("sphinx")
pytest.importorskip("myst_nb")
pytest.importorskip("furo")
pytest.importorskip("numpydoc")

DOCS = ROOT / "docs"
# Proof pages whose source still breaks the typesetting, and why.
UNTYPESET: dict[str, str] = {}
slow = pytest.mark.slow  # the build itself: about 20 s of CPU on top of the notebooks it shows


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["OTPRIOR_EXECUTED_NOTEBOOKS"] = str(executed_folder())
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    return out / "html"


def _dollars_left(page):
    """Dollar signs left in a page's text once maths, code and highlighted blocks are removed."""
    body = page[page.find("<article"):page.find("</article>")]
    body = re.sub(r'<(span|div) class="(math|highlight)[^"]*">.*?</\1>', "", body, flags=re.S)
    body = re.sub(r"<(code|pre)[^>]*>.*?</\1>", "", body, flags=re.S)
    return body.count("$")


@slow
def test_every_proof_is_a_page_with_typeset_maths(site):
    proofs = sorted(p.stem for p in (ROOT / "proofs").glob("*.md") if p.stem != "README")
    assert len(proofs) >= 10
    for name in proofs:
        page = (site / "proofs" / f"{name}.html").read_text()
        first = (ROOT / "proofs" / f"{name}.md").read_text().splitlines()[0].lstrip("# ").split(" ")[0]
        assert first in page
        if "$" in (ROOT / "proofs" / f"{name}.md").read_text():
            assert 'class="math' in page, name  # MathJax-ready maths
        if name in UNTYPESET:  # once the source is fixed, remove it from UNTYPESET
            assert _dollars_left(page), f"{name} is typeset now: remove it from UNTYPESET"
        else:
            assert not _dollars_left(page), f"{name}: a dollar sign left untypeset"
    assert "Theorem 8" in (site / "proofs" / "index.html").read_text()


@slow
def test_every_notebook_is_a_page_with_its_figures(site):
    for script in SCRIPTS:
        page = (site / "notebooks" / f"{script.stem}.html").read_text()
        assert not _dollars_left(page), script.stem
        images = re.findall(r"<img[^>]+src=\"([^\"]+\.png)\"", page)
        drawing = script.read_text().count("plots.plot_") + script.read_text().count("plt.show()")
        assert len(images) >= min(drawing, 1), script.stem
        for src in images:
            assert (site / "notebooks" / src).resolve().exists(), src
        for alt in re.findall(r"<img alt=\"([^\"]*)\"[^>]+src=\"[^\"]+\.png\"", page):  # words, not a file hash
            assert len(alt.split()) >= 8 and not re.fullmatch(r"[0-9a-f]{16,}(\.png)?", alt), (script.stem, alt)


@slow
def test_api_reference_follows_the_package(site):
    import otprior

    api = site / "api"
    assert (api / "otprior.html").exists()
    text = (api / "otprior.html").read_text()
    for name in otprior.__all__:
        assert name in text, name
    assert (api / "otprior.plots.html").exists()


@slow
def test_gallery_draws_every_figure_function(site):
    from otprior import plots

    text = (DOCS / "gallery.rst").read_text()
    drawn = [name for name in plots.__all__ if name.startswith("plot_")]
    missing = [name for name in drawn if f"plots.{name}(" not in text]
    assert not missing
    page = (site / "gallery.html").read_text()
    images = set(re.findall(r"<img[^>]+src=\"([^\"]+\.png)\"", page))
    assert len(images) == text.count(".. plot::")  # one distinct image per example
    for src in images:
        assert (site / src).exists(), src


@slow
def test_command_line_page_lists_every_command(site):
    page = (site / "cli.html").read_text()
    for cmd in ("margin", "classify", "mass", "report"):
        assert f"otprior {cmd}" in page


def _generated_from_the_repository(target: Path) -> bool:
    """Pages that docs/conf.py writes at build time from the repository's own sources
    (docs/.gitignore lists them): they exist in a clean checkout only after a build."""
    target = target.resolve()
    if target == (DOCS / "cli.md").resolve():
        return True  # the --help text of every command
    if target.parent == (DOCS / "proofs").resolve():
        return target.name == "index.md" or (ROOT / "proofs" / target.name).exists()
    if target.parent == (DOCS / "notebooks").resolve():
        return (ROOT / "notebooks" / f"{target.stem}.py").exists()
    return False


def test_nothing_in_the_repository_cites_a_file_outside_it():
    """Every relative Markdown link in the docs, notebooks and proofs points at a file that exists."""
    sources = [*DOCS.glob("*.md"), *(ROOT / "proofs").glob("*.md"), *(ROOT / "notebooks").glob("*.md"), *SCRIPTS,
               ROOT / "CONTRIBUTING.md", ROOT / "README.md"]
    bad = []
    for path in sources:
        for target in re.findall(r"\]\(([\w./-]+\.\w+)(?:#[^)]*)?\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            if not (path.parent / target).exists() and not _generated_from_the_repository(path.parent / target):
                bad.append(f"{path.relative_to(ROOT)} -> {target}")
    assert not bad


def test_license_is_an_spdx_expression():
    """``project.license`` as a table stops working in setuptools after 2027-02-18 (PEP 639)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["license"] == "BSD-3-Clause"
    assert "setuptools>=77" in meta["build-system"]["requires"]  # the first to read the string form


@slow
def test_pages_typeset_maths_with_no_network(site):
    """MathJax is served from the site itself; no page loads a script from the network."""
    pages = list(site.rglob("*.html"))
    assert len(pages) > 20
    with_maths = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]+src=\"(https?:)?//", text), page.name
        for src in re.findall(r"<script[^>]+src=\"([^\"?]*mathjax[^\"?]*)\"", text):
            with_maths += 1
            assert (page.parent / src).resolve().is_file(), (page.name, src)
    assert with_maths >= 10  # the proofs at least


@slow
def test_notebook_kernels_start_without_warnings(tmp_path):
    """docs/conf.py executes the notebooks in kernels that print nothing to the build log (no
    IPKernelApp warning of plain TCP). Its ``_execute`` is taken from the file and run alone."""
    import ast
    import textwrap

    tree = ast.parse((DOCS / "conf.py").read_text())
    func = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "_execute")
    run = textwrap.dedent("""
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
        _execute(nb, Path("."))
        print(nb.cells[0].outputs[0]["text"].strip())
    """)
    script = "from pathlib import Path\nimport nbformat\n" + ast.get_source_segment((DOCS / "conf.py").read_text(), func) + "\n" + run
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42" and proc.stderr == "", proc.stderr


def test_the_docs_extra_alone_builds_the_docs():
    """Every module docs/conf.py imports or loads as an extension comes from the ``docs`` extra
    (or the core dependencies), directly or through their own requirements."""
    import ast
    from importlib import metadata

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    def canonical(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*meta["dependencies"], *meta["optional-dependencies"]["docs"]]
    closure, stack = set(), [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in wanted]
    while stack:
        name = canonical(stack.pop())
        if name in closure:
            continue
        closure.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        stack += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r]
    source = (DOCS / "conf.py").read_text()
    tree = ast.parse(source)
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    namespace = {}
    exec(compile(ast.Module([n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "extensions" for t in n.targets)], []), "conf.py", "exec"), namespace)
    modules |= {ext.split(".")[0] for ext in namespace["extensions"]}
    owners = metadata.packages_distributions()
    missing = []
    for module in sorted(modules - set(sys.stdlib_module_names) - {"otprior", "__future__"}):
        dists = owners.get(module)
        if not dists:
            pytest.skip(f"{module} is not installed here")
        if not any(canonical(d) in closure for d in dists):
            missing.append(f"{module} ({', '.join(dists)})")
    assert not missing, f"docs/conf.py needs what the docs extra does not install: {missing}"
