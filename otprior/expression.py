"""Untrusted bias expressions: parsed with a whitelist grammar, never evaluated; built under a budget.

Grammar (Python syntax, checked node by node on :mod:`ast`'s tree; anything else is refused)::

    expr   := number | NAME | expr OP expr | -expr | +expr | FUNC(expr, ...)
    OP     := + - * / ** (^ is read as **)
    NAME   := the distance symbol (default d) | pi | E
    FUNC   := log exp sqrt sin cos abs (one argument) | min max (two or more)

:func:`parse_bias` works in two stages.

1. **The text, in the calling process, without sympy**: at most :data:`MAX_LENGTH` characters
   of the grammar's alphabet (letters, digits, ``_ . + - * / ^ ( ) ,`` and blanks), Python's
   tokenizer and parser (:func:`ast.parse`), at most :data:`MAX_NODES` nodes and
   :data:`MAX_DEPTH` levels, integer literals within 1000 bits and float literals within
   :data:`MAX_CONSTANT` (a decimal literal is the exact rational it writes, every digit up to 60 significant
   ones, so that sympy forms every constant of the tree exactly; :func:`bias_text` writes them back as decimals),
   numeric exponents within :data:`MAX_EXPONENT`, and a bound on the size
   of every exact number sympy could form: a bound ``B`` on the bits of the numerator and of the
   denominator of any exact rational in a subtree (``p1/q1 + p2/q2 = (p1 q2 + p2 q1)/(q1 q2)``, so)
   ``B(a op b) <= B(a) + B(b) + 1`` for ``+ - * /`` and n-ary ``min``/``max``,
   ``B(a**e) <= (floor|e| + 1) B(a) + B(e)`` for a numeric exponent ``e`` (sympy expands an
   integer power of a product, ``(d/N)**k = d**k/N**k``, and takes ``floor|e|`` powers of a
   rational base), and ``(|p| + 1) B(a) + B(e)`` for a constant ``a`` and a fractional ``e = p/q`` (sympy
   combines it with the powers inside ``a``: ``((0.3**99)**0.99)`` is ``3**(9801/100)/10**(9801/100)``), ``B(exp(a)) <= (floor(s) + 1) B(a)`` when ``a`` holds a logarithm
   (``exp(c log x)`` is ``x**c``, ``s`` bounding the product of the magnitudes of the literals
   outside the logarithms, and of their inverses),
   must stay within :data:`MAX_CONSTANT_BITS`. ``((1 + 1/N)**100)**100`` with a 299-digit
   ``N`` is refused here, before any number is built.
2. **sympy, in a child process** (:func:`run_budgeted`, :data:`PARSE_TIME_BUDGET` seconds and
   :data:`PARSE_MEMORY_BUDGET` bytes): the tree is built from the grammar's nodes alone
   (``sympify`` and ``eval`` are never called on the text) in a positive distance symbol,
   checked (:func:`check_bias_values`) and sent back as plain data, from which the caller's
   process rebuilds the same sympy tree without evaluating it again (``evaluate=False``). A
   computation that runs out of its budget is a refusal (``DomainError`` naming ``expr``).

:func:`run_budgeted` runs a computation (sympy's limits and convergence tests, the parse) in a
child process with a wall-clock budget and an address-space cap, and reports when either ends,
so that no expression blocks its caller or exhausts its memory. The child dies with its parent
(``PR_SET_PDEATHSIG`` on Linux, a watch on the parent's process id elsewhere, and a CPU-time
limit as a backstop).
"""

from __future__ import annotations

import ast
import math
import os
import signal
import sys
import threading
import time
import warnings

from ._validation import DomainError, check_real

__all__ = [
    "parse_bias",
    "bias_text",
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
    "MAX_CONSTANT_BITS",
    "PARSE_TIME_BUDGET",
    "PARSE_MEMORY_BUDGET",
    "DEFAULT_TIME_BUDGET",
    "DEFAULT_MEMORY_BUDGET",
]

