"""The prefix-consistent causal unbalanced optimal-transport attention operator.

Definition (``proofs/operator.md``). For query ``t`` solve, on the lower-triangular
``t x t`` prefix of the scores,

.. math::

    A_{ij} = e^{f_i + s_{ij} + g_j},\\quad
    f_i = -\\operatorname{LSE}_{j\\le i}(s_{ij} + g_j),\\quad
    g_j = -\\rho\\,\\operatorname{LSE}_{j\\le i\\le t}(s_{ij} + f_i),

and keep row ``t``. Rows sum to one exactly; the column marginal is softened with
balancing strength ``rho`` (``rho = lambda / (lambda + eps)`` for a KL penalty
``lambda`` and entropic regulariser ``eps``). The map ``g -> g'`` is a
``rho``-contraction in the sup norm (Theorem 1, ``proofs/contraction.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ._anderson import anderson_solve
from ._validation import DomainError, check_int, check_real, check_rho, check_scores

__all__ = ["causal_ot_attention", "causal_ot_fixed_point", "FixedPoint"]

_EPS = np.finfo(float).eps
# Kernel path only while exp() of every shifted score stays far from underflow and the
# dual scalings far from overflow; beyond that the exact log-domain path is used.
_KERNEL_SPREAD = 200.0
_KERNEL_DUAL = 600.0
# Memory for one batch of prefixes: (prefixes x width) doubles per working array.
_CHUNK_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class FixedPoint:
    """Duals of the fixed point on one prefix and the convergence record.

    Attributes
    ----------
    f, g : ndarray, shape (t,)
        Row and column duals; the plan is ``exp(f_i + s_ij + g_j)`` on ``j <= i``.
    residuals : ndarray
        Sup-norm residual ``max |G(g) - g|`` at each iteration.
    iterations : int
    """

    f: np.ndarray
    g: np.ndarray
    residuals: np.ndarray
    iterations: int

    def plan(self, scores) -> np.ndarray:
        """The lower-triangular plan ``exp(f_i + s_ij + g_j)``."""
        s = np.asarray(scores, dtype=float)
        t = self.g.size
        logits = self.f[:, None] + s[:t, :t] + self.g[None, :]
        return np.where(np.tril(np.ones((t, t), dtype=bool)), np.exp(logits), 0.0)


def _threshold(tol, rho):
    # Stop when ||G(g) - g|| <= tol (1 - rho): then ||G(g) - g*|| <= rho tol (contraction).
    # A floor at a few hundred ulps keeps the stopping rule above rounding noise.
    return max(tol * (1.0 - rho), 256 * _EPS)


def _log_map(s_masked, rho):
    """The dual update g -> g' on one prefix, in the log domain (Theorem 1)."""

    def G(x, rows):
        out = np.empty_like(x)
        for k in range(x.shape[0]):
            f = -logsumexp(s_masked + x[k][None, :], axis=1)
            out[k] = -rho * logsumexp(s_masked + f[:, None], axis=0)
        return out

    return G


def causal_ot_fixed_point(scores, rho, *, tol=1e-12, max_iter=100_000, accelerate=False):
    """Fixed point of the causal unbalanced OT operator on one full prefix.

    Solves the dual equations of the module docstring on the whole ``n x n``
    lower-triangular matrix in the log domain (the reference iteration of
    Theorem 1, ``proofs/contraction.md``), recording the residual of every sweep,
    so that the contraction rate can be observed.

    Parameters
    ----------
    scores : array_like, shape (n, n)
        Scores; only the lower triangle is read.
    rho : float
        Balancing strength in [0, 1).
    tol : float
        Sup-norm accuracy certified for ``g`` (see ``_threshold``).
    max_iter : int
    accelerate : bool
        Anderson mixing (``False``: the plain alternating iteration).

    Returns
    -------
    FixedPoint

    Examples
    --------
    >>> import numpy as np
    >>> fp = causal_ot_fixed_point(np.zeros((4, 4)), 0.5)
    >>> bool(np.allclose(fp.plan(np.zeros((4, 4))).sum(axis=1), 1.0))
    True
    """
    rho = check_rho(rho)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    s = check_scores(scores)
    if s.ndim != 2:
        raise DomainError("scores", f"array of shape {s.shape}", "a single (n, n) matrix")
    n = s.shape[0]
    sm = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    G = _log_map(sm, rho)
    g, info = anderson_solve(
        G, np.zeros((1, n)), _threshold(tol, rho), max_iter=max_iter, accelerate=accelerate, history=True
    )
    g = g[0]
    f = -logsumexp(sm + g[None, :], axis=1)
    return FixedPoint(f=f, g=g, residuals=info["history"], iterations=int(info["iterations"][0]))


