"""T5 relative position buckets with a learned table (diluting).

``t5_bucket`` is ``T5Attention._relative_position_bucket`` for causal distances
``d = query - key >= 0`` (the relative position ``key - query = -d``), evaluated in float32
as the library does, so that every bucket boundary falls where it falls in the model.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .._registry import param
from .._validation import DomainError, check_int, real_array
from ..limits import check_allocation
from ._base import Encoding, Verdict, nonneg, register

__all__ = ["T5Buckets", "t5_bucket"]


MAX_DISTANCE = 2**62


def logsumexp(v):
    """``log sum exp(v)`` of a short 1-d array in numpy alone (scipy's generic version costs ~0.1 ms a call)."""
    v = np.asarray(v, dtype=float)
    if v.size == 0:
        return -math.inf
    top = float(np.max(v))
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(v - top))))


def _check_geometry(num_buckets, max_distance, bidirectional):
    minimum = 4 if bidirectional else 2
    nb_total = check_int(num_buckets, "num_buckets", minimum=minimum)
    # distances are int64 (t5_bucket): max_distance at most 2^62 keeps them and their buckets exact
    md = check_int(max_distance, "max_distance", maximum=MAX_DISTANCE)
    nb = nb_total // 2 if bidirectional else nb_total
    max_exact = nb // 2
    if md <= max_exact:
        # log(max_distance / max_exact) <= 0: the library's logarithmic buckets run backwards
        raise DomainError("max_distance", max_distance, f"an integer above max_exact = {max_exact} (half the causal buckets)")
    return nb_total, md, nb, max_exact


def t5_bucket(d, num_buckets=32, max_distance=128, bidirectional=False):
    """The bucket of causal distances ``d >= 0`` (int array), as T5's ``_relative_position_bucket``.

    Bidirectional: the table's first ``num_buckets // 2`` rows serve keys at or before the
    query; causal: all ``num_buckets``. ``max_exact`` exact buckets, then logarithmic ones up
    to ``max_distance``, then the last bucket.
    """
    _, md, nb, max_exact = _check_geometry(num_buckets, max_distance, bidirectional)
    d = np.asarray(d, dtype=np.int64)
    if np.any(d < 0):
        raise DomainError("d", "negative distances", "causal distances d >= 0")
    with np.errstate(divide="ignore"):
        # float32 throughout, as torch: log(float(d) / max_exact) / log(md / max_exact) * (nb - max_exact),
        # the log rounded from double (torch's scalar path; numpy's and torch's vectorised float32 logs are off
        # by an ulp at some arguments and not monotone: 663 decreasing neighbours in [1, 16)). Every step is
        # then a non-decreasing map, which Theorem 16d's bisection needs.
        ratio = np.log((d.astype(np.float32) / np.float32(max_exact)).astype(np.float64)).astype(np.float32)
        scaled = ratio / np.float32(math.log(md / max_exact)) * np.float32(nb - max_exact)
        large = max_exact + np.where(np.isfinite(scaled), scaled, 0).astype(np.int64)
    large = np.minimum(large, nb - 1)
    return np.where(d < max_exact, d, large)


@functools.lru_cache(maxsize=64)
def bucket_starts(num_buckets=32, max_distance=128, bidirectional=False) -> tuple:
    """``(s_0, ..., s_{nb-1})``: :math:`s_k` is the smallest distance whose bucket is at least ``k``.

    Theorem 16d (``proofs/closed_form_tails.md``): :func:`t5_bucket` is non-decreasing in ``d``
    (a composition of non-decreasing maps: correctly rounded float32 division, the double ``log``
    rounded to float32, multiplication by positive constants, truncation, ``min``), so bucket ``k`` holds exactly the distances in
    :math:`[s_k, s_{k+1})` (empty when equal) and the last one :math:`[s_{nb-1}, \\infty)`;
    ``bucket(max_distance) = nb - 1``. Found by one vectorised bisection over ``[0, max_distance]``
    (63 steps of ``nb`` buckets at most).
    """
    _, md, nb, _ = _check_geometry(num_buckets, max_distance, bidirectional)
    check_allocation(8 * 4 * nb, "num_buckets", num_buckets)
    k = np.arange(nb, dtype=np.int64)
    lo, hi = np.zeros(nb, dtype=np.int64), np.full(nb, md, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        up = t5_bucket(mid, num_buckets, md, bidirectional) >= k
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid + 1)
    return tuple(int(v) for v in lo)


