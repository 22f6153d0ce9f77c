"""Input checks and the package's named errors.

Every public function validates its arguments here, so that a bad value is
refused with a :class:`DomainError` (a ``ValueError``) that names the
parameter, the value received and the valid domain. Nothing is clipped.
"""

from __future__ import annotations

import decimal
import math
import numbers
import sys

import numpy as np

__all__ = ["DomainError", "RenamedError", "ConvergenceError", "PrecisionError", "FileFormatError"]


#: Largest number of decimal digits an error message writes out; bigger integers are described by
#: their bit length (Python refuses to write integers of more than 4300 digits as text).
MAX_SHOWN_DIGITS = 1000
#: Longest ``repr`` of a value an error message holds (the middle of a longer one is cut).
MAX_SHOWN_CHARS = 1000
#: Largest integer (in decimal digits) the checks convert exactly; a bigger one is refused by its size.
MAX_INT_DIGITS = 4000


def describe_value(value) -> str:
    """``repr(value)`` for an error message, safe for any value.

    Integers of more than :data:`MAX_SHOWN_DIGITS` digits are described by their bit length
    (``repr`` of an integer beyond 4300 digits raises ``ValueError``); a ``repr`` that fails
    (a hostile object, a container of huge integers) is replaced by the type's name; one
    longer than :data:`MAX_SHOWN_CHARS` characters is cut in the middle.

    Examples
    --------
    >>> describe_value(2**100000)
    'an integer of 100001 bits (about 10^30103)'
    >>> describe_value(0.5)
    '0.5'
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        try:
            bits = int(value).bit_length()
        except Exception:
            bits = 0
        if bits > MAX_SHOWN_DIGITS * 3.33:
            sign = "-" if value < 0 else ""
            return f"{sign}an integer of {bits} bits (about {sign}10^{int(bits * 0.30102999566398120)})"
    try:
        shown = repr(value)
    except Exception:  # a repr that raises (integers past Python's digit limit inside a container, hostile objects)
        return f"<a {type(value).__name__} that cannot be shown>"
    if not isinstance(shown, str):
        return f"<a {type(value).__name__} that cannot be shown>"
    if len(shown) > MAX_SHOWN_CHARS:
        shown = shown[: MAX_SHOWN_CHARS // 2] + " ... " + shown[-MAX_SHOWN_CHARS // 2 :]
    return shown


class DomainError(ValueError):
    """A parameter lies outside its valid domain.

    The message is ``name=<value> is outside the valid domain: <domain>``, the value written
    by :func:`describe_value` (safe for integers of any size and for any object).
    """

    def __init__(self, name: str, value, domain: str):
        self.parameter = name
        self.value = value
        self.domain = domain
        super().__init__(f"{name}={describe_value(value)} is outside the valid domain: {domain}")


class RenamedError(DomainError):
    """An old spelling of a parameter or flag: refused, with the one spelling that replaced it.

    ``RenamedError("scale", 8.0, "factor")`` reads ``scale=8.0 is outside the valid domain:
    a former name, spelled factor now``; ``.new`` holds the new spelling.
    """

    def __init__(self, name: str, value, new: str, why: str = ""):
        self.new = new
        super().__init__(name, value, f"a former name, spelled {new} now" + (f" ({why})" if why else ""))


class FileFormatError(ValueError):
    """A file that cannot be read, lacks what is needed, or is refused (e.g. a pickle that would run code)."""


class ConvergenceError(RuntimeError):
    """An iteration did not reach its tolerance; ``partial`` holds the last iterate."""

    def __init__(self, message: str, partial=None):
        super().__init__(message)
        self.partial = partial


class PrecisionError(ArithmeticError):
    """The requested digits cannot be vouched for within the working-precision cap."""


def check_rho(rho, name: str = "rho", *, allow_one: bool = False) -> float:
    """Balancing strength: a finite real in [0, 1) (or [0, 1] when ``allow_one``)."""
    domain = "a finite real number in [0, 1]" if allow_one else f"a finite real number in {RHO}"
    value = _real(rho, name, domain)
    upper_ok = value <= 1.0 if allow_one else value < 1.0
    if not (value >= 0.0 and upper_ok):
        raise DomainError(name, rho, domain)
    return value


def check_int(value, name: str, *, minimum: int = 1, maximum=None) -> int:
    """An integer in [minimum, maximum], converted exactly (never through a double).

    Accepted: ``int`` and ``np.integer``; a ``Fraction`` with denominator 1; an integral
    ``Decimal``; an integral float (taken as the exact integer it represents, so ``1e300`` is
    ``int(1e300)``, slightly above ``10**300``). Booleans (``np.bool_`` too), complex numbers,
    strings and non-integral values are refused; so is an integer of more than
    :data:`MAX_INT_DIGITS` digits (``Decimal('1e999999')`` is refused by its exponent, without
    building the integer).
    """
    out = _exact_int(value)
    if out is not None and out is not _HUGE and out >= minimum and (maximum is None or out <= maximum):
        return out
    # The message is built only for a refusal: describe_value costs tens of microseconds per call.
    upper = "" if maximum is None else f", at most {describe_value(maximum)}"
    domain = f"an integer at least {describe_value(minimum)}{upper}"
    if out is _HUGE:
        raise DomainError(name, value, f"{domain} (and of at most {MAX_INT_DIGITS} digits)")
    raise DomainError(name, value, domain)


_HUGE = object()  # _exact_int: an integer of more than MAX_INT_DIGITS digits
_MAX_INT_BITS = int(MAX_INT_DIGITS * 3.3219280948873626) + 1


def _exact_int(value):
    """``value`` as the exact Python ``int`` it equals, ``None`` when it is not an integer,
    or ``_HUGE`` for an integer of more than :data:`MAX_INT_DIGITS` digits."""
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)) or value is None or _is_masked(value):
        return None
    if isinstance(value, (np.timedelta64, np.datetime64)):  # numpy registers timedelta64 as an integer: a duration
        return None
    if isinstance(value, numbers.Integral):
        out = int(value)
        return _HUGE if out.bit_length() > _MAX_INT_BITS else out
    if isinstance(value, numbers.Rational):
        if value.denominator != 1:
            return None
        out = int(value.numerator)
        return _HUGE if out.bit_length() > _MAX_INT_BITS else out
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None
        if value.adjusted() >= MAX_INT_DIGITS:  # its exponent says it: no integer is built
            return _HUGE
        if value.adjusted() < 0:  # |value| < 1: an integer only if zero
            return 0 if value.is_zero() else None
        with decimal.localcontext() as ctx:
            ctx.prec = MAX_INT_DIGITS + 10
            if value != value.to_integral_value():
                return None
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return int(v) if math.isfinite(v) and v.is_integer() else None
    if isinstance(value, numbers.Real):
        try:
            out = int(value)
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            return None
        try:
            return out if value == out else None
        except (TypeError, ValueError, ArithmeticError):
            return None
    return None


def check_real(value, name: str, *, low=None, high=None, low_open=False, high_open=False) -> float:
    """A finite real number in the interval given by ``low``/``high``."""
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    domain = f"a finite real number in {'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
    out = _real(value, name, domain)
    if low is not None and (out < low or (low_open and out == low)):
        raise DomainError(name, value, domain)
    if high is not None and (out > high or (high_open and out == high)):
        raise DomainError(name, value, domain)
    return out


def _real(value, name: str, domain: str) -> float:
    # refused, not truncated: booleans (numpy's too), text, complex numbers (numpy complex scalars
    # and complex arrays would otherwise lose their imaginary part with only a ComplexWarning)
    if isinstance(value, (bool, np.bool_, str, bytes, complex, np.complexfloating)) or value is None:
        raise DomainError(name, value, domain)
    refuse_masked(value, name)
    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind not in "iuf":
            raise DomainError(name, value, domain)
        value = value[()]
    if isinstance(value, (np.timedelta64, np.datetime64)) or (
            isinstance(value, np.generic) and not isinstance(value, (np.integer, np.floating))):
        raise DomainError(name, value, domain)  # a numpy duration is registered as an integer
    try:
        if isinstance(value, numbers.Integral):
            out = float(int(value))
        else:
            # mpmath numbers are accepted through float(); a complex mpc is refused by float()
            out = float(value)
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        raise DomainError(name, value, domain) from None
    if not math.isfinite(out):
        raise DomainError(name, value, domain)
    return out


class Interval:
    """A real interval, the one domain of a quantity that the API and the command line both check.

    ``Interval(0, 1, low_open=True, high_open=True).check(tol, "tol")`` is
    :func:`check_real` with these ends; ``str()`` writes it as ``(0, 1)``. ``reason``, when
    given, says why the interval ends where it does; a refusal by :meth:`check` states it.
    """

    __slots__ = ("low", "high", "low_open", "high_open", "reason")

    def __init__(self, low: float, high: float, *, low_open: bool = False, high_open: bool = False, reason: str = ""):
        self.low, self.high, self.low_open, self.high_open = float(low), float(high), low_open, high_open
        self.reason = reason

    def check(self, value, name: str) -> float:
        """``value`` as a float in the interval, else a :class:`DomainError` naming ``name`` (and the reason)."""
        try:
            return check_real(value, name, low=self.low, high=self.high, low_open=self.low_open, high_open=self.high_open)
        except DomainError as exc:
            if not self.reason:
                raise
            raise DomainError(name, value, f"{exc.domain} ({self.reason})") from None

    def __contains__(self, value) -> bool:
        lo_ok = value > self.low if self.low_open else value >= self.low
        hi_ok = value < self.high if self.high_open else value <= self.high
        return bool(lo_ok and hi_ok)

    def __str__(self):
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"

    def __repr__(self):
        return f"Interval{self}"


#: The exponent alpha of the log-distance bias -alpha log(d + o) (the mass routines, the
#: ``log-distance`` encoding, ``--alpha``): beyond 1e15 the tail sums underflow every working precision.
ALPHA = Interval(0.0, 1e15, low_open=True)
#: The offset o of -alpha log(d + o) (``offset=``, ``--offset``).
OFFSET = Interval(1e-300, 1e300)
#: A growth tolerance of the margin (``tol=``, ``--tol``).
TOL = Interval(0.0, 1.0, low_open=True, high_open=True)
#: The content bound B: content scores within B of a constant (Theorem 10). The verdicts hold for
#: every finite B >= 0 (Theorem 11: a bounded content shift keeps D_n(W) -> 1 or away from 1), and
#: so do the bounds evaluated in the overflow-free form e^(-2B) (:func:`otprior.ot_dilution_bound`):
#: ``classify(score_bound=)``, an encoding's ``logit_bound``, ``classify --logit-bound``.
SCORE_BOUND = Interval(0.0, math.inf, high_open=True)
#: B where Theorem 10's band is evaluated with the factor e^(2B) (:func:`otprior.content_band`,
#: :func:`otprior.distant_mass_bounds`, an encoding's ``distant_mass_range``,
#: :func:`otprior.margin_for`; ``margin --score-bound``, ``mass --logit-bound``): e^(2B) is a
#: finite double only up to B = log(DBL_MAX) / 2 = 354.9, and 350 keeps a margin for the factors
#: it multiplies. Already at B = 350 the band of a mass of order one is [1e-304, 1 - 1e-304].
BAND_SCORE_BOUND = Interval(0.0, 350.0, reason="beyond it e^(2B), the factor of Theorem 10, overflows a double")
#: The balancing strength rho of causal OT attention (``rho=``, ``--rho``).
RHO = Interval(0.0, 1.0, high_open=True)


def _is_masked(value) -> bool:
    # numpy.ma is imported on first use (about 60 ms): no masked array exists before it is
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(value, ma.MaskedArray)


def refuse_masked(value, name: str):
    """Raise :class:`DomainError` naming ``name`` if ``value`` is a numpy masked array.

    ``np.asarray`` drops the mask and returns the masked entries' stored numbers, so a function
    would silently answer for values the caller had marked invalid. otprior refuses masked arrays
    everywhere it reads lengths, windows, parameters or scores (pass ``a.compressed()`` or
    ``a.filled(v)`` to say what is meant)."""
    if _is_masked(value):
        raise DomainError(
            name, f"a masked array of shape {np.shape(value)}",
            "a plain number or array (masked arrays are refused: pass a.compressed() or a.filled(value))",
        )


def check_window(window, n, name: str = "window") -> int:
    """A window size: an integer with 1 <= window <= n."""
    return check_int(window, name, minimum=1, maximum=n)


def check_scores(scores, work=0, rows=0) -> np.ndarray:
    """Scores: a real array of shape (..., n, n), n >= 1, finite on and below the diagonal.

    Complex values (whose imaginary part a float conversion would drop), booleans, strings,
    objects and ragged nestings are refused, never converted. ``work``: the ``n x n`` double arrays
    the caller's solve keeps besides an output of the input's size, ``rows``: its length-``n`` double vectors (blocks of
    prefixes' buffers); the whole is checked against the
    memory cap (``otprior.limits``) before any of it, this function's own mask included, is allocated."""
    refuse_masked(scores, "scores")
    try:
        arr = np.asarray(scores)
    except (ValueError, TypeError):
        raise DomainError("scores", "a ragged or non-numeric nesting", "a real array of shape (..., n, n)") from None
    if arr.dtype.kind not in "iuf":
        raise DomainError("scores", f"an array of dtype {arr.dtype}", "a real (integer or floating) array of shape (..., n, n)")
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2] or arr.shape[-1] < 1:
        raise DomainError("scores", f"array of shape {arr.shape}", "a finite array of shape (..., n, n) with n >= 1")
    from .limits import check_allocation

    n = arr.shape[-1]
    # the output and a float copy of the input (8 bytes each per entry), the finiteness mask (1) and the solve's
    # own arrays, before the copy is made: a broadcast view of 30000 x 30000 zeros costs nothing itself and asked for
    # about 40 GB (an int or float32 view was copied to float64 first)
    check_allocation(17 * arr.size + 8 * work * n * n + 8 * rows * n, "scores", f"array of shape {arr.shape}")
    arr = arr.astype(float, copy=False)
    # only the causal (lower) triangle is used; it must be finite (the triangle is looked at
    # only when some entry is not: one pass over the array in the common case)
    finite = np.isfinite(arr)
    if not finite.all() and not np.all(finite[..., np.tril(np.ones(arr.shape[-2:], dtype=bool))]):
        raise DomainError("scores", "an array with non-finite entries", "finite entries on and below the diagonal")
    return arr