MAX_LENGTH = 1000
MAX_DEPTH = 40
MAX_NODES = 400
MAX_EXPONENT = 100.0
MAX_CONSTANT = 1e300
MAX_INTEGER_BITS = 1000  # integer literals: about 1e301
MAX_CONSTANT_BITS = 8192  # bits of the numerator, and of the denominator, of any exact rational sympy may form (2467 digits: printable)
PARSE_TIME_BUDGET = 10.0  # seconds for building and checking a parsed expression
PARSE_MEMORY_BUDGET = 256 << 20  # bytes of address space the parse may add
CHECKED_DISTANCES = 65  # a bias is evaluated at d = 0, 1, ..., 64 (check_bias_values)
DEFAULT_TIME_BUDGET = 5.0  # seconds
DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes of address space a budgeted computation may add

# grammar names -> sympy attribute names (sympy is imported on first use: ``import otprior`` stays light)
_UNARY_FUNCS = {"log": "log", "exp": "exp", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "abs": "Abs"}
_NARY_FUNCS = {"min": "Min", "max": "Max"}
_CONSTANTS = {"pi": "pi", "E": "E"}
_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-*/^(), \t\r\n")
_CHECKED = {}  # (expression, symbol) -> True: checked by check_bias_values (bounded, see _remember)
_CHECKED_MAX = 512


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


def parse_bias(text, symbol: str = "d", *, time_budget=PARSE_TIME_BUDGET, memory_budget=PARSE_MEMORY_BUDGET):
    """Parse ``text`` into a sympy expression in ``Symbol(symbol, positive=True)``, or refuse it (``DomainError``).

    The text is checked in this process without sympy (alphabet, length, parser, nodes,
    depth, sizes of literals, exponents and of every exact number, see the module notes);
    sympy builds and checks the tree in a child process within ``time_budget`` seconds and
    ``memory_budget`` bytes of added address space. Every refusal, a budget that runs out
    included, is a :class:`~otprior.DomainError` naming ``expr``.

    The distance symbol is positive (a distance; the verdicts take ``d -> oo``), so sympy
    applies the rules valid for ``d > 0`` (``sqrt(d**2) = d``, ``abs(d) = d``).

    Examples
    --------
    >>> parse_bias("-1.5*log(1 + d)")
    -3*log(d + 1)/2
    >>> bias_text(parse_bias("(d - 99998.7)/0.7"))
    '10*d/7 - 999987/7'
    """
    tree = _check_text(text, symbol)
    del tree  # the child parses the text again: only plain data crosses the process boundary
    sp = import_sympy()  # imported here, before the fork, so that no child imports it again
    try:
        status, *rest = run_budgeted(_parse_child, text, symbol, time_budget=time_budget, memory_budget=memory_budget)
    except BudgetExceeded as exc:
        _refuse(text, f"an expression sympy builds and checks within the parse budget of {time_budget:g} s; {exc.reason}")
    if status == "refused":
        raise DomainError(*rest)
    d = sp.Symbol(symbol, positive=True)
    out = _rebuild(rest[0], d)
    _remember(out, d)
    return out


