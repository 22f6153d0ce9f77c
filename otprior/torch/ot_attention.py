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
  dual update is a ``rho``-contraction (Theorem 1, ``proofs/contraction.md``). From
  ``rho = 0.6`` on (below it, for blocks wider than 512), the iteration and the adjoint's
  are accelerated by safeguarded Anderson mixing (the numpy operator's safeguard: a
  candidate is used only if finite and kept only if its residual stays within 10 times
  the best, else the plain step of the last accepted point is taken), so it converges
  wherever the plain iteration does. Convergence is
  read by the host once every 8 sweeps on accelerators (every sweep on the CPU, where it
  costs nothing), so a training step does not synchronise once per sweep.
* **O(T^2) memory.** Prefixes are solved in blocks of ``chunk`` (about 128): a block of
  prefixes ``P`` of largest width ``w`` keeps ``(|P|, w)`` arrays and the shared kernel
  ``K_ij = exp(s_ij - max_k s_ik)`` (the row shift cancels in ``f``); no ``T^3`` tensor is
  formed. One sweep of a block is two matrix products, ``R = V K^T`` (row sums of the
  prefix problems) and ``C = (1/R) K`` (column sums), with ``V = exp(g)`` masked to the
  prefix; the products skip the zero tiles of the triangular ``K`` (about half the work).
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
# sweeps between two reads of the convergence flag by the host (accelerators)
_CHECK_EVERY = 8
# read convergence flags every sweep where that costs nothing (the CPU)
_HOST_CHECKS = True
# column tiles of the products with the lower-triangular kernel (zero tiles are skipped)
_TILE = 128


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


def _times_kt(V, K):
    """``V @ K^T`` for a lower-triangular ``K`` (``K_ij = 0`` for ``j > i``), zero tiles skipped.

    Column tile ``[i0, i1)`` of the product only involves ``j < i1``: about half the
    multiply-adds of the dense product for large widths.
    """
    w = K.shape[-1]
    if w <= _TILE:
        return torch.bmm(V, K.transpose(1, 2))
    out = V.new_empty(V.shape[:-1] + (w,))
    for i0 in range(0, w, _TILE):
        i1 = min(w, i0 + _TILE)
        out[..., i0:i1] = torch.bmm(V[..., :i1], K[:, i0:i1, :i1].transpose(1, 2))
    return out


def _times_k(U, K):
    """``U @ K`` for a lower-triangular ``K``: column tile ``[j0, j1)`` only involves ``i >= j0``."""
    w = K.shape[-1]
    if w <= _TILE:
        return torch.bmm(U, K)
    out = U.new_empty(U.shape[:-1] + (w,))
    for j0 in range(0, w, _TILE):
        j1 = min(w, j0 + _TILE)
        out[..., j0:j1] = torch.bmm(U[..., j0:], K[:, j0:, j0:j1])
    return out


def _sweep(x, K, KT, maskf, offf, rho):
    """One dual update of a block of prefixes: returns ``(G(x), V, R, U, C)``.

    ``maskf`` is 1 on the prefix (row ``p``: columns ``<= p``) and 0 elsewhere, ``offf`` its
    complement; adding ``offf`` before a division or a logarithm keeps the entries outside
    the prefix finite, and multiplying by ``maskf`` zeroes them.
    """
    V = torch.exp(x) * maskf
    R = _times_kt(V, K)
    U = maskf / (R + offf)
    C = _times_k(U, K)
    return torch.log(C + offf).mul_(-rho).mul_(maskf), V, R, U, C


def _memory(rho, width):
    """Anderson memory by ``rho`` and the block's width (0: the plain iteration).

    Measured on the CPU, forward and backward of one layer at T = 256 .. 1024: below
    ``rho = 0.6`` the warm-started plain iteration needs so few sweeps that mixing pays only
    where a sweep is expensive (width above 512: memory 3, 13% faster at T = 1024; 0
    below, where mixing's own work made T = 256 20% slower); memory 3 up to 0.9 and 6
    beyond (the history costs ``2 m`` working arrays of the block).
    """
    if rho < 0.6:
        return 3 if width > 512 else 0
    if rho < 0.9:
        return 3
    return 6


