"""The prefix-consistent causal unbalanced optimal-transport attention operator.

Definition (``proofs/operator.md``). For query ``t`` solve, on the lower-triangular
``t x t`` prefix of the scores,

.. math::

    A_{ij} = e^{f_i + s_{ij} + g_j},\\quad
    f_i = -\\operatorname{LSE}_{j\\le i}(s_{ij} + g_j),\\quad
    g_j = -\\rho\\,\\operatorname{LSE}_{j\\le i\\le t}(s_{ij} + f_i),

and keep row ``t``. Rows sum to one; the column marginal is softened with
balancing strength ``rho`` (``rho = lambda / (lambda + eps)`` for a KL penalty
``lambda`` and entropic regulariser ``eps``). The map ``g -> g'`` is a
``rho``-contraction in the sup norm (Theorem 1, ``proofs/contraction.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._anderson import anderson_memory, anderson_solve
from ._validation import MACHINE_EPSILON, ConvergenceError, DomainError, check_int, check_real, check_rho, check_scores
from .limits import check_allocation

__all__ = ["causal_ot_attention", "causal_ot_fixed_point", "FixedPoint"]


_EPS = MACHINE_EPSILON
# Kernel path only while exp() of every shifted score stays far from underflow and the
# dual scalings far from overflow; beyond that the exact log-domain path is used.
_KERNEL_SPREAD = 200.0
_KERNEL_DUAL = 600.0
# beyond this rho a rejected Anderson candidate is halved towards the plain step before it is discarded
# (``backtrack`` of ``anderson_solve``): the default budget was out of reach at rho = 0.9999 without it; at and
# below this rho the mixing is as before (the answers there are unchanged bit for bit)
_BACKTRACK_RHO = 0.999
# Prefixes solved together in one block (each block cold, from g = 0).
_BLOCK = 128


@dataclass(frozen=True)
class FixedPoint:
    """Duals of the fixed point on one prefix and the convergence record.

    Attributes
    ----------
    f, g : ndarray, shape (t,)
        Row and column duals; the plan is ``exp(f_i + s_ij + g_j)`` on ``j <= i``.
        ``g`` is normalised so that ``g[-1] = 0`` (the plan does not depend on a
        constant added to ``g``).
    residuals : ndarray
        Oscillation ``osc(G(g) - g)`` of the residual at each iteration.
    iterations : int
    error_bound : float
        Certified bound on ``osc(g - g*)`` (Theorem 1 on the quotient by constants):
        the last residual over ``1 - rho``.
    """

    f: np.ndarray
    g: np.ndarray
    residuals: np.ndarray
    iterations: int
    error_bound: float = 0.0

    def plan(self, scores) -> np.ndarray:
        """The lower-triangular plan ``exp(f_i + s_ij + g_j)``."""
        s = np.asarray(scores, dtype=float)
        t = self.g.size
        tri = np.tril(np.ones((t, t), dtype=bool))
        logits = np.where(tri, self.f[:, None] + s[:t, :t] + self.g[None, :], -np.inf)  # above: never used
        with np.errstate(under="ignore"):
            return np.exp(logits)


def _floor(width):
    """Rounding level of one sweep relative to the size of the duals (two logarithms of
    sums of positive terms, summed pairwise or by BLAS): ``16 eps``, measured to be
    reached by the residual at every width used in the tests."""
    return 16.0 * _EPS


def _threshold(dual_tol, rho):
    # Stop when osc(G(g) - g) <= dual_tol (1 - rho): then osc(g - g*) <= dual_tol
    # (Theorem 1 on the quotient by constants, proofs/contraction.md).
    return dual_tol * (1.0 - rho)


def _image_threshold(dual_tol, rho):
    # Stop when rho osc(G(g) - g) <= dual_tol (1 - rho): then the image G(g), which is what the solver returns,
    # has osc(G(g) - g*) <= dual_tol (Lemma 8, proofs/operator_fast_paths.md: Theorem 1 and one more contraction).
    # rho = 0: G is constant and its first image is the fixed point. An overflow to inf only happens where
    # dual_tol (1 - rho) / rho exceeds the largest double, and then every finite residual of the kernel path (at
    # most 2 * _KERNEL_DUAL) satisfies the rule.
    if rho == 0.0:
        return np.inf
    with np.errstate(over="ignore"):
        return dual_tol * (1.0 - rho) / rho


def _logsumexp(a, axis):
    """``log(sum(exp(a), axis))`` with the maximum factored out (entries ``-inf`` allowed)."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(under="ignore", divide="ignore"):
        return np.log(np.sum(np.exp(a - m), axis=axis)) + np.squeeze(m, axis=axis)


def _log_map(s_masked, rho):
    """The normalised dual update on one prefix, in the log domain (Theorem 1)."""

    def G(x, rows):
        f = -_logsumexp(s_masked[None, :, :] + x[:, None, :], axis=2)
        out = -rho * _logsumexp(s_masked[None, :, :] + f[:, :, None], axis=1)
        return out - out[:, -1:]

    return G