def causal_ot_attention(scores, rho, *, tol=1e-12, max_iter=10_000, variant="prefix", accelerate=True):
    """Causal unbalanced OT attention.

    Parameters
    ----------
    scores : array_like, shape (..., n, n)
        Attention scores (already scaled); only the lower triangle is read and it
        must be finite.
    rho : float
        Balancing strength in [0, 1); ``rho = 0`` is causal softmax.
    tol : float
        Sup-norm accuracy of the column duals ``g`` of every prefix. The attention
        entries then carry a relative error of at most about ``2 tol`` (row duals are
        1-Lipschitz in ``g``), plus rounding.
    max_iter : int
        Iterations per prefix before :class:`~otprior.ConvergenceError`.
    variant : {"prefix", "full"}
        ``"prefix"`` (the operator): row ``t`` is the last row of the fixed point on
        the ``t x t`` prefix, so it depends on ``s_ij, i, j <= t`` only. ``"full"``
        solves once on the whole matrix; it is not prefix-consistent and is kept to
        show the difference (``proofs/prefix_consistency.md``).
    accelerate : bool
        Anderson mixing of the dual iteration (the answer does not depend on it).

    Returns
    -------
    ndarray, shape (..., n, n)
        Lower-triangular, row-stochastic attention.

    Notes
    -----
    Algorithm. All prefixes are solved together: prefix ``t`` is one problem of a
    batch whose unknowns are its column scalings ``v = exp(g - b)``. The kernel
    ``K_ij = exp(s_ij - max_k s_ik)`` is formed once; one sweep of every prefix is
    then two matrix products ``R = V K^T`` (row sums) and ``C = (1 / R) K`` (column
    sums) with triangular masks, and Anderson mixing on ``log v``. The sweep is the
    exact dual update of Theorem 1, so the contraction certificate applies. When the
    score spread exceeds 200 or a dual leaves ``[-600, 600]`` (scores of order
    ``1e3``), the affected matrices are solved prefix by prefix in the log domain
    (``logsumexp``), warm-started from the previous prefix; nothing overflows.

    Examples
    --------
    >>> import numpy as np
    >>> A = causal_ot_attention(np.zeros((3, 3)), 0.0)   # rho = 0: causal softmax
    >>> np.round(A, 4).tolist()
    [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.3333, 0.3333, 0.3333]]
    """
    rho = check_rho(rho)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    if variant not in ("prefix", "full"):
        raise DomainError("variant", variant, "'prefix' or 'full'")
    s = check_scores(scores)
    shape = s.shape
    n = shape[-1]
    flat = s.reshape(-1, n, n)
    out = np.empty_like(flat)
    for b in range(flat.shape[0]):
        out[b] = _attention_one(flat[b], rho, tol, max_iter, variant, accelerate)
    return out.reshape(shape)


def _attention_one(s, rho, tol, max_iter, variant, accelerate):
    n = s.shape[0]
    tri = np.tril(np.ones((n, n), dtype=bool))
    sm = np.where(tri, s, -np.inf)
    spread = float(s[tri].max() - s[tri].min())
    if spread <= _KERNEL_SPREAD:
        try:
            result = _kernel_path(sm, rho, tol, max_iter, variant, accelerate)
        except _KernelRange:
            result = None
        if result is not None:
            return result
    return _log_path(sm, rho, tol, max_iter, variant, accelerate)


class _KernelRange(Exception):
    """The kernel path left its safe range; the log-domain path takes over."""


def _kernel_path(sm, rho, tol, max_iter, variant, accelerate):
    n = sm.shape[0]
    shift = -sm.max(axis=1)
    K = np.exp(sm + shift[:, None])  # exactly zero above the diagonal
    thr = _threshold(tol, rho)
    prefixes = np.arange(n) if variant == "prefix" else np.array([n - 1])
    out = np.zeros((n, n))
    chunk = max(1, _CHUNK_ELEMENTS // n)
    warm = None
    for start in range(0, prefixes.size, chunk):
        P = prefixes[start : start + chunk]
        w = int(P[-1]) + 1
        Kc = K[:w, :w]
        mask = np.arange(w)[None, :] <= P[:, None]

        def G(x, rows, Kc=Kc, mask=mask):
            m = mask[rows]
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                V = np.where(m, np.exp(x), 0.0)
                R = V @ Kc.T
                U = np.where(m, 1.0 / R, 0.0)
                C = U @ Kc
                return np.where(m, -rho * np.log(C), 0.0)

        x0 = np.zeros((P.size, w))
        if warm is not None:
            # warm start: the last solved prefix, its last dual repeated on new columns
            k = warm.size
            x0[:, :k] = warm
            x0[:, k:] = warm[-1]
            x0[~mask] = 0.0
        x, info = anderson_solve(G, x0, thr, max_iter=max_iter, accelerate=accelerate)
        if info["failed"].any() or np.abs(x).max() > _KERNEL_DUAL:
            raise _KernelRange
        V = np.where(mask, np.exp(x), 0.0)
        R = V @ Kc.T
        if variant == "full":
            out = np.tril(K * V[0][None, :] / R[0][:, None])
        else:
            out[P, :w] = Kc[P] * V / R[np.arange(P.size), P][:, None]
        warm = x[-1, : int(P[-1]) + 1]
    return out


def _log_path(sm, rho, tol, max_iter, variant, accelerate):
    n = sm.shape[0]
    thr = _threshold(tol, rho)
    out = np.zeros((n, n))
    prefixes = range(n) if variant == "prefix" else [n - 1]
    g = np.zeros(0)
    for t in prefixes:
        st = sm[: t + 1, : t + 1]
        # warm start from the previous prefix; the new column from its own row
        f_t = -logsumexp(st[t, :t] + g[:t]) if t else -st[0, 0]
        x0 = np.concatenate([g[:t], [-rho * (st[t, t] + f_t)]]) if t else np.zeros(1)
        g, _ = anderson_solve(_log_map(st, rho), x0[None, :], thr, max_iter=max_iter, accelerate=accelerate)
        g = g[0]
        f = -logsumexp(st + g[None, :], axis=1)
        if variant == "full":
            out = np.where(np.isfinite(st), np.exp(f[:, None] + st + g[None, :]), 0.0)
        else:
            out[t, : t + 1] = np.exp(f[t] + st[t] + g)
    return out
