"""T5 relative position buckets with a learned table (diluting).

``t5_bucket`` is ``T5Attention._relative_position_bucket`` for causal distances
``d = query - key >= 0`` (the relative position ``key - query = -d``), evaluated in float32
as the library does, so that every bucket boundary falls where it falls in the model.
"""

from __future__ import annotations

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
        # float32 throughout, as torch: log(float(d) / max_exact) / log(md / max_exact) * (nb - max_exact)
        ratio = np.log(d.astype(np.float32) / np.float32(max_exact))
        scaled = ratio / np.float32(math.log(md / max_exact)) * np.float32(nb - max_exact)
        large = max_exact + np.where(np.isfinite(scaled), scaled, 0).astype(np.int64)
    large = np.minimum(large, nb - 1)
    return np.where(d < max_exact, d, large)


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

    def _head_start(self) -> int:
        """:meth:`last_bucket_start`, after checking the arrays over the distances before it fit the caps.

        The masses and the far profile evaluate about four float arrays of that many entries
        (distances, buckets, biases, their exponentials), up to ``max_distance`` long.
        """
        start = self.last_bucket_start()
        check_allocation(4 * 8 * start, "max_distance", self.max_distance)
        return start

    def _masses(self, window, n):
        start = self._head_start()
        table = self._table()
        if n <= start + 1:
            return super()._masses(window, n)
        # exact sums before the last bucket, then (n - start) copies of its value
        head = np.asarray(self.bias(np.arange(start)))
        last = table[-1]
        log_total = np.logaddexp(logsumexp(head), last + math.log(n - start))
        if window >= start:
            log_win = np.logaddexp(logsumexp(head), last + math.log(window - start)) if window > start else logsumexp(head)
            log_distant = last + math.log(n - window)
        else:
            log_win = logsumexp(head[:window])
            log_distant = np.logaddexp(logsumexp(head[window:]), last + math.log(n - start))
        return float(np.exp(log_win - log_total)), float(np.exp(log_distant - log_total))

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
        if self.values is None:
            return None
        table = self._table()
        start = self._head_start()
        check_allocation(4 * 8 * window, "window", window)
        b = self.bias(np.arange(max(start, window) + 1))
        head = float(np.max(b[:window]))
        distant = float(np.max(b[window:start])) if start > window else -math.inf
        return ("constant-tail", head, distant, float(table[-1]))
