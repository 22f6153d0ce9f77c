"""Mutation testing of the machine checks (run by ``tests/test_proof_checks.py``, marked slow).

A *mutant* is one corruption of one constant or one exponent, either in a checked claim (a function of
``proofs/checks/*.py``) or in the library formula it guards (a function or table of ``otprior``). The
function's source is parsed (``ast``), one node is changed, and the function is compiled again into the
module it came from, replacing the original there (claims look their helpers and the library up at call
time, so every check then sees the mutant); the original is put back afterwards. Nothing is copied but
the one function.

Operators: an ``int`` or ``float`` constant ``v`` becomes ``v + 1``; an exponent ``e`` (the right operand
of ``**``) becomes ``e / 2``. Constants that are not part of a formula are left alone: arguments of
``range()``, ``arb_precision()``, ``tol()`` (a harness tolerance or stopping rule), ``case()`` (an instance the check is run at: a size, a
sample point, a grid, a slope), ``Claim(...)`` (the domain, the budget and the tight points of a claim),
keyword arguments, subscripts, strings, the messages of ``assert`` and ``raise``, the ``certificate`` of a claim (a proof aid, checked by sympy
before it is used, not part of what is claimed), a claim's ``tight`` points, the record of a
result (``InequalityRecord(...)``) and counters (``evaluations``, ``checked``).

A mutant is *killed* when its check fails: a box is refuted or left undecided, a tight point is no longer
tight, a sympy identity or an assertion fails, or the check raises. A mutant of a table whose values are
unchanged bit for bit (``p / (q + 1) == p / q`` in binary64) is *equivalent*: listed, not counted.
"""

from __future__ import annotations

import ast
import copy
import inspect
import sys
import textwrap
from dataclasses import dataclass

SKIP_CALLS = {"range", "arb_precision", "Claim", "InequalityRecord", "_renamed", "len", "enumerate", "zip", "print", "int", "tol", "case"}
SKIP_FUNCTIONS = {"certificate"}
SKIP_NAMES = {"tight", "evaluations", "checked", "decided", "undecided"}  # tight points (harness) and counters


@dataclass(frozen=True)
class Target:
    """A function (``owner.name``; ``owner`` a module or a class) or a module-level table (``table=True``)
    whose constants are mutated. ``only`` limits the sites to the expressions assigned to these names."""

    owner: object
    name: str
    table: bool = False
    only: tuple = ()

    @property
    def label(self):
        owner = getattr(self.owner, "__name__", str(self.owner))
        return f"{owner}.{self.name}"


@dataclass(frozen=True)
class Mutant:
    target: Target
    index: int
    description: str


def _module_of(owner):
    return sys.modules[owner.__module__] if inspect.isclass(owner) else owner


def _source_tree(target):
    if target.table:
        source = inspect.getsource(target.owner)
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == target.name for t in node.targets):
                return node
        raise LookupError(target.label)
    fn = getattr(target.owner, target.name)
    fn = getattr(fn, "__func__", fn)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    if getattr(node, "name", None) != target.name:  # the file changed on disk since it was imported
        raise RuntimeError(f"the source of {target.label} on disk does not match the loaded function")
    return node


