"""The encoding base class, the verdict, the registry and the shared numerics.

Definition (``proofs/classification.md``). For a relative bias :math:`b(d)`, ``d >= 0``, the
constant-content prior of query ``n`` (``n`` keys, distances ``0 .. n-1``) is
:math:`\\pi_n(d) \\propto e^{b(d)}` and

.. math:: m_n(W) = \\sum_{d<W} \\pi_n(d), \\qquad D_n(W) = 1 - m_n(W).
"""

from __future__ import annotations

import numbers
from dataclasses import MISSING, dataclass, field, fields

import numpy as np
from scipy.special import logsumexp

from .._registry import Registry
from .._validation import DomainError, check_int, check_real, check_window, refuse_masked
from ..content_bound import content_band
from ..limits import check_allocation
from ._certified import MAX_LENGTH, ONE, ZERO, MassEnclosures

__all__ = ["Encoding", "Verdict", "REGISTRY", "register", "decisive", "DIRECT_MAX", "MassEnclosures"]

REGISTRY = Registry("encoding")
register = REGISTRY.register

DIRECT_MAX = 1 << 22  # longest prefix summed term by term where no closed form exists (time bound)


def decisive(x: float, ref: float) -> str:
    """``x`` printed with the fewest significant digits that keep its side of ``ref``.

    ``decisive(1.0000001, 1)`` is ``'1.0000001'`` (not ``'1'``), so that a sentence such as
    "summable since the exponent x > 1" is true as printed.
    """
    x, ref = float(x), float(ref)
    for p in range(4, 18):
        s = f"{x:.{p}g}"
        v = float(s)
        if (v > ref) == (x > ref) and (v < ref) == (x < ref) and (v == ref) == (x == ref):
            return s
    return repr(x)


def check_lengths(n):
    """``n`` as validated integers: returns ``(values, shape)``; ``shape`` is None for a scalar."""
    if isinstance(n, (numbers.Number, np.generic)) and not isinstance(n, (bool, np.bool_)):
        return [check_int(n, "n")], None
    if isinstance(n, (str, bytes, bytearray, memoryview, bool, np.bool_)) or n is None:  # a memoryview may hold raw bytes
        raise DomainError("n", n, "an integer >= 1 or an array of them")
    refuse_masked(n, "n")
    arr = np.asarray(n, dtype=object)
    check_allocation(8 * arr.size, "n", f"array of {arr.size} lengths")
    return [check_int(v, "n") for v in arr.ravel()], arr.shape


def over_lengths(window, n, scalar):
    """Apply ``scalar(window, n_i)`` to every length (``window <= n_i`` checked by ``check_window``)."""
    window = check_int(window, "window")
    values, shape = check_lengths(n)
    out = []
    for v in values:
        check_window(window, v)
        out.append(float(scalar(window, v)))
    if shape is None:
        return out[0]
    return np.asarray(out, dtype=float).reshape(shape)


def direct_masses(log_weights: np.ndarray, window: int) -> tuple:
    """``(m, D)`` from the log-weights of one row (distance order) by log-sum-exp."""
    if window >= len(log_weights):
        return 1.0, 0.0
    total = logsumexp(log_weights)
    head = logsumexp(log_weights[:window])
    tail = logsumexp(log_weights[window:])
    return float(np.exp(head - total)), float(np.exp(tail - total))