def bucket_counts(starts, d0, d1):
    """How many distances in ``[d0, d1)`` each bucket holds (Python ints: ``d1`` may be any integer)."""
    ends = list(starts[1:]) + [None]
    out = []
    for s, e in zip(starts, ends, strict=True):
        a = max(s, d0)
        b = d1 if e is None else min(e, d1)
        out.append(max(b - a, 0))
    return out


@register
@dataclass(frozen=True, repr=False)
class T5Buckets(Encoding):
    """T5 relative bias: a learned value per bucket, constant from the last bucket on (diluting).

    ``values``: the learned table for the causal buckets, shape ``(nb,)`` or ``(heads, nb)``
    with ``nb = num_buckets`` (causal) or ``num_buckets // 2`` (bidirectional; a full table of
    ``num_buckets`` rows is accepted and its first half used). A ``transformers`` weight of
    shape ``(num_buckets, heads)`` goes through :meth:`from_table`. Without a table the
    verdict is still decided (it does not depend on the values); the masses need it.
    """

    name = "t5"
    _head_fields = ("values",)

    num_buckets: int = param(32, doc="relative_attention_num_buckets")
    max_distance: int = param(128, doc="relative_attention_max_distance (> num_buckets / 4, causal: / 2)")
    values: tuple | None = param(None, doc="learned bucket values, comma-separated (one row per head allowed)", kw_only=True)
    bidirectional: bool = param(False, doc="encoder-style buckets (is_decoder=False)", kw_only=True)
    logit_bound: float = param(0.0, doc="bound B >= 0 on |content logit - constant|", kw_only=True)

    def __post_init__(self):
        if not isinstance(self.bidirectional, (bool, np.bool_)):
            raise DomainError("bidirectional", self.bidirectional, "True or False")
        object.__setattr__(self, "bidirectional", bool(self.bidirectional))
        nb_total, md, nb, _ = _check_geometry(self.num_buckets, self.max_distance, self.bidirectional)
        object.__setattr__(self, "num_buckets", nb_total)
        object.__setattr__(self, "max_distance", md)
        if self.values is not None:
            v = self.values
            if isinstance(v, tuple) and v and isinstance(v[0], tuple):
                v = real_array(v, "values", f"{nb} finite real bucket values (or one row per head)")
            arr = real_array(v, "values", f"{nb} finite real bucket values (or one row per head)")
            if arr is None or arr.ndim not in (1, 2) or not np.all(np.isfinite(arr)):
                raise DomainError("values", v if arr is None else f"array of shape {arr.shape}", f"{nb} finite bucket values (or one row per head)")
            if self.bidirectional and arr.shape[-1] == nb_total:
                arr = arr[..., :nb]
            if arr.shape[-1] != nb:
                raise DomainError("values", f"array of shape {arr.shape}", f"{nb} finite bucket values per head")
            out = tuple(float(x) for x in arr) if arr.ndim == 1 else tuple(tuple(float(x) for x in row) for row in arr)
            object.__setattr__(self, "values", out)
        object.__setattr__(self, "logit_bound", nonneg(self.logit_bound, "logit_bound"))

    @classmethod
    def from_table(cls, weight, num_buckets=None, max_distance=128, *, bidirectional=False, logit_bound=0.0):
        """From the ``relative_attention_bias`` weight, shape ``(num_buckets, heads)``."""
        w = np.asarray(weight, dtype=float)
        if w.ndim != 2:
            raise DomainError("weight", f"array of shape {w.shape}", "a (num_buckets, heads) table")
        nb = w.shape[0] if num_buckets is None else num_buckets
        values = w.T if w.shape[1] > 1 else w[:, 0]
        return cls(nb, max_distance, values=values, bidirectional=bidirectional, logit_bound=logit_bound)

    @property
    def heads(self):
        if self.values is not None and isinstance(self.values[0], tuple):
            return len(self.values)
        return None

    def last_bucket_start(self) -> int:
        """The smallest distance in the last bucket (113 for the defaults)."""
        nb = self.num_buckets // 2 if self.bidirectional else self.num_buckets
        lo, hi = 0, self.max_distance  # bucket(max_distance) is the last one; buckets never decrease
        while lo < hi:
            mid = (lo + hi) // 2
            if t5_bucket(mid, self.num_buckets, self.max_distance, self.bidirectional) == nb - 1:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _table(self):
        if self.values is None:
            raise DomainError("values", None, "the learned bucket table (the masses depend on it; the verdict does not)")
        return np.asarray(self.values, dtype=float)

    def bias(self, d, n=None):
        table = self._table()
        b = t5_bucket(d, self.num_buckets, self.max_distance, self.bidirectional)
        return table[..., b]

    def _starts(self):
        return bucket_starts(self.num_buckets, self.max_distance, self.bidirectional)

    def _masses(self, window, n):
        """Theorem 16d: the sums are bucket counts times :math:`e^{v_k}`, over ``nb`` values.

        With :math:`v^* = \\max_k v_k`, each term is :math:`c_k e^{v_k - v^*}` (counts up to 1e300 are
        doubles, the exponentials at most 1), summed by ``math.fsum``: a few ulps. Where an exponential
        would fall below the normal range (values spread over more than 700), the terms are formed in
        the log domain instead, :math:`e^{v_k + \\log c_k - L}` with :math:`L` the largest of those.
        """
        starts = self._starts()
        table = self._table()
        cw, cd = bucket_counts(starts, 0, window), bucket_counts(starts, window, n)
        if not any(cd):
            return 1.0, 0.0
        used = [v for v, a, b in zip(table, cw, cd, strict=True) if a or b]
        top = max(used)
        if min(used) - top > -700.0:
            e = [math.exp(v - top) for v in table]
            H = math.fsum(float(c) * x for c, x in zip(cw, e, strict=True) if c)
            T = math.fsum(float(c) * x for c, x in zip(cd, e, strict=True) if c)
            return H / (H + T), T / (H + T)
        lw = [v + math.log(c) for v, c in zip(table, cw, strict=True) if c]
        ld = [v + math.log(c) for v, c in zip(table, cd, strict=True) if c]
        r = logsumexp(ld) - logsumexp(lw)
        # m = 1/(1 + e^(T - H)), D = 1/(1 + e^(H - T)) as exp(-log(1 + e^x)): no cancellation, no overflow
        return float(np.exp(-np.logaddexp(0.0, r))), float(np.exp(-np.logaddexp(0.0, -r)))

    def _certified(self, window, n):
        """Theorem 16d: :math:`H = \\sum_k c_k(0, W) e^{v_k}`, :math:`T = \\sum_k c_k(W, n) e^{v_k}` with the exact
        bucket counts :math:`c_k` (Python integers, any ``n``), in Arb."""
        import flint

        from .._balls import arb_from_float
        from ._certified import MassEnclosures, certify, masses_from_sums

        starts = self._starts()
        table = self._table()
        cw, cd = bucket_counts(starts, 0, window), bucket_counts(starts, window, n)

        def balls():
            e = [arb_from_float(v).exp() for v in table]
            H = sum((flint.arb(c) * x for c, x in zip(cw, e, strict=True) if c), flint.arb(0))
            T = sum((flint.arb(c) * x for c, x in zip(cd, e, strict=True) if c), flint.arb(0))
            return masses_from_sums(H, T)

        m, D = certify(balls, "T5 buckets")
        return MassEnclosures(m, D, "bucket counts (Theorem 16d)", True)

    def _limit_certified(self, window):
        from ._certified import ONE

        return ONE  # diluting: the last bucket's constant value is not summable (Theorem 11)

    def _verdict(self):
        s = self.last_bucket_start()
        last = "the last bucket's value" if self.values is None else f"the last bucket's value {self._table()[-1]:.6g}"
        return Verdict(
            self,
            False,
            "diluting",
            f"every distance d >= {s} shares {last}: e^b(d) is eventually constant, not summable.",
            "1 - D_n(W) ~ C / n",
        )

    def far_profile(self, window):
        """``("constant-tail", b_star, distant_max, last)`` from the buckets the distances reach
        (Theorem 16d's bucket intervals: no array over the distances, any ``max_distance``)."""
        if self.values is None:
            return None
        table = self._table()
        starts = self._starts()
        last = starts[-1]
        head = max(float(v) for v, c in zip(table, bucket_counts(starts, 0, window), strict=True) if c)
        mid = [float(v) for v, c in zip(table, bucket_counts(starts, window, last), strict=True) if c]
        return ("constant-tail", head, max(mid) if mid else -math.inf, float(table[-1]))