def _fixed_point(step, x, thr, *, max_iter, memory, norm, what):
    """Safeguarded Anderson iteration of ``step`` on a block, convergence checked on the device.

    ``x`` has shape ``(N, P, w)``: ``N * P`` independent problems. ``thr(best_img, best_res)``
    gives the per-problem threshold on the residual norm (``norm``: ``"sup"`` or ``"l1"``
    over the last axis). The safeguard is the numpy operator's (``otprior._anderson``):
    the Anderson candidate is used only if finite, and accepted only if its residual is at
    most 10 times the problem's best; a rejection (or ``2 m`` accepted points without a new
    best) clears the problem's memory, resumes with the plain step of the last accepted
    point and pauses mixing for ``2, 4, ..., 32`` plain steps. Every problem returns the image of its
    best point, whose residual is the certificate, so mixing can only help. All of this
    runs as tensor operations; the host reads one flag every ``_CHECK_EVERY`` sweeps
    (every sweep on the CPU, where reading it costs nothing).

    Returns ``(image of the best point, sweeps)``; raises ``ConvergenceError`` saying which
    condition failed.
    """
    from .._validation import ConvergenceError

    dtype, dev = x.dtype, x.device
    m = int(memory)
    lead = x.shape[:-1]
    # on the CPU, masks may be read at no cost: skip selections that change nothing
    host = dev.type == "cpu" and _HOST_CHECKS
    every = 1 if host else _CHECK_EVERY
    if m == 0:  # the plain iteration (a contraction: the last image is the best point)
        for k in range(1, max_iter + 1):
            img = step(x)
            res = img - x
            rn = res.abs().amax(-1) if norm == "sup" else res.abs().sum(-1)
            x = img
            if k % every == 0 or k == max_iter:
                if not bool(torch.isfinite(rn).all()):
                    raise ConvergenceError(f"{what}: non-finite values produced by a plain step (by sweep {k})")
                if bool((rn <= thr(img, rn)).all()):
                    return img, k
        raise ConvergenceError(
            f"{what} did not reach the tolerance after max_iter={max_iter} sweeps (residual reached "
            f"{float(rn.max()):.2e}, threshold {float(thr(img, rn).min()):.2e})"
        )

    def sel(mask, a, b):
        if host:
            if bool(mask.all()):
                return a
            if not bool(mask.any()):
                return b
        return torch.where(mask[..., None], a, b)

    inf = torch.tensor(float("inf"), dtype=dtype, device=dev)
    best_rn = torch.full(lead, float("inf"), dtype=dtype, device=dev)
    best_img = x
    prev_img = prev_res = torch.zeros_like(x)
    have_prev = torch.zeros(lead, dtype=torch.bool, device=dev)
    trial = torch.zeros(lead, dtype=torch.bool, device=dev)
    failed = torch.zeros(lead, dtype=torch.bool, device=dev)
    pause = torch.zeros(lead, dtype=torch.int64, device=dev)
    rejections = torch.zeros(lead, dtype=torch.int64, device=dev)
    stale = torch.zeros(lead, dtype=torch.int64, device=dev)
    d_res = torch.zeros(*lead, m, x.shape[-1], dtype=dtype, device=dev)
    d_img = torch.zeros_like(d_res)
    gram = torch.zeros(*lead, m, m, dtype=dtype, device=dev)
    eye = torch.eye(m, dtype=dtype, device=dev)
    ridge = 1e-10 if dtype == torch.float64 else 1e-5
    for k in range(1, max_iter + 1):
        img = step(x)
        res = img - x
        # amax and sum propagate nan and inf: rn is finite exactly when the image is
        rn = res.abs().amax(-1) if norm == "sup" else res.abs().sum(-1)
        rn = torch.where(torch.isfinite(rn), rn, inf)
        accept = ~trial | (rn <= 10.0 * best_rn)
        failed |= ~trial & torch.isinf(rn)  # a plain step that is not finite
        go = accept & torch.isfinite(rn)
        improved = go & (rn < best_rn)
        best_rn = torch.where(improved, rn, best_rn)
        best_img = sel(improved, img, best_img)
        stale = torch.where(improved, 0, torch.where(go, stale + 1, stale))
        # memory: every problem writes slot k % m; problems without a new pair write zeros
        slot = k % m
        upd = go & have_prev
        dr = sel(upd, res - prev_res, torch.zeros_like(res))
        d_res[..., slot, :] = dr
        d_img[..., slot, :] = sel(upd, img - prev_img, torch.zeros_like(img))
        col = (d_res * dr[..., None, :]).sum(-1)
        gram[..., slot, :] = col
        gram[..., :, slot] = col
        prev_img = sel(go, img, prev_img)
        prev_res = sel(go, res, prev_res)
        have_prev = have_prev | go
        reject = ~accept | (go & (stale > 2 * m))
        rejections = rejections + reject.long()
        pause = torch.where(reject, torch.clamp(2 ** torch.clamp(rejections, max=5), max=32), pause)
        stale = torch.where(reject, 0, stale)
        # a restart clears the Gram matrix: slots with a zero diagonal are unused until rewritten
        gram.mul_((~reject)[..., None, None])
        # the Anderson candidate in the m x m space (diagonally scaled, ridge on unused slots)
        diag = torch.diagonal(gram, dim1=-2, dim2=-1)
        valid = diag > 0
        inv = torch.where(valid, torch.rsqrt(torch.where(valid, diag, 1.0)), 0.0)
        A = gram * inv[..., :, None] * inv[..., None, :]
        A = A + torch.where(valid, ridge, 1.0)[..., None] * eye
        rhs = (d_res * res[..., None, :]).sum(-1) * inv
        gamma = torch.linalg.solve_ex(A, rhs[..., None])[0][..., 0] * inv
        cand = img - torch.bmm(gamma.reshape(-1, 1, m), d_img.reshape(-1, m, x.shape[-1])).reshape(x.shape)
        use = go & ~reject & (pause == 0) & valid.any(-1) & torch.isfinite(cand.sum(-1))
        pause = torch.where(go & ~use & (pause > 0), pause - 1, pause)
        x = sel(use, cand, sel(reject, prev_img, img))  # a rejection resumes the plain trajectory
        trial = use
        if k % every == 0 or k == max_iter:
            done = best_rn <= thr(best_img, best_rn)
            if bool(failed.any()):
                raise ConvergenceError(f"{what}: non-finite values produced by a plain step (by sweep {k})")
            if bool(done.all()):
                return best_img, k
    worst = float(best_rn.max())
    raise ConvergenceError(
        f"{what} did not reach the tolerance after max_iter={max_iter} sweeps (residual reached {worst:.2e}, "
        f"threshold {float(thr(best_img, best_rn).min()):.2e})"
    )


