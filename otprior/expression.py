"""Untrusted bias expressions: parsed with a whitelist grammar, never evaluated; decided under a budget.

Grammar (Python syntax, checked node by node on :mod:`ast`'s tree; anything else is refused)::

    expr   := number | NAME | expr OP expr | -expr | +expr | FUNC(expr, ...)
    OP     := + - * / ** (^ is read as **)
    NAME   := the distance symbol (default d) | pi | E
    FUNC   := log exp sqrt sin cos abs (one argument) | min max (two or more)

The sympy tree is built from the grammar's nodes alone (``sympify`` and ``eval`` are never
called on the text). Limits: :data:`MAX_LENGTH` characters, :data:`MAX_DEPTH` nesting,
:data:`MAX_NODES` nodes, numeric exponents within :data:`MAX_EXPONENT` in absolute value, and
constants within :data:`MAX_CONSTANT`.

:func:`run_budgeted` runs a computation (sympy's limits and convergence tests) in a child
process with a wall-clock budget and an address-space cap, and reports when either ends,
so that no expression blocks its caller or exhausts its memory.
"""

from __future__ import annotations

import ast
import math
import os
import time
import warnings

from ._validation import DomainError, check_real

__all__ = [
    "parse_bias",
    "check_bias_values",
    "import_sympy",
    "CHECKED_DISTANCES",
    "run_budgeted",
    "BudgetExceeded",
    "MAX_LENGTH",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_EXPONENT",
    "MAX_CONSTANT",
    "DEFAULT_TIME_BUDGET",
    "DEFAULT_MEMORY_BUDGET",
]

MAX_LENGTH = 1000
MAX_DEPTH = 40
MAX_NODES = 400
MAX_EXPONENT = 100.0
MAX_CONSTANT = 1e300
CHECKED_DISTANCES = 65  # a bias is evaluated at d = 0, 1, ..., 64 (check_bias_values)
DEFAULT_TIME_BUDGET = 5.0  # seconds
DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes of address space a budgeted computation may add

# grammar names -> sympy attribute names (sympy is imported on first use: ``import otprior`` stays light)
_UNARY_FUNCS = {"log": "log", "exp": "exp", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "abs": "Abs"}
_NARY_FUNCS = {"min": "Min", "max": "Max"}
_CONSTANTS = {"pi": "pi", "E": "E"}


def import_sympy():
    """``sympy``, imported with the caller's warnings filters kept.

    Importing sympy installs a process-wide ``"once"`` filter for its deprecation warnings;
    the first import runs inside :class:`warnings.catch_warnings`, which restores the filters.
    """
    with warnings.catch_warnings():
        import sympy

    return sympy


def _refuse(text, why):
    raise DomainError("expr", text if len(text) <= 80 else text[:77] + "...", f"an expression of the bias grammar ({why})")


