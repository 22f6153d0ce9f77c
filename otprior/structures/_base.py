"""The attention-structure base class, its registry, and the masses of a bias row under a structure.

A *structure* says which keys a query sees and what else enters its softmax, beside the
positional bias :math:`b(d)` of an encoding (``proofs/attention_structure.md``). The query with
``n`` keys (0-based position ``n - 1``) under a structure sees the keys at distances
``d = 0 .. r(n) - 1`` (every mask here keeps a contiguous run of the nearest keys), its logits
may be soft-capped, :math:`z \\mapsto c\\tanh(z/c)`, and a sink logit ``s`` may join the
denominator only. Its constant-content row is

.. math:: a_d = \\frac{e^{\\beta(d)}}{\\sum_{k<r(n)} e^{\\beta(k)} + e^{s}}, \\qquad
   \\beta = b \\text{ or } c\\tanh(b/c),

and :math:`m_n(W) = \\sum_{d<\\min(W, r)} a_d`, :math:`D_n(W) = 1 - m_n(W)` (the mass off the
window: the distant keys and the sink), ``sink_mass`` the sink's share.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, logsumexp

from .._registry import Registry
from .._validation import DomainError, check_int, check_window
from ..encodings._base import DIRECT_MAX, Encoding, check_lengths
from ..limits import check_allocation

__all__ = ["Structure", "REGISTRY", "register", "row_masses"]

REGISTRY = Registry("structure")
register = REGISTRY.register


class Structure:
    """Base class: which keys a query sees (``visible``), a logit cap, a sink logit.

    Subclasses are frozen dataclasses registered by name. The three hooks compose
    (:func:`otprior.structures.compose`): the visible counts by their minimum, the sinks by
    adding their weights, at most one cap.
    """

    name = "structure"

    # -- the hooks ---------------------------------------------------------------------------
    def visible(self, n: int) -> int:
        """``r(n)``: the number of nearest keys (distances ``0 .. r - 1``) the query with ``n`` keys sees."""
        return n

    @property
    def logit_cap(self):
        """The soft cap ``c`` (logits :math:`c\\tanh(z/c)`), or ``None``."""
        return None

    @property
    def sink_logit(self):
        """The sink logit ``s`` (joins the denominator only), one per head as a tuple, or ``None``."""
        return None

    def extra_log_weight(self, n: int):
        """``log`` of the weight that joins the denominator beside the keys at length ``n`` (a sink,
        summary tokens), or ``None``: by default the sink logit."""
        s = self.sink_logit
        return None if s is None else float(s)

    def parts(self) -> tuple:
        """The elementary structures this one is made of (itself, for an elementary one)."""
        return (self,)

    # -- per head ----------------------------------------------------------------------------
    @property
    def heads(self):
        s = self.sink_logit
        return len(s) if isinstance(s, tuple) else None

    def for_head(self, h: int):
        """This structure for head ``h`` (per-head sinks picked out); itself when nothing is per head."""
        return self

    # -- masses ------------------------------------------------------------------------------
    def masses(self, encoding, window: int, n: int) -> tuple:
        """``(m_n(W), D_n(W), sink share)`` of a single-head ``encoding`` under this structure at one ``n``."""
        return row_masses(encoding, self, window, n)

    def _over(self, encoding, window, n, index):
        if not isinstance(encoding, Encoding):
            raise DomainError("encoding", encoding, "an instance of an otprior.encodings class")
        hs = encoding.per_head()
        H = self.heads
        if hs is not None or H is not None:
            count = len(hs) if hs is not None else H
            if hs is not None and H is not None and len(hs) != H:
                raise DomainError("structure", self, f"one sink per head of the encoding ({len(hs)} heads)")
            singles = hs if hs is not None else (encoding,) * count
            return np.stack([np.asarray(self.for_head(h)._over(e, window, n, index), dtype=float) for h, e in enumerate(singles)])
        window = check_int(window, "window")
        values, shape = check_lengths(n)
        out = []
        for v in values:
            check_window(window, v)
            out.append(self.masses(encoding, window, v)[index])
        return out[0] if shape is None else np.asarray(out, dtype=float).reshape(shape)

    def window_mass(self, encoding, window, n):
        """:math:`m_n(W)` of ``encoding``'s constant-content row under this structure; ``n`` array-like."""
        return self._over(encoding, window, n, 0)

    def distant_mass(self, encoding, window, n):
        """:math:`D_n(W) = 1 - m_n(W)`: the distant keys' share plus the sink's."""
        return self._over(encoding, window, n, 1)

    def sink_mass(self, encoding, window, n):
        """The sink's share of the row (0 without a sink)."""
        return self._over(encoding, window, n, 2)

    def classify(self, encoding, B):
        """The verdict of ``encoding`` under this structure (Theorems S1-S6, ``proofs/attention_structure.md``)."""
        from ._verdicts import structure_verdict

        return structure_verdict(encoding, self, B)

    def params(self) -> dict:
        from dataclasses import fields

        return {f.name: getattr(self, f.name) for f in fields(self) if f.init}

    def __repr__(self):
        from dataclasses import fields

        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.init)
        return f"{type(self).__name__}({args})"


