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

__all__ = ["Enclosure", "arb_precision", "enclosure_from_arb", "arb_from_float"]

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
