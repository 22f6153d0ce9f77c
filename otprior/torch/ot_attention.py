"""The prefix-consistent causal OT attention operator in torch, trainable.

Definition 1 (``proofs/operator.md``): for query ``t`` solve, on the ``t x t`` prefix,

.. math::

    f_i = -\\operatorname{LSE}_{j\\le i}(s_{ij} + g_j),\\qquad
    g_j = -\\rho\\,\\operatorname{LSE}_{j\\le i\\le t}(s_{ij} + f_i),

and keep row ``t``: :math:`A_{tj} = \\exp(f_t + s_{tj} + g_j)`. This module computes the
same operator as :func:`otprior.causal_ot_attention` with three properties a training
loop needs:

* **Converged.** Every prefix is iterated until the sup-norm residual of its column
  duals is at most ``tol (1 - rho)``, which certifies ``|g - g*| <= rho tol`` because the
  dual update is a ``rho``-contraction (Theorem 1, ``proofs/contraction.md``).
* **O(T^2) memory.** Prefixes are solved in blocks of ``chunk`` (about 128): a block of
  prefixes ``P`` of largest width ``w`` keeps ``(|P|, w)`` arrays and the shared kernel
  ``K_ij = exp(s_ij - max_k s_ik)`` (the row shift cancels in ``f``); no ``T^3`` tensor is
  formed. One sweep of a block is two matrix products, ``R = V K^T`` (row sums of the
  prefix problems) and ``C = (1/R) K`` (column sums), with ``V = exp(g)`` masked to the
  prefix.
* **Implicit gradients.** Only the fixed point ``g*`` (one ``T x T`` lower triangle) is
  saved; the backward pass solves an adjoint equation instead of differentiating through
  stored sweeps (derivation below).

Derivation of the gradient. On one prefix write ``V = exp(g)`` (masked), ``R = V K^T``
(row sums, ``R_i = sum_{j<=i} K_ij V_j``), ``U = 1/R``, ``C = U K`` (column sums over
``j <= i <= t``), so that the dual update of Theorem 1 (``proofs/contraction.md``) is
``G(g, s) = -rho log C`` and the returned row is ``A_tj = K_tj V_j / R_t``. For a loss with
``dL/dA = Abar``:

1. *Direct part.* ``A_t.`` is the softmax of ``s_tj + g_j`` over ``j <= t``, so
   ``ds_tj += b_j`` and ``dg_j += b_j`` with ``b_j = A_tj (Abar_tj - sum_k Abar_tk A_tk)``.
2. *Through the fixed point.* Differentiating ``g* = G(g*, s)`` gives
   ``dg*/ds = (I - J)^{-1} dG/ds`` with ``J = dG/dg`` at ``g*``. Since ``G`` is a
   ``rho``-contraction in the sup norm (Theorem 1), ``||J||_inf <= rho``, hence
   ``||J^T||_1 <= rho``: the adjoint ``lambda = J^T lambda + b`` has a unique solution,
   reached by the iteration ``lambda <- J^T lambda + b`` at rate ``rho`` in the l1 norm,
   stopped when ``||lambda' - lambda||_1 <= tol (1 - rho) max_prefix ||b||_1`` (a relative
   accuracy ``tol``, by the certificate of Theorem 1, part 3, in the l1 norm). Then ``ds += (dG/ds)^T lambda``.
3. *The products.* ``J^T y`` by the chain rule through ``C``, ``U``, ``R``, ``V``:
   ``Cbar = -rho y / C``, ``Ubar = Cbar K^T``, ``Rbar = -Ubar U^2``, ``Vbar = Rbar K``,
   ``J^T y = Vbar * V`` (two matrix products, as a forward sweep). ``(dG/ds)^T y``:
   ``K`` enters ``R`` and ``C``, so ``Kbar = Rbar^T V + U^T Cbar`` (summed over the
   prefixes of a block) and ``ds_ij += Kbar_ij K_ij``. The row shift of ``K`` cancels in
   ``U K`` and in ``A``, so it carries no gradient.

The fixed point runs in float32 for float32 and bfloat16 inputs (float64 when the score
spread of a matrix exceeds ``60``, where ``exp`` of the shifted scores would leave the
float32 range) and in float64 for float64 inputs; the output has the input's dtype.
"""