@dataclass(frozen=True)
class Verdict:
    """The classification of an encoding (with a normaliser) under bounded content.

    Attributes
    ----------
    encoding : Encoding
    bounded : bool or None
        ``True`` for "bounded", ``False`` for "diluting", ``None`` otherwise.
    kind : {"bounded", "diluting", "oscillating", "content-dependent", "undecided"}
        "content-dependent": whether a window keeps its mass depends on the content scores;
        ``threshold`` says how. "oscillating": :math:`D_n(W)` has no limit as ``n`` grows
        (:meth:`distant_mass_bounds` gives its liminf and limsup; ``bounded`` is ``True`` when the
        limsup is below 1, Theorem 11's definition of bounded, else ``None``).
    reason : str
        A sentence a reader can check (parameters printed with the digits that decide it).
    rate : str or None
        How the window mass vanishes (diluting) or how ``D_n`` approaches its limit (bounded).
    threshold : float or None
        For "content-dependent": the content advantage ``Delta`` of the window's keys over
        the rest at and above which (strictly above when ``threshold_strict``) the window keeps
        a share bounded away from zero.
    normaliser : object or None
        The normaliser (``None``: softmax).
    score_bound : float
        The content bound ``B`` the verdict assumed.
    limit_fn : callable or None
        ``W -> D_oo(W)`` where the pair's constant-score limit is known in closed form or by
        summation (:meth:`limit_distant_mass` answers through it).
    window_mass_fn : callable or None
        ``(W, n) -> m_n(W)`` of the pair when the normaliser changes the encoding's own
        window mass (:meth:`window_mass` answers through it).
    bounds_fn : callable or None
        ``W -> (liminf, limsup)`` of :math:`D_n(W)` as ``n -> oo`` (an oscillating verdict's
        answer; :meth:`distant_mass_bounds` falls back on the limit where one exists).
    structure : object or None
        The attention structure (:mod:`otprior.structures`) the verdict assumed (``None``: full causal).
    """

    encoding: object
    bounded: bool | None
    kind: str
    reason: str
    rate: str | None = None
    threshold: float | None = None
    threshold_strict: bool = False
    normaliser: object = None
    score_bound: float = 0.0
    limit_fn: object = field(default=None, repr=False, compare=False)
    window_mass_fn: object = field(default=None, repr=False, compare=False)
    bounds_fn: object = field(default=None, repr=False, compare=False)
    structure: object = field(default=None, repr=False, compare=False)

    def distant_mass_bounds(self, window) -> tuple:
        """``(liminf, limsup)`` of the constant-score :math:`D_n(W)` as ``n -> oo``.

        Equal to ``(D_oo(W), D_oo(W))`` where the limit exists (:meth:`limit_distant_mass`);
        an oscillating verdict gives two different numbers.
        """
        window = check_int(window, "window")
        if self.bounds_fn is not None:
            lo, hi = self.bounds_fn(window)
            return float(lo), float(hi)
        D = self.limit_distant_mass(window)
        return D, D

    def __repr__(self):
        # one summary line: the reason, rate and per-field detail are attributes (a multi-head
        # classification is a tuple of these, and its repr stays readable in a REPL)
        pair = repr(self.encoding)
        if len(pair) > 80:
            pair = pair[:76] + " ...)"
        if self.normaliser is not None:
            pair += f" with {self.normaliser!r}"
        return f"<Verdict {self.kind}: {pair}>"

    def limit_distant_mass(self, window) -> float:
        """:math:`D_\\infty(W) = \\lim_{n\\to\\infty} D_n(W)` of the pair's constant-score prior.

        1.0 when the pair dilutes (:math:`D_n(W) \\to 1`), the limit when it is bounded; a
        content-dependent pair whose threshold lies above zero loses its window at constant
        content (1.0). Raises :class:`~otprior.DomainError` (parameter ``window``) where the limit is
        not known or does not exist: undecided pairs, pairs without a known limit (some
        normalisers), and rows whose :math:`D_n(W)` oscillates with ``n`` (Falcon's bfloat16 ALiBi).
        """
        window = check_int(window, "window")
        if self.kind == "oscillating":
            if self.bounds_fn is None:
                raise DomainError("window", window, "a pair whose D_n(W) converges (this one oscillates)")
            lo, hi = self.distant_mass_bounds(window)
            if lo != hi:
                raise DomainError("window", window, f"a pair whose D_n(W) converges (here liminf {lo:.6g} < limsup {hi:.6g})")
            return lo
        if self.limit_fn is not None:
            return float(self.limit_fn(window))
        if self.kind == "diluting":
            return 1.0
        if self.kind == "content-dependent" and self.threshold is not None:
            # at constant content (Delta = 0) the window is lost when 0 is below the threshold
            if self.threshold > 0 or (self.threshold == 0 and self.threshold_strict):
                return 1.0
        raise DomainError("window", window, f"a pair whose constant-score limit is known (this one is {self.kind})")

    def window_mass(self, window, n):
        """The constant-score prior's window mass :math:`m_n(W)` of the pair, at any ``n`` (array-like)."""
        if self.window_mass_fn is not None:
            return self.window_mass_fn(window, n)
        return self.encoding.window_mass(window, n)

    def as_dict(self, window=None) -> dict:
        out = {
            "encoding": repr(self.encoding),
            "normaliser": None if self.normaliser is None else repr(self.normaliser),
            "bounded": self.bounded,
            "kind": self.kind,
            "reason": self.reason,
            "rate": self.rate,
            "threshold": self.threshold,
            "threshold_strict": self.threshold_strict,
            "score_bound": self.score_bound,
        }
        if self.structure is not None:
            out["structure"] = repr(self.structure)
        if window is not None and self.kind == "oscillating":
            out["liminf_distant_mass"], out["limsup_distant_mass"] = self.distant_mass_bounds(window)
        elif window is not None and self.kind != "undecided":
            out["limit_distant_mass"] = self.limit_distant_mass(window)
        return out