def _assigns(node):
    """The names (or attribute names) an assignment binds."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    out = set()
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
    return out


def _sites(root, only=()):
    """(node, kind) for every mutable site under ``root``, in a fixed order."""
    parents = {}
    for node in ast.walk(root):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def excluded(node):
        p = parents.get(node)
        child = node
        inside_only = not only
        while p is not None:
            if isinstance(p, ast.Call) and isinstance(p.func, (ast.Name, ast.Attribute)):
                name = p.func.id if isinstance(p.func, ast.Name) else p.func.attr
                if name in SKIP_CALLS:
                    return True
            if isinstance(p, ast.keyword) or (isinstance(p, ast.Subscript) and child is p.slice):
                return True
            if isinstance(p, ast.Raise) or (isinstance(p, ast.Assert) and child is p.msg):  # messages
                return True
            if isinstance(p, (ast.FunctionDef, ast.Lambda)) and getattr(p, "name", None) in SKIP_FUNCTIONS:
                return True
            if isinstance(p, ast.arguments):  # default values of parameters: the box, not the formula
                return True
            if isinstance(p, (ast.Assign, ast.AugAssign)) and _assigns(p) & SKIP_NAMES:
                return True
            if only and isinstance(p, ast.Assign) and any(getattr(t, "id", None) in only for t in p.targets):
                inside_only = True
            child, p = p, parents.get(p)
        return not inside_only

    out = []
    for node in ast.walk(root):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and not excluded(node):
            out.append((node, "constant"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and not excluded(node.right):
            out.append((node, "exponent"))
    return out


def mutants(target):
    """Every mutant of ``target``."""
    root = _source_tree(target)
    out = []
    for i, (node, kind) in enumerate(_sites(root, target.only)):
        line = getattr(node, "lineno", 0)
        if kind == "constant":
            text = f"line {line}: {node.value!r} -> {node.value + 1!r}"
        else:
            text = f"line {line}: exponent {ast.unparse(node.right)} -> ({ast.unparse(node.right)}) / 2"
        out.append(Mutant(target, i, text))
    return out


def _mutated_tree(target, index):
    root = copy.deepcopy(_source_tree(target))
    node, kind = _sites(root, target.only)[index]
    if kind == "constant":
        node.value = node.value + 1
    else:
        node.right = ast.BinOp(left=node.right, op=ast.Div(), right=ast.Constant(2))
    return ast.fix_missing_locations(root)


class applied:
    """Context manager: ``mutant`` compiled into its module (or class) for the duration of the block."""

    def __init__(self, mutant):
        self.mutant = mutant

    def __enter__(self):
        target = self.mutant.target
        root = _mutated_tree(target, self.mutant.index)
        module = _module_of(target.owner)
        self.original = getattr(target.owner, target.name)
        if target.table:
            value = eval(compile(ast.Expression(root.value), f"<mutant {target.label}>", "eval"), vars(module))  # our own AST
            setattr(target.owner, target.name, value)
            return self
        code = compile(ast.Module(body=[root], type_ignores=[]), f"<mutant {target.label}>", "exec")
        scope = {}
        exec(code, vars(module), scope)  # the function's own (mutated) source, compiled in its module
        fn = scope[target.name]
        fn.__mutated_source__ = ast.unparse(root)
        setattr(target.owner, target.name, fn)
        return self

    def __exit__(self, *exc):
        setattr(self.mutant.target.owner, self.mutant.target.name, self.original)
        return False


def killed(mutant, check):
    """Whether ``check()`` fails (returns False or raises) with ``mutant`` applied."""
    with applied(mutant):
        try:
            return not check()
        except Exception:  # a failed assertion, a refuted claim, a crash: the corruption is caught
            return True


def equivalent(mutant):
    """Whether ``mutant`` leaves the program unchanged: a table whose corrupted entries evaluate to the same
    values bit for bit (``p / (q + 1)`` and ``p / q`` can be the same double). Such a mutant is no corruption:
    no check can fail on it, and it is not counted."""
    target = mutant.target
    if not target.table:
        return False
    original = getattr(target.owner, target.name)
    with applied(mutant):
        value = getattr(target.owner, target.name)
    return type(value) is type(original) and repr(value) == repr(original)


def run(targets, check):
    """Every mutant of every target against ``check``: ``(total, killed, survivors, equivalents)``; the
    equivalent mutants (:func:`equivalent`) are listed, not counted."""
    total, dead, survivors, same = 0, 0, [], []
    if not check():  # a check that fails unmutated would "kill" every mutant
        raise AssertionError("the check fails before any corruption")
    for target in targets:
        for m in mutants(target):
            if equivalent(m):
                same.append(f"{target.label}: {m.description}")
                continue
            total += 1
            if killed(m, check):
                dead += 1
            else:
                survivors.append(f"{target.label}: {m.description}")
    return total, dead, survivors, same