def _check_text(text, symbol):
    """The checks of stage 1 (module notes), in this process and without sympy; the :mod:`ast` tree."""
    if not isinstance(text, str):
        raise DomainError("expr", text, "a string")
    if not isinstance(symbol, str) or not symbol.isidentifier() or symbol in _UNARY_FUNCS or symbol in _NARY_FUNCS or symbol in _CONSTANTS:
        raise DomainError("symbol", symbol, "an identifier other than a function or constant name")
    if len(text) > MAX_LENGTH:
        _refuse(text, f"at most {MAX_LENGTH} characters")
    if not text.strip():
        _refuse(text, "it is empty")
    bad = next((ch for ch in text if ch not in _ALPHABET), None)
    if bad is not None:
        _refuse(text, f"character {ascii(bad)} is not in the grammar's alphabet (letters, digits, _ . + - * / ^ ( ) , and blanks)")
    try:
        tree = ast.parse(text.replace("^", "**").strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        _refuse(text, f"not parseable: {type(exc).__name__}")
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        _refuse(text, f"at most {MAX_NODES} nodes")
    _static(tree.body, text, symbol, 0)
    return tree


class _Facts:
    """What stage 1 knows of a subtree: a constant (no distance symbol)?, its value as a float
    (``None`` when not known), a bound on the bits of any exact rational sympy may form from it,
    whether it holds a logarithm, and a bound on the product of its literals' magnitudes."""

    __slots__ = ("const", "value", "bits", "has_log", "scale")

    def __init__(self, const, value, bits, has_log=False, scale=1.0):
        self.const, self.value, self.bits, self.has_log, self.scale = const, value, bits, has_log, scale


def _times(a, b):
    out = a * b
    return out if math.isfinite(out) else math.inf


def _static(node, text, symbol, depth):
    """Stage 1 over ``node``: refuse what sympy must not be asked to build; the node's :class:`_Facts`."""
    if depth > MAX_DEPTH:
        _refuse(text, f"nesting at most {MAX_DEPTH} deep")
    out = _static_node(node, text, symbol, depth)
    if out.bits > MAX_CONSTANT_BITS:
        _refuse(text, f"exact numbers within {MAX_CONSTANT_BITS} bits (one could reach about {_digits_of_bits(out.bits)})")
    if out.const and out.value is not None and not (math.isfinite(out.value) and abs(out.value) <= MAX_CONSTANT):
        _refuse(text, f"constants within {MAX_CONSTANT:g}")
    return out


def _digits_of_bits(bits) -> str:
    return f"{bits:,} bits" if bits < 10**9 else f"2^{bits.bit_length() - 1} bits"


def _float_op(fn, *args):
    if any(a is None for a in args):
        return None
    try:
        out = fn(*args)
    except (ValueError, ZeroDivisionError, TypeError):
        return None
    except OverflowError:
        return math.inf
    if isinstance(out, complex):
        return None
    return float(out)


def _static_node(node, text, symbol, depth):
    rec = lambda n: _static(n, text, symbol, depth + 1)  # noqa: E731
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            _refuse(text, f"constant {_short_repr(v)} is not a real number")
        if isinstance(v, int):
            if v.bit_length() > MAX_INTEGER_BITS:
                _refuse(text, f"constants within {MAX_CONSTANT:g} (an integer of {v.bit_length()} bits)")
            value, bits = float(v), max(v.bit_length(), 1)
        else:
            if not math.isfinite(v) or abs(v) > MAX_CONSTANT:
                _refuse(text, f"constants within {MAX_CONSTANT:g}")
            q = _decimal_fraction(_literal(node, text), v)  # the exact rational the parser makes of it
            value, bits = v, max(q.numerator.bit_length(), q.denominator.bit_length(), 1)
        scale = 1.0 if value == 0 else max(abs(value), 1.0 / abs(value))
        return _Facts(True, value, bits, False, scale)
    if isinstance(node, ast.Name):
        if node.id == symbol:
            return _Facts(False, None, 0)
        if node.id in _CONSTANTS:
            return _Facts(True, math.pi if node.id == "pi" else math.e, 0, False, 4.0)
        _refuse(text, f"unknown name {_short_repr(node.id)}; the distance is {symbol!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        a = rec(node.operand)
        value = None if a.value is None else (-a.value if isinstance(node.op, ast.USub) else a.value)
        return _Facts(a.const, value, a.bits, a.has_log, a.scale)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        a, b = rec(node.left), rec(node.right)
        const, has_log, scale = a.const and b.const, a.has_log or b.has_log, _times(a.scale, b.scale)
        if not isinstance(node.op, ast.Pow):
            fn = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y, ast.Div: lambda x, y: x / y}
            value = _float_op(fn[type(node.op)], a.value, b.value) if const else None
            return _Facts(const, value, a.bits + b.bits + 1, has_log, scale)
        if not b.const:  # a symbolic exponent: sympy keeps the power as it is
            return _Facts(False, None, a.bits + b.bits + 1, has_log, scale)
        e = b.value
        if e is None or not math.isfinite(e):
            _refuse(text, f"numeric exponents real and within {MAX_EXPONENT:g}")
        if abs(e) > MAX_EXPONENT:
            _refuse(text, f"numeric exponents within {MAX_EXPONENT:g}")
        if a.const and a.value is not None:
            base = abs(a.value)
            if base != 0 and base != 1 and abs(e) * abs(math.log10(base)) > math.log10(MAX_CONSTANT):
                _refuse(text, f"constants within {MAX_CONSTANT:g}")
            if base == 0 and e < 0:
                _refuse(text, "division by zero")
        value = _float_op(math.pow, a.value, e) if a.const else None
        bits = (math.floor(abs(e)) + 1) * a.bits + b.bits
        if a.const and e != math.floor(e):
            # an exact constant to a fractional power p/q: sympy combines it with the powers inside (((3/10)^99)^(99/100)
            # is 3^(9801/100) 10^(-9801/100), whose integer parts it forms), so up to |p| + 1 powers of the base's
            # numbers: bounded by the exponent's numerator (the literal's exact one, else 2^bits of the exponent)
            num = _exponent_numerator(node.right, text, b.bits)
            bits = math.inf if num is None else (num + 1) * a.bits + b.bits
        return _Facts(a.const, value, bits, has_log, scale)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        name = node.func.id
        if name not in _UNARY_FUNCS and name not in _NARY_FUNCS:
            _refuse(text, f"unknown function {_short_repr(name)}; allowed: {', '.join(list(_UNARY_FUNCS) + list(_NARY_FUNCS))}")
        if any(isinstance(x, ast.Starred) for x in node.args):
            _refuse(text, "no starred arguments")
        if name in _UNARY_FUNCS and len(node.args) != 1:
            _refuse(text, f"{name} takes one argument")
        if name in _NARY_FUNCS and len(node.args) < 2:
            _refuse(text, f"{name} takes two or more arguments")
        args = [rec(x) for x in node.args]
        if name in _NARY_FUNCS:
            values = [x.value for x in args]
            value = None if None in values else (max if name == "max" else min)(values)
            scale = 1.0
            for x in args:
                scale = _times(scale, x.scale)
            return _Facts(all(x.const for x in args), value, sum(x.bits for x in args) + len(args),
                          any(x.has_log for x in args), scale)
        a = args[0]
        bits = a.bits
        if name == "exp":
            if a.const and a.value is not None and a.value > 690:
                _refuse(text, f"constants within {MAX_CONSTANT:g}")
            if a.has_log:
                # exp(c log x) is x**c in sympy: a power, under the exponent rules
                if a.scale > MAX_EXPONENT:
                    _refuse(text, f"numeric exponents within {MAX_EXPONENT:g} (exp of a logarithm is a power)")
                bits = (math.floor(a.scale) + 1) * a.bits
        fns = {"log": math.log, "exp": math.exp, "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "abs": abs}
        value = _float_op(fns[name], a.value) if a.const else None
        # the argument of a logarithm is no coefficient of it: exp(c log x) = x**c takes c from outside
        return _Facts(a.const, value, bits, a.has_log or name == "log", 1.0 if name == "log" else a.scale)
    _refuse(text, f"{type(node).__name__} is not part of the grammar")


def _exponent_numerator(node, text, bits):
    """``|p|`` of a fractional exponent ``p/q`` written as a (signed) decimal literal, else ``2^bits`` (the bound of
    stage 1 on the numerator of any exact number the exponent forms), or ``None`` beyond ``2^64``."""
    sign_free = node.operand if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) else node
    if isinstance(sign_free, ast.Constant) and isinstance(sign_free.value, float):
        return abs(_decimal_fraction(_literal(sign_free, text), sign_free.value).numerator)
    return None if bits > 64 else 1 << bits


def _short_repr(value) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _parse_child(text, symbol):
    """Stage 2, in the budgeted child: sympy's tree, checked, as plain data (or the refusal's fields)."""
    try:
        sp = import_sympy()
        d = sp.Symbol(symbol, positive=True)
        tree = ast.parse(text.replace("^", "**").strip(), mode="eval")
        out = _build(tree.body, text, d, symbol, 0)
        _check_values(out, d, text)
        return ("ok", _serialise(out, d, text))
    except DomainError as exc:
        return ("refused", exc.parameter, exc.value, exc.domain)


def _node_classes():
    sp = import_sympy()
    return {"Add": sp.Add, "Mul": sp.Mul, "Pow": sp.Pow, "log": sp.log, "exp": sp.exp, "sin": sp.sin,
            "cos": sp.cos, "Abs": sp.Abs, "Min": sp.Min, "Max": sp.Max}


def _serialise(e, d, text):
    """A sympy tree of the grammar's node kinds as nested tuples of names and Python numbers."""
    sp = import_sympy()
    if e == d:
        return ("d",)
    if e.is_Integer:
        return ("I", int(e))
    if e.is_Rational:
        return ("Q", int(e.p), int(e.q))
    if e.is_Float:
        return ("F", tuple(e._mpf_), int(e._prec))
    if e is sp.pi or e is sp.E:
        return (str(e),)
    for name, cls in _node_classes().items():
        if type(e) is cls:
            return (name, tuple(_serialise(a, d, text) for a in e.args))
    _refuse(text, f"sympy rewrote it with {type(e).__name__}, which is not part of the grammar")


def _rebuild(node, d):
    """The sympy tree that :func:`_serialise` describes, built without evaluating it again."""
    sp = import_sympy()
    tag = node[0]
    if tag == "d":
        return d
    if tag == "I":
        return sp.Integer(node[1])
    if tag == "Q":
        return sp.Rational(node[1], node[2])
    if tag == "F":
        return sp.Float._new(tuple(node[1]), node[2])
    if tag == "pi":
        return sp.pi
    if tag == "E":
        return sp.E
    cls = _node_classes()[tag]
    return cls(*[_rebuild(a, d) for a in node[1]], evaluate=False)


def _remember(expr, symbol):
    """Record that ``expr`` in ``symbol`` passed :func:`check_bias_values` (a bounded table)."""
    while len(_CHECKED) >= _CHECKED_MAX:
        try:
            _CHECKED.pop(next(iter(_CHECKED)))
        except (StopIteration, KeyError, RuntimeError):
            break
    _CHECKED[(expr, symbol)] = True


def check_bias_values(expr, symbol, text=None, *, time_budget=DEFAULT_TIME_BUDGET, memory_budget=PARSE_MEMORY_BUDGET):
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

    The check runs in a budgeted child process (:func:`run_budgeted`, ``time_budget`` seconds,
    ``memory_budget`` bytes); one that does not end within it is a refusal. An expression
    :func:`parse_bias` returned was checked there already and is not checked again.

    Distances beyond 64 are not checked here: a pole or a complex value there is found when the
    bias is evaluated (``Bias.bias`` refuses complex values) or left to the verdict's budget.
    """
    sp = import_sympy()
    sym = symbol if isinstance(symbol, sp.Basic) else sp.Symbol(str(symbol))
    try:
        if _CHECKED.get((expr, sym)):
            return
    except TypeError:  # unhashable: checked below
        pass
    try:
        refusal = run_budgeted(_check_child, expr, sym, text, time_budget=time_budget, memory_budget=memory_budget)
    except BudgetExceeded as exc:
        _refuse(str(expr) if text is None else text, f"a bias whose values at d = 0..{CHECKED_DISTANCES - 1} are checked within the budget: {exc.reason}")
    if refusal is not None:
        raise DomainError(*refusal)
    _remember(expr, sym)


def _check_child(expr, sym, text):
    try:
        _check_values(expr, sym, text)
    except DomainError as exc:
        return (exc.parameter, exc.value, exc.domain)
    return None


def _check_values(expr, symbol, text=None):
    """The checks of :func:`check_bias_values`, in this process."""
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
        q = sp.Rational(str(e))  # the decimal as written (the parser keeps a number's shortest decimal)
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


def _literal(node, text):
    """The source text of a number literal (as :func:`ast.parse` read it), or ``None``."""
    try:
        out = ast.get_source_segment(text.replace("^", "**").strip(), node)
    except (TypeError, ValueError, IndexError):
        return None
    return None if out is None else out.replace("_", "")


_MAX_DIGITS = 60  # a decimal literal keeps at most this many significant digits exactly (beyond: its double's shortest repr)


def _number(value, text, literal=None):
    """A sympy number for a literal: an integer exactly; a decimal as the exact rational it writes (``0.7`` is
    ``7/10``), every digit up to 60 significant ones (beyond: its double's shortest ``repr``). sympy then forms every
    constant of the tree exactly (``(d - 99998.7)/0.7`` is ``10 d/7 - 999987/7``; with binary floats it was
    ``1.42857142857143 d - 142855.285714286``, rounded at parse time), so that the certified routes, which read a
    rational exactly, enclose the masses of the expression the user wrote; the float routes read each constant's
    nearest double."""
    sp = import_sympy()

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _refuse(text, f"constant {value!r} is not a real number")
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_CONSTANT:
            _refuse(text, f"constants within {MAX_CONSTANT:g}")
        q = _decimal_fraction(literal, value)
        return sp.Rational(q.numerator, q.denominator)
    if value.bit_length() > 1000:
        _refuse(text, f"constants within {MAX_CONSTANT:g}")
    return sp.Integer(value)


def _decimal_fraction(literal, value):
    """The exact fraction a float literal writes: its decimal (``literal``, the source text) when it has at most
    :data:`_MAX_DIGITS` significant digits, else the decimal of ``repr(value)`` (``value = float(literal)``)."""
    from decimal import Decimal, InvalidOperation
    from fractions import Fraction

    if literal is not None:
        try:
            dec = Decimal(literal)
        except (InvalidOperation, ValueError):
            dec = None
        if dec is not None and dec.is_finite() and len(dec.as_tuple().digits) <= _MAX_DIGITS:
            return Fraction(dec)
    return Fraction(Decimal(repr(value)))


def bias_text(expr) -> str:
    """``expr`` as text, each rational whose denominator divides a power of ten written as its decimal (``-7/10`` as
    ``-0.7``; ``10/7`` stays ``10/7``, and a half stays as sympy writes it: ``sqrt(d)``, ``sin(d)/2``; a decimal of more
    than 60 significant digits stays ``p/q``), the text that parses back to the same expression (the parser keeps a
    decimal literal of at most 60 digits as the rational it writes) while it stays within the parser's 1000 characters."""
    from decimal import Decimal, localcontext

    sp = import_sympy()
    from sympy.printing.str import StrPrinter

    if not isinstance(expr, sp.Basic):
        raise DomainError("expr", _short_repr(expr), "a sympy expression (as parse_bias returns)")
    reps = {}
    for r in expr.atoms(sp.Rational):
        if r.is_Integer or abs(r) == sp.Rational(1, 2):
            continue
        q, twos, fives = int(r.q), 0, 0
        while q % 2 == 0:
            q, twos = q // 2, twos + 1
        while q % 5 == 0:
            q, fives = q // 5, fives + 1
        if q != 1:
            continue
        with localcontext() as ctx:
            ctx.prec = max(twos, fives) + len(str(abs(int(r.p)))) + 2  # p / (2^a 5^b): exact at this many digits
            dec = (Decimal(int(r.p)) / Decimal(int(r.q))).normalize()
        digits = len(dec.as_tuple().digits)
        if digits > _MAX_DIGITS:  # the parser keeps at most that many digits of a decimal: left as p/q
            continue
        reps[r] = sp.Float(format(dec, "e") if abs(dec.adjusted()) > 15 else format(dec, "f"), max(digits, 15))
    with sp.evaluate(False):
        shown = expr.xreplace(reps)
    return StrPrinter({"full_prec": False}).doprint(shown)


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
        return _number(node.value, text, _literal(node, text))
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


def _die_with_parent(parent_pid, seconds):
    """Make this (child) process end when its parent does, and after ``seconds`` of CPU time at most.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so a parent ended by any signal (SIGTERM,
    SIGKILL) takes the child with it. Elsewhere, or if that call fails: a daemon thread that
    polls the parent's process id. Either way, a CPU-time limit (``RLIMIT_CPU``) a little above
    the budget ends the child should both fail.
    """
    watched = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            watched = libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError, TypeError, ValueError):
            watched = False
    if os.getppid() != parent_pid:  # the parent ended before the watch was set
        os._exit(1)
    if not watched:

        def watch():
            while True:
                time.sleep(0.25)
                if os.getppid() != parent_pid:
                    os._exit(1)

        threading.Thread(target=watch, name="otprior-parent-watch", daemon=True).start()
    try:
        import resource

        soft = int(math.ceil(seconds)) + 2
        old_soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ImportError, ValueError, OSError):
        pass