def parse_bias(text, symbol: str = "d"):
    """Parse ``text`` into a sympy expression in ``Symbol(symbol)``, or refuse it (``DomainError``).

    Examples
    --------
    >>> parse_bias("-1.5*log(1 + d)")
    -1.5*log(d + 1)
    """
    if not isinstance(text, str):
        raise DomainError("expr", text, "a string")
    if not isinstance(symbol, str) or not symbol.isidentifier() or symbol in _UNARY_FUNCS or symbol in _NARY_FUNCS or symbol in _CONSTANTS:
        raise DomainError("symbol", symbol, "an identifier other than a function or constant name")
    if len(text) > MAX_LENGTH:
        _refuse(text, f"at most {MAX_LENGTH} characters")
    if not text.strip():
        _refuse(text, "it is empty")
    try:
        tree = ast.parse(text.replace("^", "**").strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        _refuse(text, f"not parseable: {type(exc).__name__}")
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        _refuse(text, f"at most {MAX_NODES} nodes")
    sp = import_sympy()

    d = sp.Symbol(symbol)
    out = _build(tree.body, text, d, symbol, 0)
    check_bias_values(out, d, text)
    return out


def check_bias_values(expr, symbol, text=None):
    """Refuse (``DomainError`` naming ``expr``) a bias that is not real and finite at the integers ``d >= 0``.

    Checked:

    1. the expression, as sympy simplifies it on construction, contains no imaginary unit ``I``
       (``sqrt(-d)`` becomes ``I*sqrt(d)`` and is refused);
    2. at every distance ``d = 0, 1, ..., 64`` (:data:`CHECKED_DISTANCES`) the value, enclosed in
       complex Arb balls (python-flint ``acb``, 64 bits, then 256 and 1024 while not decided),
       is finite and its imaginary part is not provably non-zero. A pole (``1/(d - 5)``), a
       logarithm of zero (``log(d)`` at ``d = 0``), ``0**(-1)`` or a ball that still contains
       an infinity at 1024 bits is refused; so is a value whose imaginary part excludes 0
       (``log(3 - d)``, ``sqrt(d - 2)``).

    Distances beyond 64 are not checked here: a pole or a complex value there is found when the
    bias is evaluated (``Bias.bias`` refuses complex values) or left to the verdict's budget.
    """
    sp = import_sympy()
    shown = str(expr) if text is None else text
    if expr.has(sp.I, sp.zoo, sp.nan, sp.oo, -sp.oo):
        _refuse(shown, f"a real finite bias; {expr} is not real or not finite")
    sym = symbol if isinstance(symbol, sp.Basic) else sp.Symbol(str(symbol))
    for k in range(CHECKED_DISTANCES):
        verdict = _acb_verdict(expr, sym, k)
        if verdict == "infinite":
            _refuse(shown, f"a bias finite at every integer d >= 0; not finite at d = {k}")
        if verdict == "complex":
            _refuse(shown, f"a bias real at every integer d >= 0; not real at d = {k}")


def _acb_verdict(expr, sym, k):
    """``"ok"``, ``"infinite"`` or ``"complex"``: the bias at ``d = k`` in complex Arb balls."""
    from ._balls import arb_precision

    for prec in (64, 256, 1024):
        with arb_precision(prec):
            try:
                value = _acb_eval(expr, sym, k)
            except (ValueError, ZeroDivisionError, ArithmeticError):
                value = None
            if value is None or not value.is_finite():
                continue
            if not value.imag.contains(0):
                return "complex"
            return "ok"
    return "infinite"


def _acb_eval(e, sym, k):
    """The sympy tree ``e`` at ``sym = k`` as a ``flint.acb`` ball (the grammar's nodes; others through sympy)."""
    import flint

    sp = import_sympy()
    acb = flint.acb
    if e == sym:
        return acb(k)
    if e.is_Integer:
        return acb(int(e))
    if e.is_Rational:
        return acb(int(e.p)) / int(e.q)
    if e.is_Float:
        q = sp.Rational(e)  # the Float's exact binary value
        return acb(int(q.p)) / int(q.q)
    if e is sp.pi:
        return acb(flint.arb.pi())
    if e is sp.E:
        return acb(flint.arb.const_e())
    if e.is_Add or e.is_Mul:
        parts = [_acb_eval(a, sym, k) for a in e.args]
        out = parts[0]
        for p in parts[1:]:
            out = out + p if e.is_Add else out * p
        return out
    if e.is_Pow:
        base, exp = e.args
        b = _acb_eval(base, sym, k)
        if exp.is_Integer:
            n = int(exp)
            if n < 0 and b.real.contains(0) and b.imag.contains(0):
                return acb(0, 0) / acb(0)  # a pole: not finite
            return b ** n
        if exp == sp.Rational(1, 2):
            return b.sqrt()
        x = _acb_eval(exp, sym, k)
        if b == 0:
            if x.real > 0:
                return acb(0)
            if x == 0:
                return acb(1)
            return acb(0, 0) / acb(0)
        return b**x
    unary = {sp.log: "log", sp.exp: "exp", sp.sin: "sin", sp.cos: "cos"}
    if e.func in unary:
        a = _acb_eval(e.args[0], sym, k)
        if e.func is sp.log and a == 0:
            return acb(0, 0) / acb(0)
        return getattr(a, unary[e.func])()
    if e.func is sp.Abs:
        return acb(abs(_acb_eval(e.args[0], sym, k)))
    if e.func in (sp.Min, sp.Max):
        parts = [_acb_eval(a, sym, k) for a in e.args]
        if any(not p.imag.contains(0) for p in parts):
            return acb(0, 1)  # a complex argument: reported as not real
        out = parts[0].real
        for p in parts[1:]:
            out = out.min(p.real) if e.func is sp.Min else out.max(p.real)
        return acb(out)
    value = complex(sp.N(e.subs(sym, k), 30))  # a node outside the grammar (a sympy expression given directly)
    if not (math.isfinite(value.real) and math.isfinite(value.imag)):
        return None
    return acb(value.real, value.imag)


def _number(value, text):
    sp = import_sympy()

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse(text, f"constant {value!r} is not a real number")
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_CONSTANT:
            _refuse(text, f"constants within {MAX_CONSTANT:g}")
        return sp.Float(repr(value))
    if value.bit_length() > 1000:
        _refuse(text, f"constants within {MAX_CONSTANT:g}")
    return sp.Integer(value)


def _magnitude_ok(value) -> bool:
    """A numeric sympy value whose magnitude stays within MAX_CONSTANT (checked without evaluating big powers)."""
    sp = import_sympy()

    try:
        v = abs(complex(sp.N(value, 15)))
    except (TypeError, ValueError, OverflowError):
        return False
    return math.isfinite(v) and v <= MAX_CONSTANT


def _build(node, text, d, symbol, depth):
    out = _build_node(node, text, d, symbol, depth)
    if out.is_number and out.is_real is False:
        _refuse(text, f"real constants only ({out} is not real)")
    return out


def _build_node(node, text, d, symbol, depth):
    sp = import_sympy()

    if depth > MAX_DEPTH:
        _refuse(text, f"nesting at most {MAX_DEPTH} deep")
    rec = lambda n: _build(n, text, d, symbol, depth + 1)  # noqa: E731
    if isinstance(node, ast.Constant):
        return _number(node.value, text)
    if isinstance(node, ast.Name):
        if node.id == symbol:
            return d
        if node.id in _CONSTANTS:
            return getattr(sp, _CONSTANTS[node.id])
        _refuse(text, f"unknown name {node.id!r}; the distance is {symbol!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = rec(node.operand)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        left, right = rec(node.left), rec(node.right)
        if isinstance(node.op, ast.Add):
            out = left + right
        elif isinstance(node.op, ast.Sub):
            out = left - right
        elif isinstance(node.op, ast.Mult):
            out = left * right
        elif isinstance(node.op, ast.Div):
            if right == 0:
                _refuse(text, "division by zero")
            out = left / right
        else:
            if right.is_number:
                if not _magnitude_ok(right) or abs(complex(sp.N(right, 15))) > MAX_EXPONENT:
                    _refuse(text, f"numeric exponents within {MAX_EXPONENT:g}")
                if left.is_number:
                    base = abs(complex(sp.N(left, 15)))
                    e = abs(complex(sp.N(right, 15)))
                    if base != 0 and base != 1 and e * abs(math.log10(base)) > math.log10(MAX_CONSTANT):
                        _refuse(text, f"constants within {MAX_CONSTANT:g}")
                    if base == 0 and complex(sp.N(right, 15)).real < 0:
                        _refuse(text, "division by zero")
            out = sp.Pow(left, right)
        if out.is_number and not _magnitude_ok(out):
            _refuse(text, f"constants within {MAX_CONSTANT:g}")
        if out.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
            _refuse(text, "an undefined constant")
        return out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        name = node.func.id
        args = [rec(a) for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) != len(node.args):
            _refuse(text, "no starred arguments")
        if name in _UNARY_FUNCS:
            if len(args) != 1:
                _refuse(text, f"{name} takes one argument")
            if name == "exp" and args[0].is_number and (not _magnitude_ok(args[0]) or complex(sp.N(args[0], 15)).real > 690):
                _refuse(text, f"constants within {MAX_CONSTANT:g}")
            out = getattr(sp, _UNARY_FUNCS[name])(args[0])
            if out.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
                _refuse(text, "an undefined constant")
            return out
        if name in _NARY_FUNCS:
            if len(args) < 2:
                _refuse(text, f"{name} takes two or more arguments")
            return getattr(sp, _NARY_FUNCS[name])(*args)
        _refuse(text, f"unknown function {name!r}; allowed: {', '.join(list(_UNARY_FUNCS) + list(_NARY_FUNCS))}")
    _refuse(text, f"{type(node).__name__} is not part of the grammar")


class BudgetExceeded(Exception):
    """A budgeted computation ran out of time or memory; ``reason`` says which."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _address_space() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _child(conn, fn, args, memory):
    try:
        import resource

        if memory is not None:
            cap = _address_space() + memory
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass
    try:
        result = ("ok", fn(*args))
    except MemoryError:
        result = ("memory", None)
    except BaseException as exc:  # reported to the parent as data, never re-raised here
        result = ("error", f"{type(exc).__name__}: {exc}"[:500])
    try:
        conn.send(result)
    except Exception:
        conn.send(("error", "result could not be sent"))
    finally:
        conn.close()


def run_budgeted(fn, *args, time_budget=DEFAULT_TIME_BUDGET, memory_budget=DEFAULT_MEMORY_BUDGET):
    """Run ``fn(*args)`` in a child process within ``time_budget`` seconds and ``memory_budget`` bytes.

    Returns the result (it must be picklable). Raises :class:`BudgetExceeded` when the time
    runs out (the child is killed), when the memory cap is hit, or when ``fn`` fails (the
    error's text is in ``reason``). A fork is used where the platform has one (so ``fn`` and
    ``args`` need not be picklable); elsewhere a fresh interpreter.
    """
    import multiprocessing as mp

    time_budget = check_real(time_budget, "time_budget", low=0.0, low_open=True)
    if memory_budget is not None:
        memory_budget = int(check_real(memory_budget, "memory_budget", low=1 << 20))
    try:
        ctx = mp.get_context("fork")
    except ValueError:
        ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args, memory_budget), daemon=True)
    start = time.monotonic()
    proc.start()
    send.close()
    try:
        ready = receive.poll(time_budget)
        if not ready:
            raise BudgetExceeded(f"the time budget of {time_budget:g} s ran out")
        try:
            status, value = receive.recv()
        except EOFError:
            raise BudgetExceeded("the computation ended without an answer (killed, or out of memory)") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(1.0)
        receive.close()
    if status == "memory":
        raise BudgetExceeded(f"the memory budget of {memory_budget / 2**20:.0f} MiB ran out")
    if status == "error":
        raise BudgetExceeded(f"the computation failed ({value}) after {time.monotonic() - start:.2g} s")
    return value