from __future__ import annotations

import math

import torch

__all__ = ["causal_ot_attention", "default_tol"]

# exp(-60) = 8.8e-27 keeps the float32 kernel and its dual scalings far from under/overflow
_FLOAT32_SPREAD = 60.0
# beyond this spread even the float64 kernel leaves its range (exp(-600) ~ 1e-261)
_FLOAT64_SPREAD = 600.0
_CHUNK = 128
# elements of one (batch, prefixes, width) working array
_CHUNK_ELEMENTS = 1 << 22


def default_tol(dtype) -> float:
    """Default dual tolerance: ``1e-5`` for a float32 fixed point, ``1e-12`` for float64."""
    return 1e-12 if dtype == torch.float64 else 1e-5


def _floor(dtype):
    # the stopping rule stays above rounding noise of the duals (a few hundred ulps)
    return 256 * torch.finfo(dtype).eps


def _max_iter(rho, thr):
    # a rho-contraction started within O(1) of g* reaches thr in log(thr)/log(rho) sweeps;
    # four times that (and at least 200) before declaring non-convergence
    if rho == 0.0:
        return 2
    return max(200, 4 * math.ceil(math.log(thr) / math.log(rho)))


def _blocks(T, N, chunk):
    c = max(1, min(chunk, _CHUNK_ELEMENTS // max(1, N * T)))
    return [(p0, min(T, p0 + c)) for p0 in range(0, T, c)]


def _kernel(s):
    T = s.shape[-1]
    tri = torch.ones(T, T, dtype=torch.bool, device=s.device).tril()
    sm = s.masked_fill(~tri, float("-inf"))
    return torch.exp(sm - sm.amax(-1, keepdim=True))  # exactly zero above the diagonal


def _sweep(x, K, KT, maskf, offf, rho):
    """One dual update of a block of prefixes: returns ``(G(x), V, R, U, C)``.

    ``maskf`` is 1 on the prefix (row ``p``: columns ``<= p``) and 0 elsewhere, ``offf`` its
    complement; adding ``offf`` before a division or a logarithm keeps the entries outside
    the prefix finite, and multiplying by ``maskf`` zeroes them.
    """
    V = torch.exp(x) * maskf
    R = torch.bmm(V, KT)
    U = maskf / (R + offf)
    C = torch.bmm(U, K)
    return torch.log(C + offf).mul_(-rho).mul_(maskf), V, R, U, C


def _solve(s, rho, tol, chunk):
    """Forward solve on ``s`` of shape (N, T, T): returns ``(A, G*, K, iterations)``."""
    from .._validation import ConvergenceError

    N, T, _ = s.shape
    K = _kernel(s)
    dtype = s.dtype
    thr = max(tol * (1.0 - rho), float(_floor(dtype)))
    max_iter = _max_iter(rho, thr)
    A = torch.zeros_like(s)
    gstar = torch.zeros_like(s)
    ar = torch.arange(T, device=s.device)
    warm = None
    sweeps = 0
    for p0, p1 in _blocks(T, N, chunk):
        w = p1
        P = ar[p0:p1]
        Kc = K[:, :w, :w]
        KcT = Kc.transpose(1, 2)
        mask = ar[:w][None, :] <= P[:, None]
        maskf = mask.to(dtype)
        offf = 1.0 - maskf
        x = torch.zeros(N, p1 - p0, w, dtype=dtype, device=s.device)
        if warm is not None:
            # warm start: the last solved prefix, its last dual repeated on the new columns
            k = warm.shape[-1]
            x[:, :, :k] = warm[:, None, :]
            x[:, :, k:] = warm[:, None, -1:]
            x = x * maskf
        for _it in range(max_iter):
            xn = _sweep(x, Kc, KcT, maskf, offf, rho)[0]
            res = float((xn - x).abs().amax())
            scale = max(1.0, float(xn.abs().amax()))
            x = xn
            sweeps += 1
            if not math.isfinite(res):
                raise ConvergenceError(f"non-finite duals at prefixes {p0}..{p1 - 1}")
            if res <= thr * scale:
                break
        else:
            raise ConvergenceError(
                f"prefixes {p0}..{p1 - 1} did not reach residual {thr:.2e} in {max_iter} sweeps (last {res:.2e})"
            )
        V = torch.exp(x) * maskf
        R = V @ KcT
        r = R[:, torch.arange(p1 - p0, device=s.device), P]  # R[p, p]: row p of its own prefix
        A[:, p0:p1, :w] = Kc[:, P, :] * V / r[..., None]
        gstar[:, p0:p1, :w] = x
        warm = x[:, -1, :]
    return A, gstar, K, sweeps


def _backward(grad, A, gstar, K, rho, tol, chunk):
    """The implicit gradient ``ds`` for ``grad = dL/dA`` (all (N, T, T))."""
    from .._validation import ConvergenceError

    N, T, _ = A.shape
    dtype = A.dtype
    thr = max(tol * (1.0 - rho), float(_floor(dtype)))
    max_iter = _max_iter(rho, thr)
    ds = torch.zeros_like(A)
    ar = torch.arange(T, device=A.device)
    for p0, p1 in _blocks(T, N, chunk):
        w = p1
        P = ar[p0:p1]
        Kc = K[:, :w, :w]
        KcT = Kc.transpose(1, 2)
        maskf = (ar[:w][None, :] <= P[:, None]).to(dtype)
        offf = 1.0 - maskf
        x = gstar[:, p0:p1, :w]
        _, V, R, U, C = _sweep(x, Kc, KcT, maskf, offf, rho)
        a = A[:, p0:p1, :w]
        ga = grad[:, p0:p1, :w] * maskf
        # direct part: A_pj = K_pj V_pj / R_pp is a softmax of s_pj + g_j over j <= p
        direct = a * (ga - (ga * a).sum(-1, keepdim=True))
        ds[:, p0:p1, :w] += direct
        if rho == 0.0:
            continue
        Cinv = maskf / (C + offf)
        U2 = U * U

        def adjoint(lam, Cinv=Cinv, KcT=KcT, U2=U2):
            Cb = -rho * lam * Cinv
            Ub = torch.bmm(Cb, KcT)
            Rb = -Ub * U2
            return Cb, Rb

        lam = direct
        # l1 norm per prefix: J^T is an l1 rho-contraction (module docstring, step 2)
        bscale = max(float(direct.abs().sum(-1).amax()), torch.finfo(dtype).tiny)
        for _it in range(max_iter):
            Cb, Rb = adjoint(lam)
            new = direct + torch.bmm(Rb, Kc) * V
            res = float((new - lam).abs().sum(-1).amax())
            lam = new
            if not math.isfinite(res):
                raise ConvergenceError(f"non-finite adjoint at prefixes {p0}..{p1 - 1}")
            if res <= thr * bscale:
                break
        else:
            raise ConvergenceError(f"adjoint of prefixes {p0}..{p1 - 1} did not converge in {max_iter} sweeps")
        Cb, Rb = adjoint(lam)
        # dG/dK contracted with lambda: K enters R = V K^T and C = U K
        Kbar = Rb.transpose(1, 2) @ V + U.transpose(1, 2) @ Cb
        ds[:, :w, :w] += Kbar * Kc
    return ds


class _CausalOT(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=None)
    def forward(ctx, scores, rho, tol, chunk):
        shape = scores.shape
        T = shape[-1]
        s = scores.detach().reshape(-1, T, T)
        work = torch.float64 if s.dtype == torch.float64 else torch.float32
        if work == torch.float32 and T > 0:
            tri = torch.ones(T, T, dtype=torch.bool, device=s.device).tril()
            lo = s.masked_fill(~tri, float("inf")).amin(dim=(-1, -2))
            hi = s.masked_fill(~tri, float("-inf")).amax(dim=(-1, -2))
            if float((hi - lo).max()) > _FLOAT32_SPREAD:
                work = torch.float64
        s = s.to(work)
        with torch.autocast(device_type=s.device.type, enabled=False):  # the fixed point never runs in bf16
            A, gstar, K, sweeps = _solve(s, rho, tol, chunk)
        ctx.save_for_backward(A, gstar, K)
        ctx.rho, ctx.tol, ctx.chunk, ctx.shape, ctx.in_dtype = rho, tol, chunk, shape, scores.dtype
        ctx.sweeps = sweeps
        return A.to(scores.dtype).reshape(shape)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        A, gstar, K = ctx.saved_tensors
        T = ctx.shape[-1]
        g = grad.reshape(-1, T, T).to(A.dtype)
        with torch.autocast(device_type=A.device.type, enabled=False):
            ds = _backward(g, A, gstar, K, ctx.rho, ctx.tol, ctx.chunk)
        return ds.to(ctx.in_dtype).reshape(ctx.shape), None, None, None


def causal_ot_attention(scores, rho, *, tol=None, chunk=_CHUNK):
    """Prefix-consistent causal OT attention of ``scores``, differentiable.

    Parameters
    ----------
    scores : Tensor, shape (..., T, T)
        Scores (already scaled, bias included); only the lower triangle is read and it must
        be finite. float32, bfloat16 or float64.
    rho : float
        Balancing strength in [0, 1); ``rho = 0`` is causal softmax.
    tol : float, optional
        Sup-norm accuracy of the column duals of every prefix (and of the adjoint, relative
        to its size). Default :func:`default_tol` of the fixed point's dtype.
    chunk : int
        Prefixes solved together (working memory ``O(batch * chunk * T)`` plus the
        ``O(batch * T^2)`` kernel, duals and output).

    Returns
    -------
    Tensor, shape (..., T, T)
        Lower-triangular, row-stochastic attention in the dtype of ``scores``.

    Notes
    -----
    Work is ``Theta(k T^3 / 3)`` multiply-adds per matrix for ``k`` sweeps (every prefix is
    its own problem), against ``Theta(T^2)`` for softmax. The backward pass solves the
    adjoint of the fixed point (module docstring) with the same per-sweep cost.

    Raises
    ------
    DomainError
        ``rho`` outside [0, 1), ``tol`` not positive, non-finite scores, a score spread
        beyond 600 (the kernel would underflow in float64), or a non-square input.
    ConvergenceError
        A prefix (or its adjoint) did not converge.
    """
    from .._validation import DomainError, check_rho

    rho = check_rho(rho)
    if not isinstance(scores, torch.Tensor) or scores.ndim < 2 or scores.shape[-1] != scores.shape[-2]:
        raise DomainError("scores", getattr(scores, "shape", type(scores).__name__), "a tensor of shape (..., T, T)")
    if scores.dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        raise DomainError("scores", scores.dtype, "float32, bfloat16, float16 or float64")
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise DomainError("chunk", chunk, "a positive integer")
    work = torch.float64 if scores.dtype == torch.float64 else torch.float32
    if tol is None:
        tol = default_tol(work)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (tol > 0 and math.isfinite(tol)):
        raise DomainError("tol", tol, "a finite positive number")
    T = scores.shape[-1]
    if T == 0 or scores.numel() == 0:
        return scores.clone()
    tri = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    low = scores.detach()[..., tri]
    if not bool(torch.isfinite(low).all()):
        raise DomainError("scores", "non-finite entries", "finite scores on and below the diagonal")
    spread = float((low.amax(-1) - low.amin(-1)).max())
    if spread > _FLOAT64_SPREAD:
        raise DomainError("scores", f"spread {spread:.1f}", f"a spread of lower-triangle scores at most {_FLOAT64_SPREAD}")
    from ..limits import check_allocation

    # kernel, duals and output of the whole batch, plus the block working arrays
    check_allocation(4 * scores.numel() * 8, "scores", tuple(scores.shape))
    return _CausalOT.apply(scores, float(rho), float(tol), int(chunk))