def _cpu_watch(conn, lock, seconds):
    """End this (child) process once it has used ``seconds`` of CPU time, telling the parent so.

    CPU time, not wall-clock: the budget then decides the same way on a busy machine as on an
    idle one (a forked child's CPU times start at zero)."""
    while time.process_time() <= seconds:
        time.sleep(0.02)
    with lock:
        try:
            conn.send(("time", None))
        except Exception:
            pass
    os._exit(0)


def _child(conn, fn, args, memory, parent_pid, seconds):
    _die_with_parent(parent_pid, seconds)
    import threading

    lock = threading.Lock()
    threading.Thread(target=_cpu_watch, args=(conn, lock, seconds), name="otprior-cpu-watch", daemon=True).start()
    try:
        import resource

        if memory is not None:
            cap = _address_space() + memory
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            if soft == resource.RLIM_INFINITY or cap < soft:
                resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):
        pass
    try:
        result = ("ok", fn(*args))
    except MemoryError:
        result = ("memory", None)
    except BaseException as exc:  # reported to the parent as data, never re-raised here
        try:
            result = ("error", f"{type(exc).__name__}: {exc}"[:500])
        except Exception:
            result = ("error", type(exc).__name__)
    with lock:
        try:
            conn.send(result)
        except Exception:
            conn.send(("error", "result could not be sent"))
        finally:
            conn.close()


