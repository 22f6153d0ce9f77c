"""Theorem 10: the band of distant mass over content scores within ``B`` of a constant.

Statement (``proofs/content_bound.md``). Let a query's logits be
:math:`b(d)+c+e_d` with :math:`|e_d|\\le B`, and let :math:`H` and :math:`T` be the window
and distant sums of :math:`e^{b(d)}`, so that the constant-content distant mass is
:math:`D=T/(H+T)`. Then

.. math::

    D^- = \\frac{T}{T+e^{2B}H} = \\frac{D}{D+e^{2B}(1-D)} \\;\\le\\; D_{\\text{content}}
    \\;\\le\\; \\frac{T}{T+e^{-2B}H} = \\frac{D}{D+e^{-2B}(1-D)} = D^+,

and both ends are attained. This module is the one place where the band is computed:
:func:`content_band` for floats and arrays, :func:`content_band_balls` for Arb balls
(used by the certified bounds and by the margin search).
"""

from __future__ import annotations

from typing import NamedTuple

import flint
import numpy as np

from ._balls import arb_from_float
from ._validation import BAND_SCORE_BOUND, DomainError, check_real

__all__ = ["ContentBand", "content_band", "content_band_balls", "MAX_SCORE_BOUND"]

#: The largest score bound B of the band routes (:data:`otprior._validation.BAND_SCORE_BOUND`): e^(2B) stays a finite double.
MAX_SCORE_BOUND = BAND_SCORE_BOUND.high


class ContentBand(NamedTuple):
    """``(lower, upper)``: the extreme distant masses over content within the score bound."""

    lower: float | np.ndarray
    upper: float | np.ndarray

    def as_dict(self) -> dict:
        lo, hi = self
        return {"lower": np.asarray(lo).tolist(), "upper": np.asarray(hi).tolist()}


def content_band(distant_mass, score_bound, *, window_mass=None) -> ContentBand:
    """Band :math:`[D^-, D^+]` of distant mass over content scores within ``score_bound`` (Theorem 10).

    Parameters
    ----------
    distant_mass : float or array_like
        Constant-content distant mass :math:`D\\in[0,1]`.
    score_bound : float or array_like
        ``B`` in ``[0, 350]`` (:data:`otprior._validation.BAND_SCORE_BOUND`: beyond it the factor
        :math:`e^{2B}` overflows a double).
    window_mass : float or array_like, optional
        :math:`1-D` when known to full relative accuracy (it is when computed as
        :math:`H/(H+T)`); otherwise ``1 - distant_mass`` is used.

    Returns
    -------
    ContentBand
        ``(lower, upper)`` with :math:`D^\\mp = D/(D+e^{\\pm2B}(1-D))`, floats for scalar input,
        arrays otherwise. Floating-point estimates (a few ulps); the proved band is
        :func:`otprior.distant_mass_bounds` with ``score_bound``.

    Examples
    --------
    >>> lo, hi = content_band(0.5, 0.5)
    >>> round(lo, 6), round(hi, 6)   # 1 / (1 + e), 1 / (1 + 1/e)
    (0.268941, 0.731059)
    """
    D = _checked(distant_mass, "distant_mass", low=0.0, high=1.0)
    B = _checked(score_bound, "score_bound", interval=BAND_SCORE_BOUND)
    m = 1.0 - D if window_mass is None else _checked(window_mass, "window_mass", low=0.0, high=1.0)
    k = np.exp(2.0 * np.asarray(B, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(D > 0, D / (D + k * m), 0.0)
        hi = np.where(D > 0, D / (D + m / k), 0.0)
    if np.ndim(lo) == 0:
        return ContentBand(float(lo), float(hi))
    return ContentBand(lo, hi)


def _checked(x, name, interval=None, **domain):
    """A float, or a float array, every element checked by ``check_real`` or ``interval``'s check
    (``np.True_`` refused)."""
    arr = np.asarray(x, dtype=object)
    if interval is not None:
        check = np.vectorize(lambda v: interval.check(_no_bool(v, name), name), otypes=[float])
    else:
        check = np.vectorize(lambda v: check_real(_no_bool(v, name), name, **domain), otypes=[float])
    return check(arr) if arr.ndim else np.float64(check(arr))


def _no_bool(v, name):
    if isinstance(v, (bool, np.bool_)):
        raise DomainError(name, v, "a real number, not a boolean")
    return v


def content_band_balls(tail: flint.arb, head: flint.arb, score_bound: float):
    """Balls containing :math:`D^-=T/(T+e^{2B}H)` and :math:`D^+=T/(T+e^{-2B}H)` (Theorem 10).

    ``tail`` and ``head`` are Arb balls containing :math:`T>0` and :math:`H>0` (or ``tail``
    exactly zero, when the window covers every key); ``score_bound`` is a float ``B >= 0``.
    Evaluated as :math:`1/(1+e^{\\pm2B}H/T)`, with one ratio, so that the balls stay as
    tight as those of ``H`` and ``T``. Call inside :func:`otprior._balls.arb_precision`.
    """
    if tail == 0:
        zero = flint.arb(0)
        return zero, zero
    ratio = head / tail
    one = flint.arb(1)
    if score_bound == 0.0:
        d = one / (one + ratio)
        return d, d
    k = (2 * arb_from_float(score_bound)).exp()
    return one / (one + k * ratio), one / (one + ratio / k)