def causal_ot_fixed_point(scores, rho, *, dual_tol=1e-12, max_iter=100_000, accelerate=False):
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
    dual_tol : float
        Accuracy of ``g`` in the oscillation seminorm (see ``FixedPoint.error_bound``).
    max_iter : int
    accelerate : bool
        Anderson mixing (``False``: the plain alternating iteration). Where the mixing fails
        within ``max_iter``, the plain iteration is run from the same start with the same budget,
        so the accelerated call fails only where ``accelerate=False`` does, and returns its answer
        bit for bit there (Remark 5, ``proofs/operator_fast_paths.md``); at most ``2 max_iter``
        sweeps in all.

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
    dual_tol = check_real(dual_tol, "dual_tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    if not isinstance(accelerate, (bool, np.bool_)):
        raise DomainError("accelerate", accelerate, "True or False")
    s = check_scores(scores, work=4)  # the shifted scores, their mask and the mixing's memory
    if s.ndim != 2:
        raise DomainError("scores", f"array of shape {s.shape}", "a single (n, n) matrix")
    n = s.shape[0]
    s = np.ascontiguousarray(s)  # the result does not depend on the layout of the input
    tri = np.tril(np.ones((n, n), dtype=bool))
    sm = np.where(tri, s - s.max(axis=1, where=tri, initial=-np.inf)[:, None], -np.inf)
    G = _log_map(sm, rho)

    def solve(mixing):
        return anderson_solve(
            G,
            np.zeros((1, n)),
            _threshold(dual_tol, rho),
            max_iter=max_iter,
            accelerate=mixing,
            memory=anderson_memory(rho),
            history=True,
            seminorm="osc",
            floor=lambda amax: _floor(n) * (1.0 + amax),
            backtrack=rho > _BACKTRACK_RHO,
            rate=rho,
        )

    try:
        g, info = solve(accelerate)
    except ConvergenceError:
        if not accelerate:
            raise
        # the plain iteration from the same start with the same budget: the answer of accelerate=False,
        # bit for bit, wherever the mixing fails (Remark 5, proofs/operator_fast_paths.md)
        try:
            g, info = solve(False)
        except ConvergenceError as err:
            raise _both_failed(err) from None
    g = g[0]
    f = -_logsumexp(sm + g[None, :], axis=1)
    f = f - s.max(axis=1, where=tri, initial=-np.inf)
    bound = float(info["residual"][0]) / (1.0 - rho) if rho < 1 else np.inf
    return FixedPoint(f=f, g=g, residuals=info["history"], iterations=int(info["iterations"][0]), error_bound=bound)


# n x n double arrays one matrix's solve keeps besides its output, at most: the shifted scores, the kernel (its
# transpose is a view), its float32 copy, the causal mask and the blocks' duals, images and mixing memory (two),
# rounded up (a kept bound: the transposed copies it once counted are no longer made)
_WORK_ARRAYS = 6
# length-n double vectors a block of at most _BLOCK prefixes adds besides those: the refinement sweeps' four
# reference arrays (Lemma 7; the certified increments' second reference replaces them, with its point: five, Lemma 9)
# and the solver's three residual and difference buffers, 8 _BLOCK of them
_WORK_ROWS = 8 * _BLOCK


def causal_ot_attention(scores, rho, *, dual_tol=1e-12, max_iter=10_000, variant="prefix", accelerate=True):
    """Causal unbalanced OT attention.

    Parameters
    ----------
    scores : array_like, shape (..., n, n)
        Attention scores (already scaled); only the lower triangle is read and it
        must be finite.
    rho : float
        Balancing strength in [0, 1); ``rho = 0`` is causal softmax.
    dual_tol : float
        Accuracy of the column duals ``g`` of every prefix in the oscillation seminorm
        (the attention does not depend on a constant added to ``g``). The entries then
        carry a relative error of at most ``2 dual_tol`` plus rounding, where this is
        attainable: the stopping rule certifies ``max(dual_tol, r / (1 - rho))`` with
        ``r = 16 eps (1 + max|g|)`` the rounding level of one sweep
        (``dual_tol`` itself for ``rho <= 0.99`` and scores of moderate size).
        Not to be confused with the growth tolerance ``tol`` of ``margin_for``.
    max_iter : int
        Iterations per prefix before :class:`~otprior.ConvergenceError`.
    variant : {"prefix", "full"}
        ``"prefix"`` (the operator): row ``t`` is the last row of the fixed point on
        the ``t x t`` prefix, so it depends on ``s_ij, i, j <= t`` only. ``"full"``
        solves once on the whole matrix; it is not prefix-consistent and is kept to
        show the difference (``proofs/prefix_consistency.md``).
    accelerate : bool
        Anderson mixing of the dual iteration, memory chosen by ``rho`` (the answer
        does not depend on it beyond the certified accuracy). A block of prefixes on which the
        mixing fails is solved again by exactly the route of ``accelerate=False`` (same start,
        same budget), so the accelerated operator raises only where the plain one does and
        there returns the plain rows bit for bit (Remark 5, ``proofs/operator_fast_paths.md``).
        Its cost is then at most the failed accelerated solve plus the plain one.

    Returns
    -------
    ndarray, shape (..., n, n)
        Lower-triangular attention; every row sums to one to rounding (each row is
        normalised by its computed sum, a change within the certified error).

    Notes
    -----
    Algorithm. Each row of scores is first shifted by its maximum (the shift cancels
    in ``f``), so scores up to ``1e300`` in magnitude cannot overflow. Prefixes are
    solved in blocks of 128, each block cold from ``g = 0``: prefix ``t`` is one
    problem of a batch whose unknowns are its column duals ``g``, normalised by
    ``g_t = 0`` (this removes the constant mode, which contracts only at rate
    ``rho``, Theorem 1). When the score spread is at most 200, one sweep of a block
    is two matrix products with the kernel ``K_ij = exp(s_ij - max_k s_ik)`` of the
    block's width (the products skip its zero tiles); otherwise (or if a plain step
    overflows or leaves ``[-600, 600]``) the same sweep is evaluated in the log domain:
    matrix products of a kernel into which the current duals are absorbed, and the
    entries that underflow there as exact log-sum-exps on sparse supports (see
    ``_log_block``), with the same number of sweeps. Anderson mixing is safeguarded
    (``otprior/_anderson.py``): a candidate outside the kernel's safe range, or whose
    residual exceeds 10 times the best, is replaced by the plain step, and a problem whose
    mixing went no faster than ``rho`` per sweep over a quarter of the budget goes on with
    plain steps from its best iterate where Theorem 1 guarantees they finish; a block that
    still fails is solved by the plain route (above), so the accelerated
    operator converges wherever the plain iteration does. The result does not depend on
    the memory layout of ``scores`` (the shifted scores are C-ordered). For ``rho > 0.999`` a
    rejected candidate is first halved towards the plain step (Remark 6 there): with the default
    settings at ``rho = 0.9999`` (scores N(0, 1) x 1, 10, 100, n = 2..64, 3 seeds) 46 of 54 inputs
    then converge within the 10000 sweeps; the others, all at spread x 10 or x 100 and n >= 16, raise
    :class:`~otprior.ConvergenceError` (the plain iteration needs more than 10000 sweeps there too),
    and a larger ``max_iter`` is the remedy. The mixing's memory is
    chosen by ``rho`` (its differences are stored in float32: they only choose the points
    evaluated). With acceleration, on the kernel path, the first sweep of every block from
    ``g = 0`` is a closed form shared by all blocks (one cumulative sum, Lemma 1 of
    ``proofs/operator_fast_paths.md``), and for a spread of at most 40 the next sweeps of
    blocks at least 256 wide run in float32 until the residual is below ``1e-3`` (at most 24
    of them); then one float64 sweep keeps its products as a reference, and the next sweeps
    add to them increments formed with float32 products (refinement sweeps, accurate to about
    ``1e-7`` times the distance to the reference, Lemma 7 there) until a residual comes within
    ``10`` times the threshold. Such blocks stop on the image rule (the returned duals are the image of
    the last point, within ``rho r / (1 - rho)`` of the fixed point, Lemma 8 there), and their last sweep
    adds float32 increments to the sums of the float64 sweep before it, with a proved bound on their
    rounding that the stopping test subtracts (Lemma 9 there); every other certificate comes from a
    float64 sweep (Lemma 2 there), so the accuracy stated above is unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> A = causal_ot_attention(np.zeros((3, 3)), 0.0)   # rho = 0: causal softmax
    >>> np.round(A, 4).tolist()
    [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.3333, 0.3333, 0.3333]]
    """
    rho = check_rho(rho)
    dual_tol = check_real(dual_tol, "dual_tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    if variant not in ("prefix", "full"):
        raise DomainError("variant", variant, "'prefix' or 'full'")
    if not isinstance(accelerate, (bool, np.bool_)):
        raise DomainError("accelerate", accelerate, "True or False")
    s = check_scores(scores, work=_WORK_ARRAYS, rows=_WORK_ROWS)
    shape = s.shape
    n = shape[-1]
    flat = s.reshape(-1, n, n)
    out = np.zeros(flat.shape)
    for b in range(flat.shape[0]):
        dest = out[b]  # written in place (no second n x n array and copy)
        rows = _attention_one(flat[b], rho, dual_tol, max_iter, variant, accelerate, out=dest)
        if rows is not dest:
            dest[...] = rows
    return out.reshape(shape)


def _attention_one(s, rho, dual_tol, max_iter, variant, accelerate, block=_BLOCK, out=None):
    """The operator on one ``(n, n)`` matrix, into ``out`` (zeros, C-ordered) where given; returns the
    result (``out`` itself except for ``variant="full"``)."""
    n = s.shape[0]
    tri = np.tri(n, dtype=bool)  # the causal mask (lower triangle with the diagonal)
    # shift every row by its maximum: f absorbs it exactly (Definition 1); the shifted scores are
    # C-ordered whatever the layout of the input (a Fortran-ordered or transposed view would give a
    # Fortran-ordered kernel, whose products BLAS sums in another order: the result would depend on
    # the layout by rounding)
    top = np.max(s, axis=1, where=tri, initial=-np.inf)
    sm = np.subtract(s, top[:, None], order="C")
    spread = float(-np.min(sm, where=tri, initial=0.0))
    np.copyto(sm, -np.inf, where=~tri)
    prefixes = np.arange(n) if variant == "prefix" else np.array([n - 1])
    if out is None:
        out = np.zeros((n, n))
    kernels = first = None
    # the blocks are independent (each cold): the widest first, so that the memory of the
    # mixing is allocated once and reused by the narrower ones
    workspace = {}
    for start in reversed(range(0, prefixes.size, block)):
        P = prefixes[start : start + block]
        if spread <= _KERNEL_SPREAD and kernels is None:
            # the kernel of every block is a leading square of one kernel; its transpose is a view
            # (the products pass it to BLAS as a transposed operand, as fast as a contiguous copy)
            with np.errstate(under="ignore"):
                K = np.exp(sm)  # exactly zero above the diagonal
            kernels = (K, K.T)
            if accelerate and variant == "prefix":
                # the first sweep of every prefix from g = 0, for all blocks at once (_first_sweep),
                # kept in the output: rows P of it are read before the rows P of the output are
                # written, and its entries beyond the diagonal are zero, as the output's are
                first = np.divide(K, K.sum(axis=1)[:, None], out=out)
                for i in range(1, n):  # the cumulative sum down the columns, row by row (np.cumsum
                    # along axis 0 is 10x slower here); entries right of the diagonal stay zero
                    np.add(first[i, :i], first[i - 1, :i], out=first[i, :i])
            if accelerate and spread <= _F32_SPREAD and n >= _F32_WIDTH:
                # single-precision copies for the warm-up sweeps (_warm_map)
                K32 = K.astype(np.float32)
                kernels += (K32, K32.T)
        full = variant == "full"
        try:
            rows = _block(sm, P, rho, dual_tol, max_iter, accelerate, full, spread, kernels, workspace, first)
        except ConvergenceError:
            if not accelerate:
                raise
            # The accelerated route failed on this block: the block is solved again by exactly the
            # plain route (accelerate=False) from the same start (g = 0) with the same budget, so its
            # rows are bit for bit those of accelerate=False and fail only where the plain ones do
            # (Remark 5, proofs/operator_fast_paths.md). The plain route reads only the float64
            # kernel, which is the same array in both routes, and no mixing memory.
            try:
                rows = _block(sm, P, rho, dual_tol, max_iter, False, full, spread, kernels and kernels[:2], workspace)
            except ConvergenceError as err:
                raise _both_failed(err, None if full else P) from None
        if full:
            return rows
        w = int(P[-1]) + 1
        out[int(P[0]) : w, :w] = rows  # P is the range P[0]..w-1
    return out


def _both_failed(err, P=None):
    """The plain route's error on the prefixes ``P`` (``None``: the one problem of the full square),
    saying that the accelerated route failed first."""
    where = "the full problem" if P is None else f"prefixes {int(P[0])}..{int(P[-1])}"
    new = ConvergenceError(
        f"{where}: the accelerated route failed and so did the plain route "
        f"(accelerate=False) from the same start with the same budget: {err}",
        partial=err.partial,
    )
    new.failures = getattr(err, "failures", {})
    return new


def _block(sm, P, rho, dual_tol, max_iter, accelerate, full, spread, kernels, workspace, first=None):
    """The rows of the prefixes ``P``: the kernel path where the spread allows it, the log-domain
    path where it does not or where a kernel step overflows or leaves the safe range."""
    if spread <= _KERNEL_SPREAD:
        try:
            return _kernel_block(sm, P, rho, dual_tol, max_iter, accelerate, full, kernels, workspace, first)
        except _KernelRange:
            pass
    return _log_block(sm, P, rho, dual_tol, max_iter, accelerate, full, workspace)


class _KernelRange(Exception):
    """The kernel path left its safe range; the log-domain path takes over."""


def _normalise_rows(A):
    """``A`` with each row divided by its sum, in place (``A`` is a fresh array of the caller's)."""
    total = A.sum(axis=-1, keepdims=True)
    return np.divide(A, total, out=A)


# column tiles of the products with the lower-triangular kernel (zero tiles are skipped):
# 64 up to width 1024, 128 beyond (measured with one BLAS thread: 64 is 5-25% faster up to
# 1024, 128 is 4% faster at 2048)
_TILE = 128
_TILE_SMALL = 64
_TILE_SMALL_WIDTH = 1024


def _tile(w):
    return _TILE_SMALL if w <= _TILE_SMALL_WIDTH else _TILE


def _times_kt(V, KT):
    """``V @ KT`` with ``KT = K.T`` for a lower-triangular ``K``: column tile ``[i0, i1)`` only
    involves ``j < i1`` (about half the multiply-adds of the dense product for large widths).
    ``KT`` may be the transposed view of ``K``: its tiles are then passed to BLAS as transposed
    operands (measured as fast as a contiguous copy, which costs a 5 ms transpose at n = 1024)."""
    w = KT.shape[0]
    tile = _tile(w)
    if w <= tile:
        return V @ KT
    out = np.empty((V.shape[0], w), dtype=V.dtype)
    for i0 in range(0, w, tile):
        i1 = min(w, i0 + tile)
        np.matmul(V[:, :i1], KT[:i1, i0:i1], out=out[:, i0:i1])
    return out


def _times_k(U, K):
    """``U @ K`` for a lower-triangular ``K``: column tile ``[j0, j1)`` only involves ``i >= j0``."""
    w = K.shape[0]
    tile = _tile(w)
    if w <= tile:
        return U @ K
    out = np.empty((U.shape[0], w), dtype=U.dtype)
    for j0 in range(0, w, tile):
        j1 = min(w, j0 + tile)
        np.matmul(U[:, j0:], K[j0:, j0:j1], out=out[:, j0:j1])
    return out


def _first_sweep(first, P, mask, rho):
    """The image of ``g = 0`` under the dual update of the prefixes ``P``, without products.

    From ``g = 0`` every prefix ``p`` has ``V_pj = 1`` for ``j <= p``, so its row sums are
    those of the kernel, ``R_pi = r_i = sum_{j <= i} K_ij`` for ``i <= p`` (``K`` is lower
    triangular), whatever ``p``; its column sums are then
    ``C_pj = sum_{j <= i <= p} K_ij / r_i``, the entry ``(p, j)`` of the column-wise cumulative
    sum ``first`` of ``K_ij / r_i``, computed once for every block. The image is
    ``-rho log C_pj`` normalised at ``j = p``, as ``_kernel_map`` forms it (up to rounding).
    """
    w = mask.shape[1]
    rows = first[int(P[0]) : int(P[-1]) + 1, :w] if P.size == P[-1] - P[0] + 1 else first[P, :w]  # a view for a range
    g = np.where(mask, rows, 1.0)
    np.log(g, out=g)  # C_pj >= K_jj / r_j > 0 on the prefix
    g *= -rho
    g -= g[np.arange(P.size), P][:, None]
    g *= mask
    return g


def _kernel_block(sm, P, rho, dual_tol, max_iter, accelerate, full, kernels=None, workspace=None, first=None):
    """Solve the prefixes ``P`` together with matrix products (kernel domain).

    ``kernels``: ``(exp(sm), exp(sm).T)`` (the transpose may be a view) of a leading square at
    least as wide as the block, or ``None`` (computed here)."""
    w = int(P[-1]) + 1
    if kernels is None:
        with np.errstate(under="ignore"):
            big = np.exp(sm[:w, :w])  # exactly zero above the diagonal
        kernels = (big, big.T)
    K, KT = kernels[0][:w, :w], kernels[1][:w, :w]
    mask = np.arange(w)[None, :] <= P[:, None]
    G = _kernel_map(K, KT, mask, P, rho)
    certified = threshold = None
    if accelerate and len(kernels) > 2 and w >= _F32_WIDTH:
        K32, KT32 = kernels[2][:w, :w], kernels[3][:w, :w]
        Ginc = _increment_map(K32, KT32, mask, P, rho)
        if Ginc is not None:
            # with the refinement sweeps, a problem stops on the image rule (Lemma 8, proofs/operator_fast_paths.md):
            # the returned image is certified to dual_tol where its residual is at most dual_tol (1 - rho) / rho
            threshold = _image_threshold(dual_tol, rho)
        G = _warm_map(G, _kernel_map(K32, KT32, mask, P, rho), _threshold(dual_tol, rho), Ginc,
                      None if full else threshold)
        certified = G.certified
    try:
        x, _ = _solve(G, np.zeros((P.size, w)), rho, dual_tol, max_iter, accelerate, w, bound=_KERNEL_DUAL,
                      workspace=workspace,
                      first_image=None if first is None or full else _first_sweep(first, P, mask, rho),
                      certified=certified, threshold=threshold)
    except ConvergenceError as err:
        # a plain step that overflows or leaves the safe range: the log-domain path is exact there
        if err.failures["tolerance"].size == 0:
            raise _KernelRange from err
        raise
    if np.abs(x).max() > _KERNEL_DUAL:
        raise _KernelRange
    with np.errstate(under="ignore"):
        V = np.where(mask, np.exp(x), 0.0)
    if full:
        R = V @ K.T
        return _normalise_rows(K * V[0][None, :] / R[0][:, None])
    # the rows P of the kernel (P is a range: a view, not a gathered copy), scaled into V
    rows = np.multiply(K[int(P[0]) : int(P[-1]) + 1] if P.size == P[-1] - P[0] + 1 else K[P], V, out=V)
    return _normalise_rows(rows)


# Warm-up sweeps in single precision (kernel path, accelerated; proofs/operator_fast_paths.md).
# While a problem's residual is large its duals are far from the fixed point, and a float32
# sweep (products 2.2x faster than float64 with one BLAS thread) moves them as far as a float64
# one. Used where the numbers involved stay within float32's range: spread <= 40 and
# |duals| <= 80 give kernel entries >= exp(-40), scalings in [exp(-80), exp(80)] and row sums
# in [exp(-80), w exp(80)] (finite for w <= 6000); a float32 image that is not finite anyway
# (a column sum below float32's range, a wider block) is replaced by the float64 image at the
# same point, and the rest of the block runs in float64.
_F32_SPREAD = 40.0
_F32_DUAL = 80.0
# once the float32 residuals of a block are all at most _F32_SWITCH (and after _F32_SWEEPS
# float32 sweeps) the block goes on in float64: measured at n = 1024, rho = 0.5, switching at
# 1e-3 or 1e-2 leaves the float64 sweeps after the switch as many as from the same residual
# without float32 (1e-4 and below: one more, the float32 rounding then shows in the mixing);
# sweeps per block of 128 at n = 1024 (float32 + float64, against float64 alone): 4 + 6 against
# 11 at rho = 0.5, 8 + 14 against 23 at rho = 0.9, 19 + 63 against 83 at rho = 0.99.
# Blocks narrower than _F32_WIDTH stay in float64 (their products cost little next to the rest).
_F32_SWITCH = 1e-3
_F32_SWEEPS = 24
_F32_WIDTH = 256
# the differences stored by the mixing in float32 (``history32`` of ``anderson_solve``), the images' as
# (B, m, w) (``images_last=False``: the candidate's row-vector product is about twice as fast with numpy 2.4,
# proofs/operator_fast_paths.md after Remark 3)
_HISTORY32 = True
_IMAGES_LAST = False


def _warm_map(G64, G32, threshold, Ginc=None, stop=None):
    """The float64 map ``G64`` with its first evaluations replaced by the float32 map ``G32``.

    Lemma 2 (``proofs/operator_fast_paths.md``): every image not computed by ``G64`` is flagged
    inexact (``G.certified``, the ``certified`` argument of ``anderson_solve``), so it never stops a
    problem: every certificate comes from a float64 evaluation (Theorem 1,
    ``proofs/contraction.md``, holds at any point, however it was reached). A float32 image is
    returned (as float64) only if every dual of it is finite and at most ``_F32_DUAL`` in
    magnitude; otherwise the ``G64`` image at the same point is. Once every float32 residual (as
    the solver measured it) is at most ``_F32_SWITCH``, or after ``_F32_SWEEPS`` float32 sweeps, or
    at a point with a dual beyond ``_F32_DUAL``, the float32 sweeps end.

    ``Ginc`` (``_increment_map``): then the first float64 evaluation keeps its products (the
    reference), and the next evaluations are the reference plus increments formed with float32
    products (Lemma 7 there), as long as every dual stays within ``_F32_DUAL``, the image is finite
    with duals within ``_F32_DUAL`` and, after each, every problem's residual is above
    ``_INC_SWITCH`` times the threshold and ``_INC_FLOOR`` times the reference's largest residual
    over ``1 - rho`` (Theorem 1's bound on its distance to the fixed point), at most ``_F32_SWEEPS``
    of them; they are flagged inexact too.

    ``stop`` (the solver's stopping level, the image rule's ``theta'`` of Lemma 8): then, once the refinement
    sweeps have ended, the first float64 evaluation keeps its products as a second reference, and at most
    ``_CERT_SWEEPS`` evaluations after it are increments from it with float32 products whose rounding is bounded
    (certified increments, Lemma 9): such an image may stop a problem only where its residual is at most
    ``stop - 4 l``, with ``l`` the proved bound on its relative rounding (so the returned image is within
    ``dual_tol`` of the fixed point, as a float64 image stopped at ``stop`` is). Every later evaluation is ``G64``.
    """
    state = {"fine": False, "used": 0, "ref": None, "inc": Ginc is not None, "incs": 0, "phase": None, "level": 0.0,
             "cert": None, "certs": 0, "slack": None}
    # certified increments need a refinement phase that ended (its reference taken and used) and the stopping level
    certify = Ginc is not None and stop is not None and stop > 0.0

    def fine(x, rows):
        if not state["inc"]:
            if certify and state["incs"] and state["certs"] < _CERT_SWEEPS:
                return certified_increment(x, rows)
            return G64(x, rows)
        ref = state["ref"]
        if ref is None:
            # the reference: a float64 sweep keeping its products (kept if its residuals leave room, certified)
            keep = {}
            img = G64(x, rows, keep=keep)
            state["ref"] = (rows.copy(), keep)
            state["phase"] = "ref"
            return img
        ref_rows, keep = ref
        if not (state["incs"] < _F32_SWEEPS and max(x.max(), -x.min()) <= _F32_DUAL):
            state["inc"] = False
            return G64(x, rows)
        sel = _rows_in(ref_rows, rows)
        img = Ginc(x, rows, keep, sel)
        if not max(img.max(), -img.min()) <= _F32_DUAL:  # not finite, or beyond the range: G64 instead
            state["inc"] = False
            return G64(x, rows)
        state["incs"] += 1
        state["phase"] = "inc"
        return img

    def certified_increment(x, rows):
        cert = state["cert"]
        if cert is None:
            # the second reference: a float64 sweep keeping its products (it may certify, as any float64 image)
            keep = {}
            img = G64(x, rows, keep=keep)
            state["cert"] = (rows.copy(), keep, x.copy())
            state["ref"] = None  # the first reference is no longer read (the refinement sweeps have ended)
            state["phase"] = "ref"
            if not stop >= _CERT_ROOM * _floor(x.shape[1]) * (1.0 + max(img.max(), -img.min())):
                # the stopping level is near the rounding floor of a float64 sweep (a tight dual_tol, rho near one):
                # a bound subtracted from it would leave no room, so the float64 sweeps certify as before
                state["certs"] = _CERT_SWEEPS
            return img
        ref_rows, keep, x0 = cert
        if "low" not in keep:  # the smallest row and column sums of each problem (positive), once
            keep["low"] = (np.min(keep["R"], axis=1), np.min(keep["C"], axis=1))
        low_r, low_c = keep["low"]
        if not max(x.max(), -x.min()) <= _F32_DUAL:
            state["certs"] = _CERT_SWEEPS
            return G64(x, rows)
        sel = _rows_in(ref_rows, rows)
        img = Ginc(x, rows, keep, sel)
        if not max(img.max(), -img.min()) <= _F32_DUAL:  # not finite, or beyond the range: G64 instead
            state["certs"] = _CERT_SWEEPS
            return G64(x, rows)
        state["certs"] += 1
        d = x - (x0 if sel is None else x0[sel])
        np.abs(d, out=d)
        state["slack"] = 4.0 * _increment_rounding(d.max(axis=1), x.shape[1], low_r if sel is None else low_r[sel],
                                                   low_c if sel is None else low_c[sel])
        state["phase"] = "cert"
        return img

    def G(x, rows):
        state["phase"] = None
        if state["fine"] or state["used"] >= _F32_SWEEPS or not max(x.max(), -x.min()) <= _F32_DUAL:
            state["fine"] = True
            return fine(x, rows)
        img = G32(x, rows)
        if not max(img.max(), -img.min()) <= _F32_DUAL:  # not finite, or beyond the range: G64 from now on
            state["fine"] = True
            return fine(x, rows)
        img = img.astype(np.float64)
        state["used"] += 1
        state["phase"] = "f32"
        return img

    def certified(rn):
        phase = state["phase"]
        if phase == "cert":
            # Lemma 9: the image may stop its problem where rho r + e <= dual_tol (1 - rho) with e = 4 rho l its
            # rounding in the oscillation, i.e. r <= stop - 4 l (stop = dual_tol (1 - rho) / rho)
            return rn <= stop - state["slack"]
        if phase == "f32":
            if not np.any(rn > _F32_SWITCH):
                state["fine"] = True  # every float32 image is close enough: float64 from now on
            return False
        if phase == "inc":
            if not (rn > state["level"]).all():
                state["inc"] = False  # a problem is close to its solution: float64 from the next sweep on
            return False
        if phase == "ref":
            top = np.max(rn, initial=0.0)
            state["level"] = max(_INC_SWITCH * threshold, _INC_FLOOR * top / (1.0 - Ginc.rho))
            if not (top > state["level"] and np.isfinite(rn).all()):
                state["inc"] = False  # no room for refinement sweeps
        return None

    G.certified = certified
    return G


# Refinement sweeps (Lemma 7, proofs/operator_fast_paths.md): after the float32 warm-up, the first float64
# sweep of a block keeps its products, and the next sweeps add to them increments computed with float32
# products, whose rounding is about eps32 times the increment (not times the products): measured 2e-11 at a
# distance 1e-4 from the reference (n = 1024). They go on while every residual is above _INC_SWITCH times the
# threshold and _INC_FLOOR times the reference's distance to the fixed point (bounded by its residual over
# 1 - rho, Theorem 1; below that the increments' rounding, about 2e-7 times the distance, shows in the mixing:
# measured at n = 1024, rho = 0.5, a floor of 1e-5 times the distance gave a float64 residual 1.4e-10 after a
# refinement residual 1.2e-9, against 5e-11 in float64 alone).
_INC_SWITCH = 10.0
_INC_FLOOR = 1e-4
# certified increments (Lemma 9, proofs/operator_fast_paths.md): at most this many after the second reference
_CERT_SWEEPS = 2
# ... and only where the stopping level is at least this many times a float64 sweep's rounding floor (below it they
# could never stop a problem: the float64 sweeps certify at the floor)
_CERT_ROOM = 1.0
_U32 = 2.0**-24  # unit roundoff of float32
_ETA32 = 2.0**-149  # spacing of float32's subnormals (the absolute error of an underflow is at most half of it)


def _rows_in(ref_rows, rows):
    """The positions of ``rows`` among a reference's rows (``None`` where they are the same rows in the same order)."""
    if rows.size == ref_rows.size and np.array_equal(rows, ref_rows):
        return None
    pos = np.empty(int(ref_rows.max()) + 1, dtype=np.int64)
    pos[ref_rows] = np.arange(ref_rows.size)
    return pos[rows]


def _increment_rounding(d, width, low_r, low_c):
    """Lemma 9: a bound ``l`` on ``|log(C~ / C)|`` for every column sum of a certified increment sweep.

    ``d``: per problem, ``max_j |x_j - x0_j|`` (the distance to the second reference), ``width`` the products'
    inner dimension (at most), ``low_r``, ``low_c``: per problem, the smallest row and column sums of the reference
    (positive). Returns ``inf`` where the bound does not hold (``l`` is then not below one)."""
    gam = width * _U32 / (1.0 - width * _U32)
    # a float32 product of inputs rounded to float32 (and the float64 rounding of the increment fed to it)
    c = (1.0 + _U32) ** 2 * gam + 2.0 * _U32 + _U32**2 + _EPS
    under = width * _ETA32 * (1.0 + gam)  # underflow: absolute, per sum (K32 <= 1)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        grow = np.expm1(d)
        e_d = 1.0 + grow
        a = grow + 3.0 * _EPS * e_d  # |V~ - V0| <= a V0 (the exponentials rounded)
        dr = e_d * (c * a + under / low_r)  # |R~ - R| <= dr R, as R >= e^-d R0
        th = (dr + _EPS) / (1.0 - dr)  # Q~ = fl(1/R~) = Q (1 + t), |t| <= th (the reciprocal rounded)
        phi = e_d * (1.0 + th) - 1.0  # |Q~ - Q0| <= phi Q0, as Q lies within e^(+-d) of Q0
        dc = th + e_d * (c * (phi + 2.0 * _EPS) + under / low_c)  # |C~ - C| <= dc C, as C >= e^-d C0
        out = -np.log1p(-dc)  # |log(C~ / C)| <= -log(1 - dc)
    return np.where((dr < 0.5) & (dc < 0.5), out, np.inf)


def _increment_map(K32, KT32, mask, P, rho):
    """Images of the dual update as a float64 reference plus float32-product increments (Lemma 7).

    With the scalings ``V0 = exp(x0)`` (masked) of a float64 sweep at a reference point ``x0``, its
    row sums ``R0 = V0 K^T``, reciprocals ``Q0`` (masked) and column sums ``C0 = Q0 K``, the sums at
    ``x`` are exactly ``R = R0 + (V - V0) K^T`` and ``C = C0 + (Q - Q0) K``; the increments
    ``V - V0`` (formed in float64) and ``Q - Q0`` are multiplied in float32 and added in float64, and
    the image is then formed from ``C`` as ``_kernel_map`` forms it. ``keep``: the reference's
    products (``_kernel_map``), ``sel``: the rows of the reference to use (``None``: all).
    """
    base = _common_columns(P, mask.shape[1])  # the masks are read from this column on (_tail_masks)
    maskf = mask[:, base:].astype(np.float64)
    offf = 1.0 - maskf

    def G(x, rows, keep, sel):
        last = P if rows.size == P.size else P[rows]
        V0, R0, Q0, C0 = (keep[k] if sel is None else keep[k][sel] for k in ("V", "R", "Q", "C"))
        c0 = _common_columns(last, x.shape[1])
        if c0 < x.shape[1]:
            mf, of = _tail_masks(maskf, offf, rows, P.size, c0 - base)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            # V - V0: its float64 rounding, eps times V, is below the float32 rounding of the increment
            # while |x - x0| > 1e-8 (Lemma 7)
            E = np.exp(x)
            if c0 < x.shape[1]:
                E[:, c0:] *= mf
            E -= V0
            R = _times_kt(E.astype(np.float32), KT32).astype(np.float64)
            R += R0
            if c0:
                np.divide(1.0, R[:, :c0], out=R[:, :c0])
            if c0 < x.shape[1]:
                tail = R[:, c0:]
                tail += of
                np.divide(mf, tail, out=tail)
            R -= Q0
            C = _times_k(R.astype(np.float32), K32).astype(np.float64)
            C += C0  # C0 has 1 added beyond each prefix, where the increment is zero
            g = np.log(C, out=C)
            g *= -rho
            g -= g[np.arange(last.size), last][:, None]
            if c0 < x.shape[1]:
                g[:, c0:] *= mf
            return g

    G.rho = rho
    return G


def _common_columns(last, width):
    """Columns ``[0, c0)`` lie in every prefix of the batch (``last``: each problem's last column);
    ``c0 = 0`` where that is less than half the width (then every column is masked)."""
    c0 = int(last.min()) + 1
    return 0 if 2 * c0 < width else c0


def _tail_masks(maskf, offf, rows, size, c0):
    """The mask and its complement on the columns ``[c0, ...)`` of the stored masks (which start at the batch's
    common columns) for the problems ``rows`` (views where all ``size`` problems of the batch are asked)."""
    if rows.size == size:
        return maskf[:, c0:], offf[:, c0:]
    return maskf[rows, c0:], offf[rows, c0:]


def _kernel_map(K, KT, mask, P, rho):
    """The normalised dual update of the prefixes ``P`` in the kernel domain.

    The columns below the shortest prefix of the batch belong to every prefix and are
    updated without masks; only the columns beyond it (at most the block's size) are masked.
    """
    # the masks from the common columns of the whole batch on: a batch of fewer problems has at least as many
    # (its shortest prefix is not shorter), so every column _tail_masks reads is kept
    base = _common_columns(P, mask.shape[1])
    maskf = mask[:, base:].astype(K.dtype)  # float64, or float32 for the warm-up sweeps (_warm_map)
    # adding offf before a division or logarithm keeps the entries outside each prefix
    # finite; multiplying by maskf zeroes them (inside, both are exact no-ops)
    offf = 1.0 - maskf

    def G(x, rows, keep=None):
        last = P if rows.size == P.size else P[rows]
        c0 = _common_columns(last, x.shape[1])  # columns [0, c0) lie in every prefix of the batch
        if c0 < x.shape[1]:
            mf, of = _tail_masks(maskf, offf, rows, P.size, c0 - base)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            V = np.exp(x, dtype=K.dtype)
            if c0 < x.shape[1]:
                V[:, c0:] *= mf
            R = _times_kt(V, KT)
            if keep is not None:  # the reference of the refinement sweeps (_increment_map)
                keep["V"], keep["R"] = V, R.copy()
            if c0:
                np.divide(1.0, R[:, :c0], out=R[:, :c0])
            if c0 < x.shape[1]:
                tail = R[:, c0:]
                tail += of
                np.divide(mf, tail, out=tail)
            C = _times_k(R, K)
            if c0 < x.shape[1]:
                C[:, c0:] += of
            if keep is not None:
                keep["Q"], keep["C"] = R, C
            g = np.log(C, out=None if keep is not None else C)
            g *= -rho
            g -= g[np.arange(last.size), last][:, None]
            if c0 < x.shape[1]:
                g[:, c0:] *= mf
            return g

    return G


def _solve(G, x0, rho, dual_tol, max_iter, accelerate, width, bound=None, workspace=None, first_image=None,
           certified=None, threshold=None):
    """``anderson_solve`` with the operator's settings; ``threshold``: the stopping level (default
    ``_threshold(dual_tol, rho)``)."""
    return anderson_solve(
        G,
        x0,
        _threshold(dual_tol, rho) if threshold is None else threshold,
        max_iter=max_iter,
        accelerate=accelerate,
        memory=anderson_memory(rho),
        seminorm="osc",
        floor=lambda amax: _floor(width) * (1.0 + amax),
        bound=bound,
        workspace=workspace,
        images_last=_IMAGES_LAST,
        history32=_HISTORY32,
        first_image=first_image,
        backtrack=rho > _BACKTRACK_RHO,
        rate=rho,
        certified=certified,
    )


def _lse_rows(a):
    """Row-wise log-sum-exp of a 2-d array (entries ``-inf`` allowed)."""
    m = np.max(a, axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(under="ignore", divide="ignore"):
        return np.log(np.sum(np.exp(a - m), axis=1)) + m[:, 0]


_SAFE = 1e-280
# a prefix of a log-domain block whose duals are this many times smaller than the block's largest
# is solved alone (the shared stabiliser would cost it eps times the largest, see _log_block)
_ALONE_RATIO = 1024.0
# sparse log-sum-exp of the entries whose scaled product underflows: the terms within
# _MARGIN of the largest are kept (at most _KMAX of them), and reused while the duals of
# the prefix move by at most _DRIFT in oscillation from where they were found
_KMAX = 16
_MARGIN = 100.0
_DRIFT = 20.0
# a log-domain block's scaled kernel is formed again when its stabiliser would move by more
# than this (in any column in use); in between, the kernel of the last one serves (exact for any)
_REFORM = 20.0


class _Supports:
    """Exact log-sum-exps ``LSE_j (A_ej + X_{p_e j})`` of gathered rows, on sparse supports.

    The first evaluation of an entry ``e`` is dense (every ``j``); the indices of the terms
    within ``_MARGIN`` of the largest are kept (when there are at most ``_KMAX``), and
    later evaluations sum over them only, while the duals ``X_p`` of the entry's prefix
    have moved by at most ``_DRIFT`` in oscillation since the reference point of that
    prefix (then its supports are dropped and found again). Error: a term left out was
    below the largest by ``_MARGIN`` when found; since then the duals have moved by at
    most ``2 _DRIFT`` in oscillation relative to that point (the reference and the
    point where the entry was found are both within ``_DRIFT`` of it), so it stays below the
    new largest by ``_MARGIN - 2 _DRIFT = 60``: all of them add at most ``w e^{-60}``
    (below ``1e-23`` for ``w <= 1e3``) relative to the sum, far under rounding.

    The kept supports are summed in a ragged layout (one flat array of terms, segments
    reduced by ``np.maximum.reduceat`` and ``np.add.reduceat``): at large score spreads an
    entry keeps about two terms on average, so the work per sweep is a few gathers of that
    many terms. The layout is rebuilt only when the set of entries evaluated sparsely changes.
    """

    def __init__(self, problems, width):
        self.width = width
        self.index = np.full((problems * width, _KMAX), -1, dtype=np.int64)
        self.known = np.zeros(problems * width, dtype=bool)
        self.count = np.zeros(problems * width, dtype=np.int64)
        self.ref = np.zeros((problems, width))
        self.has_ref = np.zeros(problems, dtype=bool)
        self._flat = None  # (entries, flat index into A, entry of each term, column of each term, segment starts)

    def _layout(self, eu, iu, acols):
        """The ragged layout of the supports of the entries ``eu`` (rows ``iu`` of ``A``)."""
        flat = self._flat
        if flat is not None and flat[0].size == eu.size and flat[5] == acols and np.array_equal(flat[0], eu):
            return flat
        cnt = self.count[eu]
        starts = np.zeros(eu.size, dtype=np.int64)
        np.cumsum(cnt[:-1], out=starts[1:])
        rep = np.repeat(np.arange(eu.size), cnt)  # kept indices come first in each row
        cols = self.index[eu[rep], np.arange(rep.size) - starts[rep]]
        self._flat = (eu, iu[rep] * acols + cols, rep, cols, starts, acols)
        return self._flat

    def lse(self, A, ii, Xm, pp, rows):
        w = self.width
        gp = rows[pp]
        # drift of each prefix involved since its reference point (pp is sorted: nonzero of a
        # (problem, entry) mask in C order)
        first = np.ones(pp.size, dtype=bool)
        first[1:] = pp[1:] != pp[:-1]
        involved = pp[first]
        gi = rows[involved]
        with np.errstate(invalid="ignore"):
            Xi = Xm[involved]
            fin = np.isfinite(Xi)  # the columns of each prefix (-inf beyond)
            diff = Xi - self.ref[gi]
            osc = np.max(np.where(fin, diff, -np.inf), axis=1) - np.min(np.where(fin, diff, np.inf), axis=1)
        moved = ~self.has_ref[gi] | ~(osc <= _DRIFT)
        if moved.any():
            for g in gi[moved]:
                self.known[g * w : (g + 1) * w] = False
            self.ref[gi[moved]] = np.where(fin[moved], Xi[moved], 0.0)
            self.has_ref[gi[moved]] = True
        e = gp * w + ii
        out = np.empty(e.size)
        use = self.known[e]
        all_use = bool(use.all())
        if all_use or use.any():
            eu = e if all_use else e[use]
            iu = ii if all_use else ii[use]
            pu = pp if all_use else pp[use]
            _, ia, rep, cols, starts, _ = self._layout(eu, iu, A.shape[1])
            vals = A.ravel()[ia]
            vals += Xm.ravel()[pu[rep] * Xm.shape[1] + cols]
            top = np.maximum.reduceat(vals, starts)
            vals -= top[rep]
            np.exp(vals, out=vals)
            total = np.add.reduceat(vals, starts)
            res = np.log(total, out=total)
            res += top
            if all_use:
                return res
            out[use] = res
        new = ~use
        T = A[ii[new]] + Xm[pp[new]]
        top = np.max(T, axis=1)  # finite: every entry has a finite term (its diagonal)
        with np.errstate(invalid="ignore"):
            keep = T >= (top - _MARGIN)[:, None]
        count = keep.sum(axis=1)
        fits = count <= _KMAX
        res_new = np.empty(T.shape[0])
        if not fits.all():
            res_new[~fits] = _lse_rows(T[~fits])
        if fits.any():
            # the terms within _MARGIN of the largest are the support (a term left out is below
            # max - _MARGIN <= LSE - _MARGIN); the others add at most w e^-_MARGIN relative
            fi = np.flatnonzero(fits)
            rr, cc = np.nonzero(keep[fi])
            starts = np.zeros(fi.size, dtype=np.int64)
            np.cumsum(count[fi][:-1], out=starts[1:])
            vals = T[fi[rr], cc]
            vals -= top[fi][rr]
            np.exp(vals, out=vals)
            total = np.add.reduceat(vals, starts)
            res_new[fi] = np.log(total) + top[fi]
            en = e[new][fi]
            slot = np.arange(rr.size) - starts[rr]
            self._flat = None  # supports change: the layout is rebuilt
            self.index[en] = -1
            self.index[en[rr], slot] = cc
            self.count[en] = count[fi]
            self.known[en] = True
        out[new] = res_new
        return out


def _log_block(sm, P, rho, dual_tol, max_iter, accelerate, full, workspace=None):
    """Solve the prefixes ``P`` together in the log domain (nothing can overflow).

    Each log-sum-exp is evaluated as a matrix product of scaled exponentials, with the
    current duals absorbed into the kernel (the stabilisation of log-domain Sinkhorn):
    for any vector ``h``,

    .. math::

        \\sum_j e^{S_{ij} + X_{pj}} = e^{c_i + a_p} \\sum_j e^{S_{ij} + h_j - c_i}\\,
        e^{X_{pj} - h_j - a_p},

    with ``c_i = max_j (S_ij + h_j)`` and ``a_p = max_j (X_pj - h_j)``, so every factor is
    at most one and nothing overflows. The identity holds for every ``h``; ``h`` only decides
    which products underflow. For the sums over columns ``h_j = max_p (X_pj - o_p)``, the
    largest dual of column ``j`` over the block's prefixes after each prefix is shifted by
    its mean dual ``o_p`` (the duals of the prefixes of a block differ by large per-prefix
    constants; aligned, 30% instead of 84% of the row sums underflow for scores N(0, 1) x 500
    at ``rho = 0.9``); for the sums over rows ``h_i = max_p F_pi``. The scaled kernel
    (``w^2`` exponentials) is formed again only when the ``h`` wanted has moved by more than
    ``_REFORM`` in a column in use; in between, the last one serves. A product that stays
    above ``1e-280`` has lost only terms below ``w * 1e-308`` (relative error below
    ``1e-25``), whatever ``h``; the entries that fall below it are evaluated exactly on
    sparse supports (``_Supports``). The sweep is the kernel path's, so the number of
    sweeps is the same.
    """
    w = int(P[-1]) + 1
    S = sm[:w, :w]
    ST = np.ascontiguousarray(S.T)
    mask = np.arange(w)[None, :] <= P[:, None]

    # the scaled kernel of each side and the stabiliser it was formed with: any h gives the
    # same sums, so a kernel is reused while the stabiliser wanted moves by at most _REFORM
    kernels = {}

    def absorbed(X, m, axis):
        # returns (log of the scaled products, their values) for LSE over `axis` of S
        Xm = np.where(m, X, -np.inf)
        if axis == 1:
            # align the prefixes before taking the column-wise largest dual (any h is exact):
            # the duals of the prefixes of a block differ by large per-prefix constants
            o = np.sum(np.where(m, X, 0.0), axis=1) / np.maximum(m.sum(axis=1), 1)
            h = np.max(Xm - o[:, None], axis=0)
        else:
            h = np.max(Xm, axis=0)
        used = np.isfinite(h)
        h = np.where(used, h, 0.0)
        with np.errstate(under="ignore", divide="ignore", invalid="ignore"):
            old = kernels.get(axis)
            if old is not None and np.max(np.abs(h - old[0]), where=used, initial=0.0) <= _REFORM:
                h, c, Kt = old
            # the kernels are triangular: the products skip their zero tiles (_times_kt, _times_k)
            elif axis == 1:  # LSE_j (S_ij + X_pj): h on the columns of S; Kt[j, i] = 0 for j > i
                T = ST + h[:, None]
                c = np.max(T, axis=0)
                T -= c[None, :]
                Kt = np.exp(T, out=T)
                kernels[axis] = (h, c, Kt)
            else:  # LSE_i (S_ij + F_pi): h on the rows of S; Kt[i, j] = 0 for i < j
                T = S + h[:, None]
                c = np.max(T, axis=0)
                c = np.where(np.isfinite(c), c, 0.0)
                T -= c[None, :]
                Kt = np.exp(T, out=T)
                kernels[axis] = (h, c, Kt)
            Z = Xm - h[None, :]
            a = np.max(Z, axis=1)
            Z -= a[:, None]
            E = np.exp(Z, out=Z)
            R = _times_kt(E, Kt) if axis == 1 else _times_k(E, Kt)
            out = np.log(R) + a[:, None] + c[None, :]
        return out, R, Xm

    row_support = _Supports(P.size, w)
    col_support = _Supports(P.size, w)

    def row_lse(X, rows):
        # LSE_j (S_ij + X_pj) for all (p, i)
        m = mask[rows]
        out, R, Xm = absorbed(X, m, 1)
        bad = (R < _SAFE) & m
        if bad.any():
            pp, ii = np.nonzero(bad)
            out[pp, ii] = row_support.lse(S, ii, Xm, pp, rows)
        return out

    def col_lse(F, rows):
        # LSE_{j <= i <= p} (S_ij + F_pi) for all (p, j)
        m = mask[rows]
        out, C, Fm = absorbed(F, m, 0)
        bad = (C < _SAFE) & m
        if bad.any():
            pp, jj = np.nonzero(bad)
            out[pp, jj] = col_support.lse(ST, jj, Fm, pp, rows)
        return out

    def G(x, rows):
        m = mask[rows]
        with np.errstate(invalid="ignore"):
            f = np.where(m, -row_lse(x, rows), -np.inf)
            g = np.where(m, -rho * col_lse(f, rows), 0.0)
            return np.where(m, g - g[np.arange(rows.size), P[rows]][:, None], 0.0)

    check_allocation(8 * P.size * w, "scores", f"array of shape ({w}, {w})")
    x, _ = _solve(G, np.zeros((P.size, w)), rho, dual_tol, max_iter, accelerate, w, workspace=workspace)
    if P.size > 1:
        # The shared stabiliser h cancels exactly, but each term is formed with absolute rounding
        # eps |h|: a prefix whose own duals are far smaller than the block's largest (one huge score
        # in a later row drives that prefix's duals to ~1e10) would inherit eps |h| instead of
        # eps |x_p|, where that exceeds the tolerance. Such prefixes are solved again alone, where h
        # is their own; the rest (never empty: it holds the largest) again as a block.
        scale = np.maximum(1.0, np.max(np.where(mask, np.abs(x), 0.0), axis=1))
        top = scale.max()
        alone = (scale * _ALONE_RATIO < top) & (_EPS * top > dual_tol)
        if alone.any():
            out = np.zeros((P.size, w))
            for idx in [np.nonzero(~alone)[0]] + [[k] for k in np.nonzero(alone)[0]]:
                r = _log_block(sm, P[idx], rho, dual_tol, max_iter, accelerate, full, workspace)
                out[idx, : r.shape[1]] = r
            return out
    if full:
        xr = x[0]
        f = -_lse_rows(S + xr[None, :])
        with np.errstate(under="ignore"):
            A = np.where(np.isfinite(S), np.exp(f[:, None] + S + xr[None, :]), 0.0)
        return _normalise_rows(A)
    logits = S[P] + np.where(mask, x, -np.inf)
    top = np.max(logits, axis=1, keepdims=True)
    with np.errstate(under="ignore"):
        rows = np.where(mask, np.exp(logits - top), 0.0)
    return _normalise_rows(rows)
