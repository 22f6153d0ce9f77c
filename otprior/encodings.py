"""Positional encodings as biases on attention logits, and their classification.

Definition (``proofs/classification.md``). For a relative bias :math:`b(d)`, ``d >= 0``,
on top of content scores within ``B`` of a constant, the constant-content prior of query
``n`` is :math:`\\pi_n(d) \\propto e^{b(d)}`, and

.. math:: D_n(W) = \\sum_{d=W}^{n-1} e^{b(d)} \\Big/ \\sum_{d=0}^{n-1} e^{b(d)} .

An encoding is **bounded** when :math:`\\limsup_n D_n(W) < 1`, **diluting** when
:math:`D_n(W) \\to 1`. Theorem 11: for a bias depending on ``d`` only, bounded
:math:`\\iff \\sum_d e^{b(d)} < \\infty`, whatever ``B`` is. Content moves ``D`` only within
:math:`T/(T+e^{2B}H) \\le D \\le T/(T+e^{-2B}H)`.

Each class stores its parameters as its source defines them and implements ``bias``
(vectorised) and ``verdict``. ``distant_mass`` sums the bias directly, unless the class
has a closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath
import numpy as np
from scipy.special import logsumexp

from ._validation import DomainError, PrecisionError, check_int, check_real, check_rho

__all__ = [
    "Encoding",
    "Verdict",
    "NoPE",
    "RoPE",
    "YaRN",
    "ALiBi",
    "KerpleLog",
    "KerplePower",
    "T5Buckets",
    "FIRE",
    "CABLE",
    "LogDistance",
    "CausalOT",
    "Bias",
    "classify",
]

_DIRECT_MAX = 1 << 22  # direct summation up to 4M keys


@dataclass(frozen=True)
class Verdict:
    """The classification of an encoding.

    Attributes
    ----------
    encoding : Encoding
    bounded : bool or None
        ``None`` when the criterion could not be decided.
    kind : {"bounded", "diluting", "undecided"}
    reason : str
        A sentence a reader can check.
    rate : str or None
        How the window mass ``1 - D_n(W)`` vanishes (diluting), or how ``D_n`` approaches
        its limit (bounded), where known.
    """

    encoding: object
    bounded: bool | None
    kind: str
    reason: str
    rate: str | None = None
    _limit: object = field(default=None, repr=False, compare=False)

    def limit_distant_mass(self, window) -> float:
        """:math:`D_\\infty(W)` for constant content (1.0 for a diluting encoding)."""
        window = check_int(window, "window", minimum=1)
        if self.kind == "diluting":
            return 1.0
        if self._limit is None:
            raise DomainError("window", window, "an encoding whose verdict is decided (this one is undecided)")
        return float(self._limit(window))

    def as_dict(self, window=None) -> dict:
        out = {"encoding": repr(self.encoding), "bounded": self.bounded, "kind": self.kind, "reason": self.reason, "rate": self.rate}
        if window is not None and self.kind != "undecided":
            out["limit_distant_mass"] = self.limit_distant_mass(window)
        return out


class Encoding:
    """Base class: a positional bias ``b(d)`` plus a bound ``score_bound`` on content scores."""

    name = "encoding"
    score_bound = 0.0

    def bias(self, d, n=None):
        """The bias :math:`b(d)` at distances ``d`` (array) for query position ``n``."""
        raise NotImplementedError

    def verdict(self) -> Verdict:
        raise NotImplementedError

    def classify(self) -> Verdict:
        return self.verdict()

    def distant_mass(self, window, n) -> float:
        """:math:`D_n(W)` for constant content, by direct (log-sum-exp) summation of the bias."""
        n, window = _check_wn(window, n)
        if n > _DIRECT_MAX:
            raise DomainError("n", n, f"an integer at most {_DIRECT_MAX} for direct summation of this encoding")
        logw = np.asarray(self.bias(np.arange(n, dtype=float), n), dtype=float)
        if window == n:
            return 0.0
        return float(np.exp(logsumexp(logw[window:]) - logsumexp(logw)))

    def distant_mass_range(self, window, n) -> tuple:
        """``(lower, upper)`` of :math:`D_n(W)` over content scores within ``score_bound`` (Theorem 10)."""
        D = self.distant_mass(window, n)
        if D in (0.0, 1.0) or self.score_bound == 0.0:
            return D, D
        k = math.exp(2.0 * self.score_bound)
        ratio = D / (1.0 - D)  # T / H
        return ratio / (ratio + k), ratio / (ratio + 1.0 / k)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def _params(self) -> dict:
        return {}


def _check_wn(window, n):
    n = check_int(n, "n", minimum=1)
    window = check_int(window, "window", minimum=1)
    if window > n:
        raise DomainError("n", n, f"an integer at least window={window}")
    return n, window


def _nonneg(value, name):
    return check_real(value, name, low=0.0)


class NoPE(Encoding):
    """No positional bias: :math:`b(d) = 0`, uniform prior, :math:`D_n = 1 - W/n` (diluting)."""

    name = "nope"

    def __init__(self, logit_bound=0.0):
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        return np.zeros_like(np.asarray(d, dtype=float))

    def distant_mass(self, window, n):
        n, window = _check_wn(window, n)
        return (n - window) / n

    def verdict(self):
        return Verdict(self, False, "diluting", "b(d) = 0 is not summable: the prior is uniform, D_n(W) = 1 - W/n -> 1.", "1 - D_n(W) = W/n")

    def _params(self):
        return {"logit_bound": self.score_bound}


class RoPE(NoPE):
    """Rotary encoding with logits bounded by ``logit_bound``.

    RoPE adds no bias, it rotates queries and keys; with :math:`|q_t^\\top R_{t-j} k_j| \\le B`
    the content bound applies and the constant-content prior is uniform (diluting).
    """

    name = "rope"

    def __init__(self, logit_bound):
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def verdict(self):
        B = self.score_bound
        return Verdict(
            self,
            False,
            "diluting",
            f"RoPE adds no summable bias; with logits bounded by B = {B:g}, the window mass is at most W e^(2B) / n -> 0.",
            f"1 - D_n(W) <= W e^{{2B}} / n = {math.exp(2 * B):.4g} W / n",
        )


class YaRN(RoPE):
    """RoPE with YaRN's evaluation-time scaling (``transformers`` ``_compute_yarn_parameters``).

    The attention factor :math:`m = 0.1 \\ln s + 1` multiplies cos and sin, so logits
    scale by :math:`m^2` and the logit bound becomes :math:`B m^2`; the frequency ramp
    between ``beta_fast`` and ``beta_slow`` changes which rotations occur, not the bound.
    The verdict is unchanged: diluting.
    """

    name = "yarn"

    def __init__(self, scale, logit_bound, *, original_max_position=4096, beta_fast=32.0, beta_slow=1.0):
        self.scale = check_real(scale, "scale", low=1.0)
        self.logit_bound = _nonneg(logit_bound, "logit_bound")
        self.original_max_position = check_int(original_max_position, "original_max_position")
        self.beta_fast = check_real(beta_fast, "beta_fast", low=0.0, low_open=True)
        self.beta_slow = check_real(beta_slow, "beta_slow", low=0.0, low_open=True)
        self.attention_factor = 0.1 * math.log(self.scale) + 1.0
        self.score_bound = self.logit_bound * self.attention_factor**2

    def verdict(self):
        v = super().verdict()
        reason = (
            f"YaRN scales logits by (0.1 ln s + 1)^2 = {self.attention_factor**2:.4g}, changing the bound to "
            f"B = {self.score_bound:g}, not the verdict: " + v.reason
        )
        return Verdict(self, False, "diluting", reason, v.rate)

    def _params(self):
        return {"scale": self.scale, "logit_bound": self.logit_bound, "original_max_position": self.original_max_position}


class ALiBi(Encoding):
    """ALiBi: :math:`b(d) = -m\\,d` with slope ``m > 0`` (bounded, :math:`D_\\infty(W) = e^{-mW}`)."""

    name = "alibi"

    def __init__(self, slope, *, logit_bound=0.0):
        self.slope = _nonneg(slope, "slope")
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    @staticmethod
    def slopes(num_heads):
        """The standard per-head slopes: :math:`2^{-8h/H}` for ``H`` a power of two, otherwise
        those of the power of two below, followed by every other slope of the one above."""
        H = check_int(num_heads, "num_heads")

        def power_of_two(n):
            return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

        if (H & (H - 1)) == 0:
            return power_of_two(H)
        low = 1 << (H.bit_length() - 1)
        return power_of_two(low) + ALiBi.slopes(2 * low)[0::2][: H - low]

    def bias(self, d, n=None):
        return -self.slope * np.asarray(d, dtype=float)

    def distant_mass(self, window, n):
        n, window = _check_wn(window, n)
        m = self.slope
        if m == 0.0:
            return (n - window) / n
        # geometric sums: (e^{-mW} - e^{-mn}) / (1 - e^{-mn})
        return -math.expm1(-m * (n - window)) * math.exp(-m * window) / -math.expm1(-m * n)

    def verdict(self):
        m = self.slope
        if m == 0.0:
            return Verdict(self, False, "diluting", "slope m = 0: no bias, uniform prior.", "1 - D_n(W) = W/n")
        return Verdict(
            self,
            True,
            "bounded",
            f"sum_d e^(-m d) = 1/(1 - e^(-m)) < oo for m = {m:g} > 0, so D_n(W) -> e^(-mW) < 1.",
            "D_n(W) = D_oo(W) (1 - e^{-m(n-W)}) / (1 - e^{-mn}): geometric approach",
            _limit=lambda W: math.exp(-m * W),
        )

    def _params(self):
        return {"slope": self.slope}


class _PowerLawMixin:
    """Distant masses of (d + o)^(-alpha) through the certified log-distance routines."""

    def _alpha_offset(self):
        raise NotImplementedError

    def distant_mass(self, window, n):
        from .log_distance import distant_mass

        n, window = _check_wn(window, n)
        alpha, offset = self._alpha_offset()
        if alpha == 0.0:
            return (n - window) / n
        return distant_mass(window, n, alpha, offset=offset)

    def _power_verdict(self, label):
        alpha, offset = self._alpha_offset()
        if alpha > 1.0:

            def limit(W):
                with mpmath.workdps(30):
                    return mpmath.zeta(alpha, W + offset) / mpmath.zeta(alpha, offset)

            return Verdict(
                self,
                True,
                "bounded",
                f"{label}: e^b(d) = (d + {offset:g})^(-{alpha:g}) up to a constant, summable since the exponent {alpha:g} > 1; "
                "D_oo(W) = zeta(a, W + o) / zeta(a, o).",
                f"D_oo(W) - D_n(W) ~ n^-({alpha - 1:g}): slow when the exponent is near 1",
                _limit=limit,
            )
        rate = "1 - D_n(W) ~ H_W / log n" if alpha == 1.0 else f"1 - D_n(W) ~ n^-({1 - alpha:g})"
        return Verdict(
            self,
            False,
            "diluting",
            f"{label}: e^b(d) = (d + {offset:g})^(-{alpha:g}) up to a constant, not summable since the exponent {alpha:g} <= 1.",
            rate,
        )


class KerpleLog(_PowerLawMixin, Encoding):
    """KERPLE-log: :math:`b(d) = -r_1\\log(1 + r_2 d)` (bounded iff :math:`r_1 > 1`).

    KERPLE clamps both parameters at 0.01 and initialises :math:`r_1 \\sim U(0, 2)`; it does
    not enforce :math:`r_1 > 1`. Since :math:`(1 + r_2 d)^{-r_1} = r_2^{-r_1}(d + 1/r_2)^{-r_1}`
    this is the log-distance prior with exponent :math:`r_1` and offset :math:`1/r_2`.
    """

    name = "kerple-log"

    def __init__(self, r1, r2, *, logit_bound=0.0):
        self.r1 = _nonneg(r1, "r1")
        self.r2 = check_real(r2, "r2", low=0.0, low_open=True)
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        return -self.r1 * np.log1p(self.r2 * np.asarray(d, dtype=float))

    def _alpha_offset(self):
        return self.r1, 1.0 / self.r2

    def verdict(self):
        return self._power_verdict(f"r1 = {self.r1:g}, r2 = {self.r2:g}")

    def _params(self):
        return {"r1": self.r1, "r2": self.r2}


class LogDistance(_PowerLawMixin, Encoding):
    """The log-distance bias :math:`b(d) = -\\alpha\\log(d + o)` (bounded iff :math:`\\alpha > 1`)."""

    name = "log-distance"

    def __init__(self, alpha, *, offset=1.0, logit_bound=0.0):
        self.alpha = check_real(alpha, "alpha", low=0.0, low_open=True)
        self.offset = check_real(offset, "offset", low=0.0, low_open=True)
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        return -self.alpha * np.log(np.asarray(d, dtype=float) + self.offset)

    def _alpha_offset(self):
        return self.alpha, self.offset

    def verdict(self):
        return self._power_verdict(f"alpha = {self.alpha:g}")

    def _params(self):
        return {"alpha": self.alpha, "offset": self.offset}


class KerplePower(Encoding):
    """KERPLE-power: :math:`b(d) = -r_1 d^{r_2}`, :math:`r_2 \\in (0, 2]` (bounded when :math:`r_1 > 0`)."""

    name = "kerple-power"

    def __init__(self, r1, r2, *, logit_bound=0.0):
        self.r1 = _nonneg(r1, "r1")
        self.r2 = check_real(r2, "r2", low=0.0, high=2.0, low_open=True)
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        return -self.r1 * np.asarray(d, dtype=float) ** self.r2

    def _cut(self):
        """Distance beyond which every weight e^(-r1 d^r2) is below e^-800 (None: beyond direct summation)."""
        cut = (800.0 / self.r1) ** (1.0 / self.r2)
        return int(cut) + 2 if cut < _DIRECT_MAX else None

    def distant_mass(self, window, n):
        n, window = _check_wn(window, n)
        if self.r1 == 0.0:
            return (n - window) / n
        cut = self._cut()
        # terms beyond the cut are below e^-800 of the first: the sum stops there
        return Encoding.distant_mass(self, window, n if cut is None else min(n, max(window, cut)))

    def verdict(self):
        r1, r2 = self.r1, self.r2
        if r1 == 0.0:
            return Verdict(self, False, "diluting", "r1 = 0: no bias, uniform prior.", "1 - D_n(W) = W/n")

        def limit(W):
            cut = self._cut()
            if cut is None:
                raise PrecisionError(
                    f"D_oo(W) for r1 = {r1:g}, r2 = {r2:g}: the weights stay above e^-800 beyond d = {_DIRECT_MAX}, "
                    "too far to sum directly"
                )
            return self.distant_mass(W, max(W, cut))

        return Verdict(
            self,
            True,
            "bounded",
            f"e^(-r1 d^r2) with r1 = {r1:g} > 0, r2 = {r2:g} > 0 decays faster than any power of d: summable.",
            "D_n(W) reaches D_oo(W) up to e^{-r1 n^r2}",
            _limit=limit,
        )

    def _params(self):
        return {"r1": self.r1, "r2": self.r2}


def t5_bucket(d, num_buckets=32, max_distance=128, bidirectional=False):
    """T5's ``_relative_position_bucket`` for causal distances ``d = query - key >= 0``.

    ``max_exact = num_buckets // 2`` exact buckets (halved first when bidirectional, whose
    causal half is the lower one), then logarithmic buckets up to ``max_distance``, then
    the last bucket for every larger distance.
    """
    d = np.asarray(d, dtype=np.int64)
    nb = num_buckets // 2 if bidirectional else num_buckets
    max_exact = nb // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(d, 1) / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, nb - 1)
    return np.where(d < max_exact, d, large)


class T5Buckets(Encoding):
    """T5 relative bias: a learned value per bucket, constant beyond the last bucket (diluting)."""

    name = "t5"

    def __init__(self, num_buckets=32, max_distance=128, *, values=None, bidirectional=False, logit_bound=0.0):
        self.num_buckets = check_int(num_buckets, "num_buckets", minimum=2)
        self.max_distance = check_int(max_distance, "max_distance", minimum=2)
        self.bidirectional = bool(bidirectional)
        nb = self.num_buckets // 2 if self.bidirectional else self.num_buckets
        if values is None:
            values = np.zeros(nb)
        values = np.asarray(values, dtype=float)
        if values.shape != (nb,) or not np.all(np.isfinite(values)):
            raise DomainError("values", f"array of shape {values.shape}", f"{nb} finite bucket values")
        self.values = values
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def last_bucket_start(self) -> int:
        """The smallest distance in the last bucket (113 for the defaults)."""
        d = np.arange(0, 4 * self.max_distance + 2)
        nb = len(self.values)
        return int(np.argmax(t5_bucket(d, self.num_buckets, self.max_distance, self.bidirectional) == nb - 1))

    def bias(self, d, n=None):
        return self.values[t5_bucket(d, self.num_buckets, self.max_distance, self.bidirectional)]

    def distant_mass(self, window, n):
        n, window = _check_wn(window, n)
        start = self.last_bucket_start()
        if n <= start + 1:
            return Encoding.distant_mass(self, window, n)
        # exact sums before the last bucket, then (n - start) copies of its value
        head = np.asarray(self.bias(np.arange(start), n))
        last = self.values[-1]
        tail_count = n - start
        log_total = np.logaddexp(logsumexp(head), last + math.log(tail_count))
        if window >= start:
            log_distant = last + math.log(n - window)
        else:
            log_distant = np.logaddexp(logsumexp(head[window:]), last + math.log(tail_count))
        return float(np.exp(log_distant - log_total))

    def verdict(self):
        s = self.last_bucket_start()
        return Verdict(
            self,
            False,
            "diluting",
            f"every distance d >= {s} shares the last bucket's bias {self.values[-1]:g}: e^b(d) is eventually constant, not summable.",
            "1 - D_n(W) ~ C / n",
        )

    def _params(self):
        return {"num_buckets": self.num_buckets, "max_distance": self.max_distance, "bidirectional": self.bidirectional}


class FIRE(Encoding):
    """FIRE: :math:`b(d) = f(\\psi(d)/\\psi(\\max(L, n)))`, :math:`\\psi(x) = \\log(c x + 1)`.

    ``f`` is the learned MLP (any callable on [0, 1]; default ``f(x) = -8 x``), ``c`` (init
    0.1) and ``L`` (init 512) are learned. Its input stays in [0, 1], so a continuous
    ``f`` is bounded and the encoding dilutes.
    """

    name = "fire"

    def __init__(self, f=None, *, c=0.1, L=512.0, logit_bound=0.0):
        self.f = f if f is not None else (lambda x: -8.0 * x)
        self.c = check_real(c, "c", low=0.0, low_open=True)
        self.L = check_real(L, "L", low=0.0, low_open=True)
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        n = float(d.max() + 1) if n is None else float(n)
        x = np.log1p(self.c * d) / math.log1p(self.c * max(self.L, n))
        return np.asarray(self.f(x), dtype=float) * np.ones_like(d)

    def verdict(self):
        grid = np.linspace(0.0, 1.0, 1001)
        values = np.asarray(self.f(grid), dtype=float) * np.ones_like(grid)
        spread = float(values.max() - values.min())
        return Verdict(
            self,
            False,
            "diluting",
            f"the input psi(d)/psi(max(L, n)) lies in [0, 1], where f spans {spread:.4g} (sampled): e^b(d) >= e^(min f) > 0 at every d, not summable.",
            f"1 - D_n(W) <= W e^(osc f) / n (osc f ~ {spread:.4g}); for f(x) = -s x the prior is "
            "(1 + c d)^(-s / log(1 + c max(L, n))), whose exponent falls like 1 / log n, so the decay "
            "exponent approaches 1 only logarithmically",
        )

    def _params(self):
        return {"c": self.c, "L": self.L}


class CABLE(Encoding):
    """CABLE: :math:`b(i, j) = -\\sum_{k=j+1}^{i}\\mathrm{softplus}(h_k)`, increments at least ``min_increment``.

    The increments depend on the tokens; the bias here is the worst case for distant
    mass, constant increments :math:`\\varepsilon` (Lemma 11b), so
    :math:`D_n(W) \\le D_\\infty(W) = e^{-\\varepsilon W}` for every admissible input.
    """

    name = "cable"

    def __init__(self, min_increment, *, logit_bound=0.0):
        self.min_increment = _nonneg(min_increment, "min_increment")
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        return -self.min_increment * np.asarray(d, dtype=float)

    def distant_mass(self, window, n):
        return ALiBi(self.min_increment).distant_mass(window, n)

    def verdict(self):
        e = self.min_increment
        if e == 0.0:
            return Verdict(self, False, "diluting", "increments may vanish (min_increment = 0): the worst case is no bias, a uniform prior.", "1 - D_n(W) = W/n")
        return Verdict(
            self,
            True,
            "bounded",
            f"softplus increments >= {e:g} make e^b(d) <= e^(-{e:g} d), summable; constant increments are the worst case.",
            "geometric, as ALiBi with slope min_increment",
            _limit=lambda W: math.exp(-e * W),
        )

    def _params(self):
        return {"min_increment": self.min_increment}


class CausalOT(Encoding):
    """The causal OT operator with balancing strength ``rho < 1`` (Theorems 4, 5: diluting)."""

    name = "causal-ot"

    def __init__(self, rho, *, logit_bound=0.0):
        self.rho = check_rho(rho)
        self.score_bound = _nonneg(logit_bound, "logit_bound")

    def bias(self, d, n=None):
        from .ot_prior import ot_prior

        d = np.asarray(d, dtype=np.int64)
        n = int(d.max()) + 1 if n is None else int(n)
        return np.log(ot_prior(n, self.rho))[d]

    def distant_mass(self, window, n):
        from .ot_prior import ot_prior

        n, window = _check_wn(window, n)
        prior = ot_prior(n, self.rho)
        return float(np.sum(prior[window:]))

    def verdict(self):
        q = 1.0 - self.rho
        return Verdict(
            self,
            False,
            "diluting",
            f"the operator's prior is scale-invariant (depends on d/n): window mass H_W^(rho) (Z_q/n)^(1-rho) -> 0 for rho = {self.rho:g} < 1.",
            f"1 - D_n(W) ~ H_W (Z_q / n)^{q:g}",
        )

    def _params(self):
        return {"rho": self.rho}


class Bias(Encoding):
    """Any relative bias, as a sympy expression in a distance symbol or a Python callable.

    Parameters
    ----------
    expr : sympy expression or callable
        ``b(d)``. A callable needs ``asymptotic``.
    symbol : sympy.Symbol, optional
        The distance symbol of ``expr`` (its only free symbol by default).
    asymptotic : sympy expression, optional
        For a callable: an expression with the same behaviour as ``d -> oo`` (the verdict
        is decided on it; the numbers use the callable).

    Notes
    -----
    The verdict decides :math:`\\sum e^{b(d)} < \\infty` by comparison with the log-distance
    and Bertrand series: :math:`L_1 = \\lim b(d)/\\log d` (:math:`< -1` summable,
    :math:`> -1` not); at :math:`L_1 = -1`,
    :math:`L_2 = \\lim (b(d) + \\log d)/\\log\\log d` likewise. When sympy cannot take
    the limits or both are borderline, sympy's ``is_convergent`` is asked. If that fails
    too, the verdict is "undecided", never a guess.
    """

    name = "bias"

    def __init__(self, expr, symbol=None, *, asymptotic=None, logit_bound=0.0):
        import sympy as sp

        self.score_bound = _nonneg(logit_bound, "logit_bound")
        if callable(expr) and not isinstance(expr, sp.Basic):
            if asymptotic is None:
                raise DomainError("asymptotic", None, "a sympy expression in d giving the callable's behaviour as d -> oo")
            self._callable = expr
            self.expr = sp.sympify(asymptotic)
        else:
            self._callable = None
            self.expr = sp.sympify(expr)
        free = sorted(self.expr.free_symbols, key=str)
        if symbol is None:
            if len(free) != 1:
                raise DomainError("symbol", None, f"the distance symbol (expression has free symbols {free})")
            symbol = free[0]
        if symbol not in free and free:
            raise DomainError("symbol", symbol, f"one of the expression's free symbols {free}")
        self.symbol = symbol
        self._d = sp.Symbol(str(symbol), positive=True)
        self._expr_pos = self.expr.subs(symbol, self._d)
        self._numeric = None

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        if self._callable is not None:
            return np.asarray(self._callable(d), dtype=float) * np.ones_like(d)
        if self._numeric is None:
            import sympy as sp

            self._numeric = sp.lambdify(self._d, self._expr_pos, "numpy")
        return np.asarray(self._numeric(d), dtype=float) * np.ones_like(d)

    def verdict(self):
        import sympy as sp

        d, b = self._d, self._expr_pos
        try:
            L1 = sp.limit(b / sp.log(d), d, sp.oo)
        except Exception:  # sympy raises a variety of errors on hard limits
            L1 = None
        if L1 is not None and L1.is_real is not False and L1.is_number:
            if L1 < -1:
                return self._bounded(f"b(d) / log d -> {L1} < -1: e^b(d) <= d^-(1+e) eventually (comparison with a log-distance prior).")
            if L1 > -1:
                return Verdict(self, False, "diluting", f"b(d) / log d -> {L1} > -1: e^b(d) >= d^-(1-e) eventually, not summable.", None)
            try:
                L2 = sp.limit((b + sp.log(d)) / sp.log(sp.log(d)), d, sp.oo)
            except Exception:
                L2 = None
            if L2 is not None and L2.is_number:
                if L2 < -1:
                    return self._bounded(f"b(d) = -log d + c log log d with c -> {L2} < -1: a convergent Bertrand series.")
                if L2 > -1:
                    return Verdict(self, False, "diluting", f"b(d) = -log d + c log log d with c -> {L2} > -1: a divergent Bertrand series.", None)
        try:
            conv = sp.Sum(sp.exp(b), (d, 1, sp.oo)).is_convergent()
        except Exception:
            conv = None
        if conv is sp.true or conv is True:
            return self._bounded("sympy's convergence tests find sum e^b(d) convergent.")
        if conv is sp.false or conv is False:
            return Verdict(self, False, "diluting", "sympy's convergence tests find sum e^b(d) divergent.", None)
        return Verdict(self, None, "undecided", "neither the log-distance and Bertrand comparisons nor sympy's tests decide sum e^b(d).")

    def _bounded(self, reason):
        def limit(W):
            import sympy as sp

            b_mp = sp.lambdify(self._d, self._expr_pos, "mpmath")

            def integrand(u, N):
                # the tail integrand in u (x = N e^u) is e^(b(x)) x: below e^-10000 it is
                # nothing next to the head, and exp of a huge argument is never taken
                x = N * mpmath.exp(u)
                value = b_mp(x) + mpmath.log(x)
                return mpmath.mpf(0) if value < -10000 else mpmath.exp(value)

            values = []
            for N in (1 << 14, 1 << 17):
                # direct sum below N, then the tail as an integral (x = N e^u keeps slowly
                # decaying tails well conditioned for quadrature) with the trapezoid correction
                head = np.exp(self.bias(np.arange(N, dtype=float)))
                with mpmath.workdps(30):
                    tail = mpmath.quad(lambda u, N=N: integrand(u, N), [0, 1, 10, mpmath.inf])
                    tail += mpmath.exp(b_mp(mpmath.mpf(N))) / 2
                total = math.fsum(head) + float(tail)
                values.append((total - math.fsum(head[:W])) / total)
            if abs(values[0] - values[1]) > 1e-6 * abs(values[1]):
                raise PrecisionError(
                    f"D_oo(W) for exp({self.expr}) cannot be certified: cut-offs 2^14 and 2^17 give "
                    f"{values[0]:.8g} and {values[1]:.8g}"
                )
            return values[1]

        return Verdict(self, True, "bounded", reason, None, _limit=limit)

    def _params(self):
        return {"expr": str(self.expr)}


def classify(encoding) -> Verdict:
    """Classify an encoding as bounded or diluting (Theorem 11, ``proofs/classification.md``).

    Parameters
    ----------
    encoding : Encoding
        An instance from :mod:`otprior.encodings`.

    Returns
    -------
    Verdict
        ``.bounded``, ``.kind``, ``.reason``, ``.rate`` and ``.limit_distant_mass(W)``.

    Examples
    --------
    >>> v = classify(KerpleLog(0.9, 1.0))
    >>> v.kind
    'diluting'
    >>> round(classify(ALiBi(0.5)).limit_distant_mass(4), 6)   # e^(-2)
    0.135335
    """
    if not isinstance(encoding, Encoding):
        raise DomainError("encoding", encoding, "an instance of an otprior.encodings class")
    return encoding.verdict()