MACHINE_EPSILON = float(np.finfo(float).eps)  # 2^-52: the spacing of doubles at 1, the one definition in otprior


def real_array(value, name: str, domain: str) -> np.ndarray:
    """``value`` as a float array, refusing (``DomainError``) what a plain ``np.asarray(value, float)``
    would truncate or choke on: complex entries (their imaginary part would be dropped), booleans,
    text, dicts, ragged nesting and integers too large for a double, and memoryviews (whose items may
    be raw bytes: ``memoryview(b"abc")`` is not the numbers 97, 98, 99). Finiteness is the caller's check.
    """
    if isinstance(value, (str, bytes, bytearray, memoryview, dict, bool, np.bool_)) or value is None:
        raise DomainError(name, value, domain)
    refuse_masked(value, name)
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise DomainError(name, value, domain) from None
    if raw.dtype.kind == "O":
        try:
            items = [_real(x, name, domain) for x in raw.ravel()]
        except DomainError:
            raise DomainError(name, value, domain) from None
        return np.array(items, dtype=float).reshape(raw.shape)
    if raw.dtype.kind not in "iuf":
        raise DomainError(name, value, domain)
    try:
        return raw.astype(float)
    except (TypeError, ValueError, OverflowError):
        raise DomainError(name, value, domain) from None
