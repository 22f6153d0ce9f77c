"""The normaliser base class, its registry, and the verdict from a content threshold.

A normaliser maps a row of logits (distance order: entry ``d`` is the key ``d`` tokens back)
to attention weights. With a positional bias ``b`` and content ``e_d``, the logits are
``b(d) + c + e_d``; the *constant-score prior* of the pair is the row at ``e = 0, c = 0``.
Theorems N1-N6 (``proofs/normalisers.md``) classify each pair by the *content threshold*
``Delta*``: the uniform advantage of the window's logits over the others' at and above which
the window keeps a share bounded away from zero as ``n`` grows. With content within ``B`` of a
constant the advantage ranges over ``[-2B, 2B]``, and every normaliser here is monotone (raising
a window logit never lowers the window's share), so:

- ``Delta* < -2B`` (or ``<=`` when the threshold is not strict): **bounded**;
- ``Delta* > 2B`` (or ``>=`` when strict): **diluting**;
- otherwise **content-dependent**, with ``threshold = Delta*``.

``score_bound`` has this one meaning for every normaliser: content within ``B`` of a constant that
is free (it may change with ``n``). The softmax family, entmax and the causal OT operator are
invariant under that constant; stick-breaking is not, and Theorem N4 classifies it with the
constant free (bounded iff ``e^b`` is summable, else content-dependent).
"""

from __future__ import annotations

import math

import numpy as np

from .._registry import Registry
from .._validation import DomainError, check_int, check_window
from ..encodings._base import Verdict, check_lengths, decisive
from ..limits import check_allocation

__all__ = ["Normaliser", "REGISTRY", "register", "threshold_verdict", "row", "softmax_verdict"]

REGISTRY = Registry("normaliser")
register = REGISTRY.register


def row(logits) -> np.ndarray:
    """A finite 1-D row of logits (distance order)."""
    z = np.asarray(logits, dtype=float)
    if z.ndim != 1 or z.size < 1 or not np.all(np.isfinite(z)):
        raise DomainError("logits", f"array of shape {z.shape}", "a finite 1-D row of logits")
    return z


def threshold_verdict(encoding, normaliser, B, threshold, *, strict, why, rate=None, window_mass=None, limit=None):
    """The verdict for content threshold ``threshold`` under content bound ``B`` (module notes)."""
    if threshold == -math.inf or (threshold < -2 * B) or (not strict and threshold == -2 * B):
        kind, bounded = "bounded", True
    elif threshold == math.inf or threshold > 2 * B or (strict and threshold == 2 * B):
        kind, bounded = "diluting", False
    else:
        kind, bounded = "content-dependent", None
    t = None if not math.isfinite(threshold) else float(threshold)
    if t is not None:
        rel = ">" if strict else ">="
        why = (
            f"{why} The window keeps its share iff its content advantage Delta {rel} {decisive(t, 2 * B if kind == 'diluting' else -2 * B)}; "
            f"content within B = {B:.6g} gives Delta in [-{2 * B:.6g}, {2 * B:.6g}]."
        )
    lim = limit
    if lim is None and kind == "diluting":
        lim = lambda W: 1.0  # noqa: E731
    return Verdict(encoding, bounded, kind, why, rate, threshold=t, threshold_strict=strict, normaliser=normaliser, score_bound=B,
                   limit_fn=lim, window_mass_fn=window_mass)


def softmax_verdict(encoding, B):
    """The encoding's own verdict (softmax), through the one public route ``otprior.classify``."""
    from ..classification import classify

    return classify(encoding, None, B)


class Normaliser:
    """Base class: a map from a row of logits to attention weights, and its pair verdicts."""

    name = "normaliser"

    def attention(self, logits) -> np.ndarray:
        """The weights of one row of logits (distance order, entry 0 the nearest key)."""
        raise NotImplementedError

    def _row_weights(self, encoding, n: int) -> np.ndarray:
        """The constant-score row of the pair at length ``n`` (direct)."""
        check_allocation(8 * n, "n", n)
        b = np.asarray(encoding.log_weights(n), dtype=float)
        return self.attention(np.where(np.isfinite(b), b, -1e300))

    def window_mass(self, encoding, window, n):
        """:math:`m_n(W)` of the pair's constant-score prior; ``n`` array-like."""
        window = check_int(window, "window")
        values, shape = check_lengths(n)
        out = []
        for v in values:
            check_window(window, v)
            out.append(float(self._window_mass(encoding, window, v)))
        return out[0] if shape is None else np.asarray(out).reshape(shape)

    def _window_mass(self, encoding, window, n):
        return float(np.sum(self._row_weights(encoding, n)[:window]))

    def classify(self, encoding, B):
        raise NotImplementedError

    def mass_function(self, encoding):
        """``(window, n) -> m_n(W)`` of this normaliser with ``encoding`` (for :attr:`Verdict.window_mass_fn`)."""
        return lambda window, n: self.window_mass(encoding, window, n)

    def __repr__(self):
        from dataclasses import fields

        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.init)
        return f"{type(self).__name__}({args})"