def _solve(s, rho, tol, chunk):
    """Forward solve on ``s`` of shape (N, T, T): returns ``(A, G*, K, iterations)``."""

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
        x, k = _fixed_point(
            lambda y, Kc=Kc, KcT=KcT, maskf=maskf, offf=offf: _sweep(y, Kc, KcT, maskf, offf, rho)[0],
            x,
            lambda img, rn: thr * img.abs().amax(-1).clamp(min=1.0),
            max_iter=max_iter,
            memory=_memory(rho, w),
            norm="sup",
            what=f"prefixes {p0}..{p1 - 1}",
        )
        sweeps += k
        V = torch.exp(x) * maskf
        row = Kc[:, P, :] * V  # K_pj V_pj: row p of its own prefix; its sum is R_pp
        A[:, p0:p1, :w] = row / row.sum(-1, keepdim=True)
        gstar[:, p0:p1, :w] = x
        warm = x[:, -1, :]
    return A, gstar, K, sweeps


def _backward(grad, A, gstar, K, rho, tol, chunk):
    """The implicit gradient ``ds`` for ``grad = dL/dA`` (all (N, T, T))."""

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

        def adjoint(lam, Cinv=Cinv, Kc=Kc, U2=U2):
            Cb = -rho * lam * Cinv
            Ub = _times_kt(Cb, Kc)
            Rb = -Ub * U2
            return Cb, Rb

        # l1 norm per prefix: J^T is an l1 rho-contraction (module docstring, step 2)
        bscale = direct.abs().sum(-1).amax(-1, keepdim=True).clamp(min=torch.finfo(dtype).tiny)
        lam, _ = _fixed_point(
            lambda y, adjoint=adjoint, Kc=Kc, V=V, direct=direct: direct + _times_k(adjoint(y)[1], Kc) * V,
            direct,
            lambda img, rn, bscale=bscale: thr * bscale.expand_as(rn),
            max_iter=max_iter,
            memory=_memory(rho, w),
            norm="l1",
            what=f"adjoint of prefixes {p0}..{p1 - 1}",
        )
        Cb, Rb = adjoint(lam)
        # dG/dK contracted with lambda: K enters R = V K^T and C = U K
        # only the lower triangle of Kbar meets a non-zero K_ij: row tiles [i0, i1) up to column i1
        RbT, UT = Rb.transpose(1, 2), U.transpose(1, 2)
        for i0 in range(0, w, _TILE):
            i1 = min(w, i0 + _TILE)
            Kbar = torch.bmm(RbT[:, i0:i1], V[..., :i1]) + torch.bmm(UT[:, i0:i1], Cb[..., :i1])
            ds[:, i0:i1, :i1] += Kbar * Kc[:, i0:i1, :i1]
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