def run_budgeted(fn, *args, time_budget=DEFAULT_TIME_BUDGET, memory_budget=DEFAULT_MEMORY_BUDGET):
    """Run ``fn(*args)`` in a child process within ``time_budget`` seconds of CPU time and ``memory_budget`` bytes.

    Returns the result (it must be picklable). Raises :class:`BudgetExceeded` when the time
    runs out (the child is killed), when the memory cap is hit, or when ``fn`` fails (the
    error's text is in ``reason``). The budget counts the child's CPU time, so that an answer
    does not depend on how busy the machine is; a wall-clock backstop of
    ``4 * time_budget + 1`` seconds ends a child that waits without computing. A fork is used
    where the platform has one (so ``fn`` and
    ``args`` need not be picklable); elsewhere a fresh interpreter. The child ends with its
    parent (:func:`_die_with_parent`): a parent stopped by a signal leaves no computation
    running, and a parent interrupted inside this call kills the child before it returns.
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
    proc = ctx.Process(target=_child, args=(send, fn, args, memory_budget, os.getpid(), time_budget), daemon=True)
    start = time.monotonic()
    proc.start()
    send.close()
    try:
        ready = receive.poll(4.0 * time_budget + 1.0)
        if not ready:
            raise BudgetExceeded(f"the time budget of {time_budget:g} s ran out (wall-clock backstop "
                                 f"{4.0 * time_budget + 1.0:g} s)")
        try:
            status, value = receive.recv()
        except EOFError:
            raise BudgetExceeded("the computation ended without an answer (killed, or out of memory)") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(1.0)
        receive.close()
    if status == "time":
        raise BudgetExceeded(f"the time budget of {time_budget:g} s of CPU time ran out")
    if status == "memory":
        raise BudgetExceeded(f"the memory budget of {memory_budget / 2**20:.0f} MiB ran out")
    if status == "error":
        raise BudgetExceeded(f"the computation failed ({value}) after {time.monotonic() - start:.2g} s")
    return value
