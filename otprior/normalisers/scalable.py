"""Length-dependent logit scaling: scalable softmax (SSMax) and log-n scaling (Qwen's logN).

SSMax multiplies the logits of a query with ``n`` keys by ``s ln n``; Qwen's logN by
``max(1, ln n / ln L)`` for training length ``L`` (the same with ``s = 1 / ln L`` beyond
``L``). Theorem N3 (``proofs/normalisers.md``): with a bias constant from some distance on
(value ``c_T``; window maximum ``b*``, largest distant bias before the constant part ``M``),
the window keeps a share bounded away from zero iff its content advantage satisfies
``Delta >= max(M - b*, 1/s + c_T - b*)``; for NoPE this is ``s Delta >= 1``. With a bias
that falls to ``-inf`` (ALiBi, KERPLE, log-distance, CABLE) the scaled bias concentrates the
row on the nearest keys: bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import softmax as _softmax

from .._registry import param
from .._validation import check_int, check_real
from ..encodings._base import Verdict, decisive
from ._base import Normaliser, register, row, threshold_verdict

__all__ = ["SSMax", "LogN"]


def _scaled_classify(norm, encoding, B, s, label):
    prof = encoding.far_profile(1)
    mass = norm.mass_function(encoding)

    def window_profile(W):
        return encoding.far_profile(W)

    if prof is None:
        return Verdict(encoding, None, "undecided", f"{label}: no analysis of this encoding's far bias under length-dependent scaling.",
                       normaliser=norm, score_bound=B, window_mass_fn=mass)
    if prof[0] == "minus-infinity":
        # Theorem N3b: decreasing b -> -oo; the scaled row concentrates on the largest logits
        b = np.asarray(encoding.bias(np.arange(2, dtype=float)), dtype=float)
        gap = float(b[0] - b[1])  # b(0) - b(1): the window W = 1 case; general W in window_threshold
        why = f"{label}: the bias falls to -oo and the factor {decisive(s, 0.0)} ln n sharpens it without limit (Theorem N3b)."
        return threshold_verdict(encoding, norm, B, -gap, strict=False, why=why, rate="D_n(W) -> 0 above the threshold",
                                 window_mass=mass, limit=(lambda W: 0.0) if 2 * B <= gap else None)
    _, b_star, distant, tail = window_profile(1)
    threshold = max(distant - b_star, 1.0 / s + tail - b_star)
    why = f"{label}: the logits are scaled by {decisive(s, 0.0)} ln n; the bias is constant ({tail:.6g}) far away (Theorem N3)."
    return threshold_verdict(encoding, norm, B, threshold, strict=False, why=why, rate="1 - D_n(W) ~ W n^(s (Delta - 1/s)) at Delta below the threshold",
                             window_mass=mass)


@register
@dataclass(frozen=True)
class SSMax(Normaliser):
    """Scalable softmax: :math:`a_d = \\mathrm{softmax}(s \\ln n \\cdot z)_d` for a row of ``n`` keys."""

    name = "ssmax"

    s: float = param(1.0, doc="scale s > 0 (learned per head)")

    def __post_init__(self):
        object.__setattr__(self, "s", check_real(self.s, "s", low=0.0, low_open=True))

    def attention(self, logits):
        z = row(logits)
        return _softmax(self.s * math.log(z.size) * z)

    def classify(self, encoding, B):
        return _scaled_classify(self, encoding, B, self.s, "SSMax")


@register
@dataclass(frozen=True)
class LogN(Normaliser):
    """Log-n scaling (Qwen's logN attention): logits times :math:`\\max(1, \\ln n / \\ln L)`."""

    name = "logn"

    train_length: int = param(doc="training length L >= 2 (scaling starts beyond it)")

    def __post_init__(self):
        object.__setattr__(self, "train_length", check_int(self.train_length, "train_length", minimum=2))

    def attention(self, logits):
        z = row(logits)
        return _softmax(max(1.0, math.log(z.size) / math.log(self.train_length)) * z)

    def classify(self, encoding, B):
        return _scaled_classify(self, encoding, B, 1.0 / math.log(self.train_length), f"logN (L = {self.train_length})")