def _capped(z, cap):
    return z if cap is None else cap * np.tanh(z / cap)


def row_logits(encoding, structure, n: int) -> np.ndarray:
    """The visible logits ``beta(0 .. r-1)`` of the query with ``n`` keys (direct; ``r`` up to ``DIRECT_MAX``)."""
    r = structure.visible(n)
    check_allocation(8 * r, "n", n)
    if r > DIRECT_MAX:
        raise DomainError("n", n, f"a length whose visible row (here {r} keys) is at most {DIRECT_MAX} for direct summation")
    z = np.asarray(encoding.bias(np.arange(r, dtype=float), n), dtype=float)
    if np.any(np.isnan(z)) or np.any(z == np.inf):
        raise DomainError("bias", "non-finite values", "a bias finite (or -inf) at every visible distance")
    return _capped(z, structure.logit_cap)


def row_masses(encoding, structure, window: int, n: int) -> tuple:
    """``(m, D, sink)`` of one row (Definition S, ``proofs/attention_structure.md``).

    Fast path (Lemma S0): a full row without a cap takes the encoding's own masses (closed forms),
    and with a sink its log-normaliser :math:`\\log Z_n = b(0) - \\log m_n(1)`. Otherwise the
    visible row is summed directly by log-sum-exp.
    """
    r = structure.visible(n)
    if isinstance(structure.sink_logit, tuple):
        raise DomainError("structure", structure, "one sink logit per single-head row (use for_head)")
    s = structure.extra_log_weight(n)
    cap = structure.logit_cap
    if cap is not None and encoding.far_profile(1) == ("constant-tail", 0.0, -math.inf, 0.0):
        cap = None  # b = 0 everywhere (NoPE, RoPE): c tanh(0 / c) = 0, the cap changes nothing at constant content
    if r == n and cap is None:
        m, D = encoding._masses(window, n)
        if s is None:
            return float(m), float(D), 0.0
        b0 = float(np.asarray(encoding.bias(np.zeros(1), n), dtype=float).reshape(-1)[0])
        m1 = float(encoding._masses(1, n)[0])
        if math.isfinite(b0) and m1 > 0.0:
            logZ = b0 - math.log(m1)
            keep = float(expit(logZ - s))  # Z / (Z + e^s), without overflow
            sink = float(expit(s - logZ))
            return float(m) * keep, 1.0 - float(m) * keep, sink
    z = row_logits(encoding, structure, n)
    parts = [z] if s is None else [z, np.array([float(s)])]
    total = logsumexp(np.concatenate(parts))
    W = min(window, r)
    head = logsumexp(z[:W]) if W > 0 else -math.inf
    m = float(np.exp(head - total))
    tail_parts = [z[W:]] if s is None else [z[W:], np.array([float(s)])]
    tail = np.concatenate(tail_parts)
    D = float(np.exp(logsumexp(tail) - total)) if tail.size else 0.0
    sink = 0.0 if s is None else float(np.exp(float(s) - total))
    return m, D, sink
