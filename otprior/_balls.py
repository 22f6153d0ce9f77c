"""Rigorous enclosures: a small, thread-safe layer over python-flint's ``arb`` balls.

Every result otprior calls *certified* is an :class:`Enclosure` computed with
outward-rounded ball arithmetic (Arb, through python-flint). An ``arb`` ball
``[m +/- r]`` is guaranteed by Arb to contain the exact value of the expression that
produced it; converting its end points to binary64 is done outward (``lo`` rounded down,
``hi`` rounded up), so ``lo <= exact <= hi`` holds for the floats returned as well.

python-flint keeps its working precision in one process-wide context (``flint.ctx``).
:func:`arb_precision` changes it under a re-entrant lock and restores it, so concurrent
callers never see each other's precision.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import flint
import numpy as np

__all__ = ["Enclosure", "EnclosureArray", "arb_precision", "enclosure_from_arb", "arb_from_float", "is_tight", "enclosure_from_ends"]

_LOCK = threading.RLock()


@contextmanager
def arb_precision(prec: int):
    """Run a block with ``flint.ctx.prec = prec`` bits, under a lock, and restore it."""
    with _LOCK:
        old = flint.ctx.prec
        flint.ctx.prec = int(prec)
        try:
            yield
        finally:
            flint.ctx.prec = old


def arb_from_float(x: float) -> flint.arb:
    """The binary64 number ``x`` as an exact ``arb`` (radius 0). ``x`` must be finite."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"arb_from_float needs a finite float, got {x!r}")
    m, e = math.frexp(x)
    return flint.arb(int(m * (1 << 53))) * flint.arb(2) ** (e - 53)


def _down(x: float) -> float:
    return math.nextafter(x, -math.inf)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


@dataclass(frozen=True)
class Enclosure:
    """A proved enclosure ``lo <= exact <= hi`` of a real number.

    Attributes
    ----------
    lo, hi : float
        End points, rounded outward from the ball, so they enclose the exact value.
    mid, rad : float
        The ball's midpoint and radius (``mid`` rounded to nearest, ``rad`` rounded up;
        ``[mid - rad, mid + rad]`` may be a few ulps narrower than ``[lo, hi]``, which is
        the enclosure to use).
    """

    lo: float
    hi: float
    mid: float
    rad: float

    def __contains__(self, x) -> bool:
        return self.lo <= x <= self.hi

    def __iter__(self):  # unpacks as (lo, hi), as the earlier tuple return did
        yield self.lo
        yield self.hi

    def __len__(self) -> int:  # a sequence (lo, hi): indexing and np.array see the pair
        return 2

    def __getitem__(self, index):
        return (self.lo, self.hi)[index]

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def relative_width(self) -> float:
        m = abs(self.mid)
        return math.inf if m == 0 else self.width / m

    def as_dict(self) -> dict:
        return asdict(self)


def enclosure_from_arb(x: flint.arb) -> Enclosure:
    """Outward-rounded binary64 end points of an ``arb`` ball.

    ``float(arb.lower())`` rounds to nearest; one step outward makes it a proved bound.
    Raises ``ValueError`` if the ball is not finite (the caller must raise precision or
    refuse)."""
    if not x.is_finite():
        raise ValueError("the ball is not finite")
    lo = float(x.lower())
    hi = float(x.upper())
    lo = _down(lo) if lo != 0.0 or not (x.lower() >= 0) else 0.0
    hi = _up(hi) if hi != 0.0 or not (x.upper() <= 0) else 0.0
    mid = float(x.mid())
    rad = _up(float(x.rad()))
    return Enclosure(lo=lo, hi=hi, mid=mid, rad=rad)


def is_tight(x: flint.arb, bits: int) -> bool:
    """Whether the ball ``x`` is finite and its radius is at most ``2^-bits`` of its magnitude,
    or below binary64's smallest subnormal (then its float end points are adjacent anyway)."""
    if not x.is_finite():
        return False
    rad = x.rad()
    if rad == 0:
        return True
    if abs(x).upper() < flint.arb(2) ** -1080:
        return True
    return bool(rad < abs(x).lower() * flint.arb(2) ** (-bits))


@dataclass(frozen=True)
class EnclosureArray:
    """Element-wise proved enclosures ``lo <= exact <= hi`` of an array of reals.

    The array counterpart of :class:`Enclosure`, with the same fields as numpy arrays of
    one shape; unpacks as ``(lo, hi)``.
    """

    lo: np.ndarray
    hi: np.ndarray
    mid: np.ndarray
    rad: np.ndarray

    def __iter__(self):
        yield self.lo
        yield self.hi

    @property
    def shape(self) -> tuple:
        return self.lo.shape

    @property
    def width(self) -> np.ndarray:
        return self.hi - self.lo

    def contains(self, x) -> np.ndarray:
        """Element-wise ``lo <= x <= hi``."""
        x = np.asarray(x, dtype=float)
        return (self.lo <= x) & (x <= self.hi)

    def __getitem__(self, index) -> Enclosure | EnclosureArray:
        parts = [np.asarray(getattr(self, f))[index] for f in ("lo", "hi", "mid", "rad")]
        if np.ndim(parts[0]) == 0:
            return Enclosure(*(float(p) for p in parts))
        return EnclosureArray(*parts)

    def as_dict(self) -> dict:
        return {f: getattr(self, f).tolist() for f in ("lo", "hi", "mid", "rad")}

    @classmethod
    def stack(cls, items, shape) -> EnclosureArray:
        """From a flat sequence of :class:`Enclosure` in C order, reshaped to ``shape``."""
        arrays = [np.array([getattr(e, f) for e in items], dtype=float).reshape(shape) for f in ("lo", "hi", "mid", "rad")]
        return cls(*arrays)


def enclosure_from_ends(lower: flint.arb, upper: flint.arb) -> Enclosure:
    """The enclosure ``[lower.lower(), upper.upper()]`` rounded outward: for a quantity known
    to lie between two balls (e.g. the two ends of a band). Tighter than the hull ball,
    whose radius Arb stores with 30 bits."""
    lo = enclosure_from_arb(lower).lo
    hi = enclosure_from_arb(upper).hi
    mid = 0.5 * lo + 0.5 * hi
    rad = _up(max(mid - lo, hi - mid))
    return Enclosure(lo=lo, hi=hi, mid=mid, rad=rad)