class Encoding:
    """Base class: a positional bias ``b(d)`` (``d = query - key >= 0``) and its masses.

    Subclasses are frozen dataclasses registered by name (``@register``). They implement
    ``bias(d, n=None)`` and ``_verdict()``; they may override ``_masses(window, n)`` with a
    closed form (scalar ``n``; the base sums the bias directly). Multi-head instances
    (``heads`` not None) answer per head with a leading head axis.
    """

    name = "encoding"
    _head_fields: tuple = ()  # fields that may hold one value per head

    # -- parameters -------------------------------------------------------------------
    @property
    def score_bound(self) -> float:
        """The bound ``B`` on content logits (``logit_bound``)."""
        return float(getattr(self, "logit_bound", 0.0))

    @property
    def heads(self):
        """Number of heads, or ``None`` for a single head."""
        for name in self._head_fields:
            value = getattr(self, name)
            if isinstance(value, tuple):
                return len(value)
        return None

    def per_head(self):
        """The single-head encodings, in head order (``None`` for a single head)."""
        H = self.heads
        if H is None:
            return None
        out = []
        for h in range(H):
            changes = {}
            for name in self._head_fields:
                value = getattr(self, name)
                if isinstance(value, tuple):
                    changes[name] = value[h]
            out.append(self._replace(**changes))
        return tuple(out)

    def params(self) -> dict:
        """The constructor parameters and their values (the dataclass fields a user sets)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init and not f.name.startswith("_")}

    def _replace(self, **changes):
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs.update(changes)
        return type(self)(**kwargs)

    # -- the bias and its masses ------------------------------------------------------
    def bias(self, d, n=None):
        """The bias :math:`b(d)` at distances ``d`` (array) for a query with ``n`` keys."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement bias(self, d, n=None): a subclass of otprior.encodings.Encoding "
            "returns b(d) for an array of distances d >= 0 (see the Encoding docstring and CONTRIBUTING.md)"
        )

    def log_weights(self, n) -> np.ndarray:
        """The row :math:`b(0), \\dots, b(n-1)` of a query with ``n`` keys (direct; ``n`` up to ``DIRECT_MAX``)."""
        n = check_int(n, "n")
        check_allocation(8 * n, "n", n)
        if n > DIRECT_MAX:
            raise DomainError("n", n, f"an integer at most {DIRECT_MAX} for direct summation of {self.name}")
        logw = np.asarray(self.bias(np.arange(n, dtype=float), n), dtype=float)
        if np.any(np.isnan(logw)) or np.any(logw == np.inf):
            raise DomainError("bias", "non-finite values", "a bias finite (or -inf) at every distance below n")
        return logw

    def _masses(self, window: int, n: int) -> tuple:
        """``(m_n(W), D_n(W))`` for scalar, validated ``window <= n``: direct log-sum-exp."""
        return direct_masses(self.log_weights(n), window)

    def _masses_array(self, window: int, n: np.ndarray):
        """``(m, D)`` over an int64 array of lengths in one vectorised pass, or ``None`` (then
        the lengths are taken one by one through :meth:`_masses`). ``window <= n`` is checked."""
        return None

    def _vectorised(self, window, n, which):
        """The vectorised route for a machine-integer array ``n`` (single head), else ``None``."""
        refuse_masked(n, "n")
        refuse_masked(window, "window")
        if not isinstance(n, np.ndarray) or n.dtype.kind not in "iu" or n.ndim == 0 or n.size == 0:
            return None
        if n.dtype.kind == "u" and n.max() > np.iinfo(np.int64).max:
            return None
        window = check_int(window, "window")
        nn = n.astype(np.int64)
        if nn.min() < window:
            return None  # the element-wise route raises the element's own error
        out = self._masses_array(window, nn)
        return None if out is None else np.asarray(out[which], dtype=float).reshape(n.shape)

    def window_mass(self, window, n):
        """:math:`m_n(W)` of the constant-score prior; ``n`` array-like (same shape back).

        Arrays of machine integers take the encoding's vectorised route where it has one
        (:meth:`_masses_array`); otherwise each length is evaluated in turn.
        """
        hs = self.per_head()
        if hs is not None:
            return np.stack([np.asarray(h.window_mass(window, n), dtype=float) for h in hs])
        fast = self._vectorised(window, n, 0)
        if fast is not None:
            return fast
        return over_lengths(window, n, lambda w, v: self._masses(w, v)[0])

    def distant_mass(self, window, n):
        """:math:`D_n(W) = 1 - m_n(W)`, computed as the distant share (no cancellation)."""
        hs = self.per_head()
        if hs is not None:
            return np.stack([np.asarray(h.distant_mass(window, n), dtype=float) for h in hs])
        fast = self._vectorised(window, n, 1)
        if fast is not None:
            return fast
        return over_lengths(window, n, lambda w, v: self._masses(w, v)[1])

    def distant_mass_range(self, window, n) -> tuple:
        """``(lower, upper)`` of :math:`D_n(W)` over content within ``score_bound`` (Theorem 10).

        The band :math:`D^\\mp = D/(D + e^{\\pm 2B}(1 - D))` of the constant-score distant mass
        :math:`D`, evaluated by :func:`otprior.content_bound.content_band` (``proofs/content_bound.md``);
        ``n`` array-like as in :meth:`distant_mass`. Multi-head encodings answer one pair per head.
        """
        hs = self.per_head()
        if hs is not None:
            return tuple(h.distant_mass_range(window, n) for h in hs)
        D = self.distant_mass(window, n)
        if self.score_bound == 0.0:
            return D, D
        lo, hi = content_band(D, self.score_bound)
        return lo, hi

    # -- certified routes (Theorem 16, proofs/closed_form_tails.md) ----------------------
    def mass_enclosures(self, window, n):
        """Proved enclosures of :math:`m_n(W)` and :math:`D_n(W)` at one length ``n`` (any integer up to 1e300).

        Each family encloses its two sums :math:`H = \\sum_{d<W} e^{b(d)}`,
        :math:`T = \\sum_{W \\le d < n} e^{b(d)}` in a closed form in Arb ball arithmetic (Theorem 16,
        ``proofs/closed_form_tails.md``): exact rationals for a uniform prior, geometric sums for a
        linear bias, Hurwitz zeta differences for power laws, bucket counts for T5, the linear pieces
        of FIRE's ``f``, runs of equal rounded positions for bfloat16 ALiBi rows; then
        :math:`m = 1/(1 + T/H)`, :math:`D = 1/(1 + H/T)`, with relative radius at most :math:`2^{-55}`,
        rounded outward to doubles and clipped to [0, 1].

        Returns
        -------
        MassEnclosures
            ``(window_mass, distant_mass, route, exact)``; a tuple of them, one per head, for a
            multi-head encoding.

        Raises
        ------
        DomainError
            (parameter ``n``) for a family without a proved route (a general callable FIRE ``f``), or ``n``
            above 1e300.
        PrecisionError
            where the balls stay wide at 4096 bits.
        """
        window = check_int(window, "window")
        values, shape = check_lengths(n)
        if shape not in (None, ()):  # a 0-d array is one length
            raise DomainError("n", n, "one integer length (call once per length)")
        n = values[0]
        if n > MAX_LENGTH:
            raise DomainError("n", n, "an integer length at most 1e300")
        check_window(window, n)
        if n > MAX_LENGTH:
            raise DomainError("n", n, "an integer length at most 1e300")
        hs = self.per_head()
        if hs is not None:
            return tuple(h.mass_enclosures(window, n) for h in hs)
        if window == n:  # every key in the window: m = 1, D = 0 exactly, whatever the bias
            return MassEnclosures(ONE, ZERO, "window = n (every key in the window)", True)
        out = self._certified(window, n)
        if out is None:
            raise DomainError("n", n, f"a length of an encoding with a proved route ({self.name} has none here: "
                              f"{self._uncertified_reason()})")
        return out

    def limit_enclosure(self, window):
        """A proved enclosure of :math:`D_\\infty(W) = \\lim_n D_n(W)` of the constant-score prior.

        ``[1, 1]`` for a diluting encoding (Theorem 11); the closed form's limit for a bounded one
        (Theorem 16g: :math:`e^{-mW}` for ALiBi, :math:`\\zeta(\\alpha, W + o)/\\zeta(\\alpha, o)` for power
        laws, Theorem 12's sums for KERPLE-power). A tuple per head for a multi-head encoding.

        Raises
        ------
        DomainError
            (parameter ``window``) where no proved limit exists (an oscillating or undecided encoding).
        """
        window = check_int(window, "window")
        hs = self.per_head()
        if hs is not None:
            return tuple(h.limit_enclosure(window) for h in hs)
        out = self._limit_certified(window)
        if out is None:
            raise DomainError("window", window, f"an encoding with a proved limit ({self.name} has none here: "
                              f"{self._uncertified_reason()})")
        return out

    def _certified(self, window: int, n: int):
        """``MassEnclosures`` for validated scalar ``window <= n <= 1e300``, or ``None`` (no proved route)."""
        return None

    def _limit_certified(self, window: int):
        """The enclosure of :math:`D_\\infty(W)`, or ``None`` (no proved limit)."""
        return None

    def _uncertified_reason(self) -> str:
        return "its prior has no closed form in Theorem 16"

    def _verdict(self) -> Verdict:
        """The encoding's verdict under softmax, for :func:`otprior.classify` (a subclass implements it)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement _verdict(self): a subclass of otprior.encodings.Encoding "
            "returns Verdict(self, bounded, kind, reason, rate, limit_fn=...) (see the Encoding docstring and CONTRIBUTING.md)"
        )

    def far_profile(self, window):
        """The shape of the bias far away, for the normalisers (``proofs/normalisers.md``).

        ``("minus-infinity",)``: :math:`b(d) \\to -\\infty` monotonically (at least
        logarithmically); ``("constant-tail", b_star, distant_max, tail)``: :math:`b` is
        constant (``tail``) from some distance on, ``b_star`` is the largest bias in the
        window and ``distant_max`` the largest at distances ``>= window`` before the constant
        part (``-inf`` if none); ``None``: not known.
        """
        return None

    def __repr__(self):
        shown = []
        for f in fields(self):
            if not f.init or not f.repr:
                continue
            value = getattr(self, f.name)
            if f.default is not MISSING:
                try:
                    same = bool(value == f.default)
                except Exception:  # arrays and callables compare oddly: show them
                    same = False
                if same:
                    continue
            shown.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


def nonneg(value, name):
    return check_real(value, name, low=0.0)


def per_head_values(value, name, check):
    """A scalar, or one value per head (a list, tuple or array of at least one dimension) stored as a tuple.

    A 0-d array is a scalar (one head), as ``check_real`` reads it. A ``memoryview`` is refused:
    its items may be raw bytes (``memoryview(b"abc")`` would read as three heads 97, 98, 99).
    """
    if isinstance(value, memoryview):
        raise DomainError(name, value, "a number, or a list, tuple or array of numbers (one per head); not a memoryview")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return check(value, name)
    if isinstance(value, (list, tuple, np.ndarray)) or (hasattr(value, "shape") and getattr(value, "ndim", 0) > 0):
        arr = np.asarray(value, dtype=object).ravel()
        if arr.size == 0:
            raise DomainError(name, value, "a number or a non-empty sequence of numbers (one per head)")
        check_allocation(8 * arr.size, name, f"{arr.size} values")
        return tuple(check(v, name) for v in arr)
    return check(value, name)
