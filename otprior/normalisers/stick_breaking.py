"""Stick-breaking attention: each key, nearest first, takes a sigmoid share of what is left.

:math:`\\beta_d = \\sigma(z_d)`, :math:`a_d = \\beta_d\\prod_{k<d}(1-\\beta_k)` in distance order
(entry 0 the nearest key); the remainder :math:`\\prod_{k<n}(1-\\beta_k)` is assigned to no key.
Theorem N4 (``proofs/normalisers.md``): the window's share is
:math:`1 - \\prod_{d<W}(1-\\sigma(z_d))`, which does not depend on ``n``. Unlike softmax,
stick-breaking is not invariant under a common shift of the logits, so the constant ``c`` of
the setting ``z_d = b(d) + c + e_d``, ``|e_d| <= B`` (the one meaning of ``score_bound`` for every
normaliser) matters: for every ``c`` the distant share is at most
:math:`T_\\infty/(T_\\infty + e^{-2B}H)` (softmax's bound, Theorem 10), so a summable
:math:`e^{b}` gives "bounded"; a non-summable one (bounded above) gives "content-dependent":
bounded at any fixed ``c``, diluting when ``c`` drifts to :math:`-\\infty` with ``n`` (e.g. all logits
:math:`-\\tfrac12\\ln n` for NoPE). :func:`stick_breaking_window_floor` is the other statement of
the theorem, about *absolute* logits in ``[-B', B']`` (no free constant).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

from ..encodings._base import Verdict
from ._base import Normaliser, register, row, softmax_verdict

__all__ = ["StickBreaking", "stick_breaking_window_floor"]


def stick_breaking_window_floor(window, logit_bound):
    """:math:`1 - (1 - \\sigma(-B'))^W`: the least window share when every logit lies in ``[-B', B']`` (Theorem N4).

    ``logit_bound`` bounds the logits themselves (bias, constant and content together), not the
    content around a free constant as ``score_bound`` does in :func:`otprior.classify`: with a free
    constant no floor holds at a non-summable bias (Theorem N4(iv)).

    Parameters
    ----------
    window : int
        ``W >= 1``.
    logit_bound : float
        ``B' >= 0``.

    Returns
    -------
    float
        :math:`1 - \\sigma(B')^W`, computed as ``-expm1(W log sigma(B'))``; attained at ``z = -B'``.
    """
    return -math.expm1(window * float(log_expit(logit_bound)))  # 1 - sigma(B)^W, sigma(B) = 1 - sigma(-B)


@register
@dataclass(frozen=True)
class StickBreaking(Normaliser):
    """Stick-breaking attention (nearest key first); the leftover mass goes to no key."""

    name = "stick-breaking"

    def attention(self, logits):
        z = row(logits)
        log_keep = np.concatenate([[0.0], np.cumsum(log_expit(-z))[:-1]])  # log prod_{k<d} (1 - beta_k)
        return np.exp(log_expit(z) + log_keep)

    def _window_mass(self, encoding, window, n):
        b = np.asarray(encoding.bias(np.arange(window, dtype=float), n), dtype=float)
        return float(-np.expm1(np.sum(log_expit(-b))))

    def classify(self, encoding, B):
        """The pair's verdict under content within ``B`` of a free constant (Theorem N4 (iii), (iv)).

        ``e^b`` summable: "bounded", with :math:`D_n(W) \\le T_\\infty/(T_\\infty + e^{-2B}H)` for every
        constant and every length. Not summable (and bounded above): "content-dependent": at a fixed
        constant ``c`` the window keeps at least :math:`1 - \\prod_{d<W}(1-\\sigma(b(d)+c-B))`, while the
        constant :math:`c_n = -\\tfrac12\\ln\\sum_{d<n}e^{b(d)}` makes :math:`D_n(W)\\to1`.
        """
        base = softmax_verdict(encoding, 0.0)
        mass = self.mass_function(encoding)
        limit = lambda W: self._limit(encoding, W)  # noqa: E731
        b0 = float(np.asarray(encoding.bias(np.arange(1, dtype=float), 1), dtype=float)[0])
        if base.kind == "bounded":
            bound = ""
            try:
                d0 = base.limit_distant_mass(1)  # T_oo / (T_oo + H) at W = 1, B = 0
                if 0.0 < d0 < 1.0:
                    r = d0 / (1.0 - d0)
                    bound = f" (at W = 1: D_n(1) <= {r / (r + math.exp(-2.0 * B)):.6g})"
            except (ValueError, ArithmeticError):
                pass
            return Verdict(
                encoding,
                True,
                "bounded",
                "e^b is summable: for every constant c and every content within B = "
                f"{B:.6g} of it, stick-breaking gives D_n(W) <= T_oo / (T_oo + e^(-2B) H), softmax's bound{bound} (Theorem N4(iii)).",
                "m_n(W) does not depend on n",
                normaliser=self,
                score_bound=B,
                window_mass_fn=mass,
                limit_fn=limit,
            )
        if base.kind == "undecided":
            return Verdict(encoding, None, "undecided", "whether e^b is summable is not decided: " + base.reason,
                           normaliser=self, score_bound=B, window_mass_fn=mass)
        floor = float(expit(b0 - B))
        return Verdict(
            encoding,
            None,
            "content-dependent",
            "stick-breaking is not shift-invariant, and e^b is not summable: at a fixed constant c the window keeps "
            f"1 - prod_(d<W) (1 - sigma(b(d) + c + e_d)) >= sigma(b(0) + c - B) (= {floor:.6g} at c = 0) at every length, "
            "but the constant c_n = -(1/2) ln sum_(d<n) e^(b(d)) (all logits -(1/2) ln n for NoPE) gives D_n(W) -> 1 "
            "(Theorem N4(iv)).",
            "m_n(W) does not depend on n at a fixed constant",
            normaliser=self,
            score_bound=B,
            window_mass_fn=mass,
            limit_fn=limit,
        )

    def _limit(self, encoding, W):
        """:math:`D_\\infty(W) = P_W - P_\\infty`, :math:`P_k = \\prod_{d<k}(1 - \\sigma(b(d)))` (Theorem N4).

        :math:`P_\\infty = 0` exactly when :math:`\\sum_d \\sigma(b(d)) = \\infty`, i.e. when
        :math:`e^{b}` is not summable (eventually constant biases, diluting power laws); for a
        summable bias :math:`P_\\infty > 0` is not computed here.
        """
        from .._validation import PrecisionError

        p_w = float(np.exp(np.sum(log_expit(-np.asarray(encoding.bias(np.arange(W, dtype=float), W), dtype=float)))))
        prof = encoding.far_profile(1)
        summable = softmax_verdict(encoding, 0.0).kind == "bounded"
        if (prof is not None and prof[0] == "constant-tail") or not summable:
            return p_w
        raise PrecisionError("D_oo(W) of stick-breaking with a summable bias: the infinite product P_oo > 0 is not computed")
