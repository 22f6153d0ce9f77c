"""The prefix-consistent causal OT attention operator in torch, trainable.

Definition 1 (``proofs/operator.md``): for query ``t`` solve, on the ``t x t`` prefix,

.. math::

    f_i = -\\operatorname{LSE}_{j\\le i}(s_{ij} + g_j),\\qquad
    g_j = -\\rho\\,\\operatorname{LSE}_{j\\le i\\le t}(s_{ij} + f_i),

and keep row ``t``: :math:`A_{tj} = \\exp(f_t + s_{tj} + g_j)`. This module computes the
same operator as :func:`otprior.causal_ot_attention` with three properties a training
loop needs:

* **Converged.** Every prefix is iterated until the oscillation ``max - min`` of the
  residual of its column duals is at most ``tol (1 - rho)`` (relative to ``max(1, |g|)``,
  and never below a few hundred ulps of the working precision), which certifies
  ``osc(g - g*) <= tol`` because the dual update, normalised by ``g_p = 0`` on prefix ``p``,
  is a ``rho``-contraction in the oscillation seminorm (Theorem 1, ``proofs/contraction.md``;
  the attention does not depend on a constant added to ``g``). From
  ``rho = 0.6`` on (below it, for blocks wider than 512), the iteration and the adjoint's
  are accelerated by safeguarded Anderson mixing (the numpy operator's safeguard: a
  candidate is used only if finite and kept only if its residual stays within 10 times
  the best, else the plain step of the last accepted point is taken), and a block (forward
  or adjoint) whose mixing does not reach its threshold within the sweep cap is solved again
  by the plain iteration (:func:`_fixed_point`), so it converges wherever the plain iteration
  does. The plain iteration contracts at a rate that tends to ``rho`` as the score spread
  grows (the plan concentrates and the chain of its columns mixes slowly), so near
  ``rho = 1`` it can need more sweeps than its cap (20,000 at most; at ``rho = 0.999`` and
  scores ``N(0, 1) x 300``, about 23,000 in float64); its error then says so, with the rate
  it measured and the sweeps it lacks. For float64 inputs below ``rho = 0.98`` the adjoint's
  Anderson iteration also keeps the forward solve's last pairs, turned into pairs of the
  adjoint (``J^T`` is similar to ``J`` through the plan's column masses:
  :func:`_adjoint_pairs`), which deflate its slow modes (adjoint sweeps per block 39-42 ->
  22-32 at ``rho = 0.9``, ``T = 512``). The accelerated route starts every prefix at the image
  of ``g = 0``, in closed form (Lemma 1, ``proofs/operator_fast_paths.md``), and drops the
  prefixes that have met their threshold from the batch it sweeps (every prefix is its own
  problem; its best point is final). Convergence is
  read by the host once every 8 sweeps on accelerators (every sweep on the CPU, where it
  costs nothing), so a training step does not synchronise once per sweep.
* **Solvers.** ``solver="auto"`` (the default) keeps, below ``rho = 0.6`` for ``T <= 512``
  (and for every ``T`` off the CPU), the iteration the committed training runs were made
  with, bit for bit, and takes the route of ``"anderson"`` everywhere else (on the CPU,
  measured 1.07-1.10 times faster at ``T = 1024``, ``rho = 0.5``). ``solver="anderson"`` mixes
  below 0.6 too (memory 2, blocks wider than 512), runs the mixing on the CPU in a loop
  with less memory traffic (:func:`_anderson_host`) and lets the backward pass reuse the
  products of the sweeps that certified the forward duals and the adjoint instead of
  recomputing them; ``"auto"`` does the same from ``rho = 0.6`` on. ``solver="plain"``
  never mixes. All three meet the same certificate; they differ in rounding only.
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
2. *Through the fixed point.* The fixed point is that of the normalised map
   ``G~ = G - G_p 1`` (``P = I - 1 e_p^T``, ``G~ = P G``). Differentiating ``g* = G~(g*, s)``
   gives ``dg*/ds = (I - J~)^{-1} dG~/ds`` with ``J~ = P J``, ``J = dG/dg`` at ``g*``. ``J`` is
   ``rho`` times a row-stochastic matrix (``J 1 = rho 1``), so on vectors summing to zero
   ``||J^T y||_1 <= rho ||y||_1``; ``P^T y = y - e_p (1^T y)`` sums to zero, so the adjoint
   ``lambda = J~^T lambda + b`` (``b`` sums to zero) has a unique solution, reached by
   ``lambda <- J^T P^T lambda + b`` at rate ``rho`` in the l1 norm, stopped when
   ``||lambda' - lambda||_1 <= tol (1 - rho) max(max_prefix ||b||_1, ||lambda||_1)`` (a relative
   accuracy ``tol``, by the certificate of Theorem 1, part 3, in the l1 norm). Then
   ``ds += (dG/ds)^T P^T lambda``. The projection ``P^T`` removes the constant mode, which
   rounding would otherwise feed at every sweep and ``J^T`` contracts only at rate ``rho``
   (amplified ``1 / (1 - rho)``: the adjoint failed for ``rho >= 0.99998`` without it).
3. *The products.* ``J^T y`` by the chain rule through ``C``, ``U``, ``R``, ``V``:
   ``Cbar = -rho y / C``, ``Ubar = Cbar K^T``, ``Rbar = -Ubar U^2``, ``Vbar = Rbar K``,
   ``J^T y = Vbar * V`` (two matrix products, as a forward sweep). ``(dG/ds)^T y``:
   ``K`` enters ``R`` and ``C``, so ``Kbar = Rbar^T V + U^T Cbar`` (summed over the
   prefixes of a block) and ``ds_ij += Kbar_ij K_ij``. The row shift of ``K`` cancels in
   ``U K`` and in ``A``, so it carries no gradient.

The fixed point runs in float32 for float32 and bfloat16 inputs (float64 when the score
spread of a matrix exceeds ``60``, where ``exp`` of the shifted scores would leave the
float32 range) and in float64 for float64 inputs; the output has the input's dtype. A plain
step whose values leave the floating-point range (duals beyond ``exp``'s range, as at
``rho = 0.999`` in float32) moves the whole input to float64, then to the log domain; a score
spread beyond ``600`` (where the float64 kernel underflows) goes to the log domain directly:
the same normalised sweep with every log-sum-exp evaluated with its maximum factored out, on
groups of prefixes whose ``(prefixes, T, T)`` arrays stay bounded, and the gradient in plan
form (``_backward_log``). It is exact but costs ``exp`` per multiply-add.
"""

from __future__ import annotations

import math

import torch

from .._validation import ConvergenceError, DomainError, check_rho

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
# the accelerated loop drops finished problems from its batch once the rest is at most this fraction of it
_KEEP = 0.875


def default_tol(dtype) -> float:
    """Default dual tolerance: ``1e-5`` for a float32 fixed point, ``1e-12`` for float64."""
    return 1e-12 if dtype == torch.float64 else 1e-5


def _floor(dtype):
    # the stopping rule stays above rounding noise of the duals (a few hundred ulps)
    return 256 * torch.finfo(dtype).eps


# sweeps per block at most (time bounded for every rho < 1)
_MAX_SWEEPS = 20_000


def _max_iter(rho, thr):
    # a rho-contraction started within O(1) of g* reaches thr in log(thr)/log(rho) sweeps;
    # four times that (and at least 200, at most _MAX_SWEEPS) before declaring non-convergence.
    # As rho -> 1 the causal problem tends to the balanced one, whose only plan on the
    # lower triangle is the identity (column t is reached by row t alone): the duals
    # diverge and the rate tends to one, so the cap, not the maths, ends such runs.
    if rho == 0.0:
        return 2
    return min(_MAX_SWEEPS, max(200, 4 * math.ceil(math.log(thr) / math.log(rho))))


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


def _sweep(x, K, maskf, offf, rho, last):
    """One normalised dual update of a block of prefixes: returns ``(G(x), V, R, U, C)``.

    ``maskf`` is 1 on the prefix (row ``p``: columns ``<= p``) and 0 elsewhere, ``offf`` its
    complement; adding ``offf`` before a division or a logarithm keeps the entries outside
    the prefix finite, and multiplying by ``maskf`` zeroes them. The image is normalised by
    its last entry (``G(x)_p = 0`` on prefix ``p``, index ``last``): the attention does not
    depend on a constant added to ``g``, and the normalised map is a ``rho``-contraction in
    the oscillation seminorm without the constant mode, which contracts only at rate ``rho``
    (Theorem 1, ``proofs/contraction.md``), and keeps the duals bounded.
    """
    V = torch.exp(x) * maskf
    R = _times_kt(V, K)
    U = maskf / (R + offf)
    C = _times_k(U, K)
    g = torch.log(C + offf).mul_(-rho)
    g = g.sub_(g.gather(-1, last.expand(g.shape[:-1])[..., None])).mul_(maskf)
    return g, V, R, U, C


def _sweep_lean(x, K, maskf, offf, nrmask, idx):
    """The sweep of :func:`_sweep` with fewer passes over the block (the accelerated route):
    returns ``(G(x), (V, U, C'))`` with ``C' = C + offf`` (``C`` on the prefix, 1 outside it).

    ``x`` is zero outside each prefix (every start, image and Anderson combination of the
    accelerated route is), so ``V = exp(x)`` needs no mask: an entry ``V_pj = 1`` with ``j > p``
    meets only ``K_ij = 0`` (``j > i``) in the row sums ``R_pi`` with ``i <= p``, and rows
    ``i > p`` are zeroed by ``U``. ``nrmask`` is ``-rho`` on the prefix and 0 outside, ``idx``
    the index of each prefix's last column: ``G(x) = -rho (log C - log C_p)`` on the prefix, 0
    outside, the normalised update of :func:`_sweep` (rounded differently).
    """
    V = torch.exp(x)
    U = maskf / _times_kt(V, K).add_(offf)
    C = _times_k(U, K).add_(offf)
    L = torch.log(C)
    g = L.sub_(L.gather(-1, idx)).mul_(nrmask)
    return g, (V, U, C)


_SOLVERS = ("auto", "plain", "anderson")


def _memory(rho, width, solver="auto", adjoint=False):
    """Anderson memory of a block's fixed point (forward or adjoint; 0: the plain iteration).

    ``solver="plain"``: 0 everywhere. ``solver="auto"`` below ``rho = 0.6``: the rule the
    committed training runs were made with, kept bit for bit (memory 3 for blocks wider than
    512, else 0, forward and adjoint alike). ``solver="anderson"``, and ``"auto"`` from
    ``rho = 0.6`` on: memory 3 up to ``rho = 0.9`` and 6 beyond; below 0.6, memory 2 for
    blocks wider than 512 (forward and adjoint) and the plain iteration below, where a sweep
    is so cheap that mixing's own bookkeeping (about 1 to 3 ms per sweep on one CPU core,
    measured) costs more than the three or four sweeps it saves out of ten.
    """
    if solver == "plain":
        return 0
    if solver == "anderson" or rho >= 0.6:
        if rho < 0.6:
            return 2 if width > _MIX_WIDTH else 0
        return 3 if rho < 0.9 else 6
    return 3 if width > 512 else 0


# "anderson" below rho = 0.6 mixes on blocks wider than this
_MIX_WIDTH = 512


def _lean(rho, solver):
    """Whether a block runs the accelerated route of ``solver="anderson"``: the host-read mixing
    loop (:func:`_anderson_host`) and the reuse of the certifying sweep's products in the
    backward pass (``solver="anderson"``, and ``"auto"`` from ``rho = 0.6`` on)."""
    return solver == "anderson" or (solver != "plain" and rho >= 0.6)


def _non_finite(what, k):
    err = ConvergenceError(f"{what}: non-finite values produced by a plain step (by sweep {k})")
    err.kind = "non-finite"
    return err


_TRY_ACCELERATED = "; the accelerated solver (solver='anderson', the default from rho = 0.6 on) or a larger tol reaches it"


def _out_of_sweeps(what, max_iter, rn, threshold, rn_half, span):
    """The plain iteration's ``ConvergenceError`` at its sweep cap, naming the condition.

    The residual of a ``rho``-contraction falls by the iteration's rate per sweep (``rho`` times
    the second eigenvalue of the column chain of the plan in the forward solve: it tends to
    ``rho`` as the score spread grows and the plan concentrates); the rate measured over the last
    ``span`` sweeps (worst problem) says how many more sweeps the threshold needs.
    """
    fails = rn > threshold
    worst = float(torch.where(fails, rn / threshold, torch.zeros_like(rn)).max())
    msg = (f"{what} did not reach the tolerance after max_iter={max_iter} sweeps (residual reached "
           f"{float(rn.max()):.2e}, threshold {float(threshold.min()):.2e})")
    if rn_half is not None and span > 0:
        ratio = torch.where(fails & (rn_half > 0), rn / rn_half, torch.zeros_like(rn))
        rate = float(ratio.max()) ** (1.0 / span)
        if 0.0 < rate < 1.0:
            more = math.ceil(math.log(worst) / -math.log(rate))
            msg += (f": the plain iteration contracts by {rate:.6f} per sweep here and needs about {more} more "
                    "sweeps than max_iter allows (its rate tends to rho as the score spread grows)" + _TRY_ACCELERATED)
        elif rate >= 1.0:
            msg += ": the residual stopped decreasing (rounding of the working precision)"
    err = ConvergenceError(msg)
    err.kind = "sweeps"
    return err


def _norm(res, norm):
    # amax, amin and sum propagate nan and inf: the norm is finite exactly when res is
    if norm == "osc":
        return res.amax(-1) - res.amin(-1)
    return res.abs().amax(-1) if norm == "sup" else res.abs().sum(-1)


def _fixed_point(step, x, thr, *, max_iter, memory, norm, what, aux=False, lean=False, narrow=None, pinned=None,
                 history=None):
    """The fixed point of ``step`` on a block (:func:`_iterate`), never failing where the plain iteration succeeds.

    With ``memory > 0`` the safeguarded Anderson iteration runs first; if it does not reach the
    threshold within ``max_iter`` sweeps, or one of its plain steps is not finite, the plain
    iteration (``memory = 0``, the same ``step``) solves the block again from the same start
    ``x``, in the same precision, so the accelerated route fails only where the plain iteration
    fails too (then with the plain iteration's error, which names the condition, chained to the
    accelerated one; a non-finite plain step of the forward solve is what moves the input to
    float64 or the log domain, as for the plain route). Time stays bounded: at most
    ``2 max_iter`` sweeps. ``pinned`` and ``history``: see :func:`_anderson_host` (the CPU's accelerated loop;
    elsewhere no pairs are returned).
    """
    try:
        return _iterate(step, x, thr, max_iter=max_iter, memory=memory, norm=norm, what=what, aux=aux, lean=lean,
                        narrow=narrow, pinned=pinned, history=history)
    except ConvergenceError as err:
        if int(memory) == 0:
            raise
        accelerated = err
    try:
        return _iterate(step, x, thr, max_iter=max_iter, memory=0, norm=norm, what=what, aux=aux)
    except ConvergenceError as err:
        # the plain iteration's advice to try the accelerated solver does not apply here: it has just failed
        both = ConvergenceError("the accelerated solver failed on this block and so did the plain iteration from the "
                                "same start: " + str(err).replace(_TRY_ACCELERATED, ""))
        both.kind = getattr(err, "kind", None)
        raise both from accelerated


def _iterate(step, x, thr, *, max_iter, memory, norm, what, aux=False, lean=False, narrow=None, pinned=None,
             history=None):
    """Safeguarded Anderson iteration of ``step`` on a block, convergence checked on the device.

    ``x`` has shape ``(N, P, w)``: ``N * P`` independent problems. ``thr(best_img, best_res)``
    gives the per-problem threshold on the residual norm (``norm``: ``"osc"``, ``"sup"`` or
    ``"l1"`` over the last axis). The safeguard is the numpy operator's (``otprior._anderson``):
    the Anderson candidate is used only if finite, and accepted only if its residual is at
    most 10 times the problem's best; a rejection (or ``2 m`` accepted points without a new
    best) clears the problem's memory, resumes with the plain step of the last accepted
    point and pauses mixing for ``2, 4, ..., 32`` plain steps. Every problem returns the image of its
    best point, whose residual is the certificate, so mixing can only help. All of this
    runs as tensor operations; the host reads one flag every ``_CHECK_EVERY`` sweeps
    (every sweep on the CPU, where reading it costs nothing).

    With ``aux``, ``step`` returns ``(image, extra)`` (a tuple of ``(N, P, ...)`` tensors computed
    on the way to the image) and the result is ``(image of the best point, sweeps, extra of the
    best point)``: the caller reuses what the sweep that certified the best point computed.

    ``narrow`` (the CPU's accelerated loop, :func:`_anderson_host`) returns ``step`` restricted to a
    subset of the problems, so that finished ones leave the batch.

    Returns ``(image of the best point, sweeps)``; raises ``ConvergenceError`` saying which
    condition failed.
    """
    dtype, dev = x.dtype, x.device
    m = int(memory)
    lead = x.shape[:-1]
    # on the CPU, masks may be read at no cost: skip selections that change nothing
    host = dev.type == "cpu" and _HOST_CHECKS
    every = 1 if host else _CHECK_EVERY
    if m > 0 and lean and host:
        return _anderson_host(step, x, thr, max_iter=max_iter, memory=m, norm=norm, what=what, aux=aux, narrow=narrow,
                              pinned=pinned, history=history)
    if m == 0:  # the plain iteration (a contraction: the last image is the best point)
        half = max_iter // 2
        rn_half = None
        for k in range(1, max_iter + 1):
            img = step(x)
            if aux:
                img, extra = img
            res = img - x
            rn = _norm(res, norm)
            x = img
            if k == half:  # for the error message alone: the rate over the second half of the sweeps
                rn_half = rn
            if k % every == 0 or k == max_iter:
                if not bool(torch.isfinite(rn).all()):
                    raise _non_finite(what, k)
                if bool((rn <= thr(img, rn)).all()):
                    return (img, k, extra) if aux else (img, k)
        raise _out_of_sweeps(what, max_iter, rn, thr(img, rn), rn_half, max_iter - half)

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
    best_extra = None
    prev_img = prev_res = torch.zeros_like(x)
    have_prev = torch.zeros(lead, dtype=torch.bool, device=dev)
    trial = torch.zeros(lead, dtype=torch.bool, device=dev)
    failed = torch.zeros(lead, dtype=torch.bool, device=dev)
    pause = torch.zeros(lead, dtype=torch.int64, device=dev)
    rejections = torch.zeros(lead, dtype=torch.int64, device=dev)
    stale = torch.zeros(lead, dtype=torch.int64, device=dev)
    w = x.shape[-1]
    d_res = torch.zeros(*lead, m, w, dtype=dtype, device=dev)
    d_img = torch.zeros_like(d_res)
    gram = torch.zeros(*lead, m, m, dtype=dtype, device=dev)
    eye = torch.eye(m, dtype=dtype, device=dev)
    ridge = 1e-10 if dtype == torch.float64 else 1e-5
    for k in range(1, max_iter + 1):
        img = step(x)
        if aux:
            img, extra = img
        res = img - x
        # amax and sum propagate nan and inf: rn is finite exactly when the image is
        rn = _norm(res, norm)
        rn = torch.where(torch.isfinite(rn), rn, inf)
        accept = ~trial | (rn <= 10.0 * best_rn)
        failed |= ~trial & torch.isinf(rn)  # a plain step that is not finite
        go = accept & torch.isfinite(rn)
        improved = go & (rn < best_rn)
        best_rn = torch.where(improved, rn, best_rn)
        best_img = sel(improved, img, best_img)
        if aux:
            best_extra = extra if best_extra is None else tuple(sel(improved, a, b) for a, b in zip(extra, best_extra, strict=True))
        stale = torch.where(improved, 0, torch.where(go, stale + 1, stale))
        # memory: every problem writes slot k % m; problems without a new pair write zeros
        slot = k % m
        upd = go & have_prev
        # differences written in place into the history (no temporaries of the history's size)
        dr, di = d_res[..., slot, :], d_img[..., slot, :]
        torch.sub(res, prev_res, out=dr)
        torch.sub(img, prev_img, out=di)
        if not (host and bool(upd.all())):
            keep = upd[..., None].to(dtype)
            dr.mul_(keep)
            di.mul_(keep)
        # the new Gram column and the right-hand side: dot products with the history as row-vector
        # products (1, w) x (w, m), no temporary of the history's size (a broadcast multiply and sum,
        # or a (m, w) x (w, 1) product, is several times slower on the CPU)
        hist_t = d_res.view(-1, m, w).transpose(1, 2)
        col = torch.bmm(dr.reshape(-1, 1, w), hist_t).view(*lead, m)
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
        rhs = torch.bmm(res.reshape(-1, 1, w), hist_t).view(*lead, m) * inv
        gamma = torch.linalg.solve_ex(A, rhs[..., None])[0][..., 0] * inv
        cand = img - torch.bmm(gamma.reshape(-1, 1, m), d_img.view(-1, m, w)).view(x.shape)
        use = go & ~reject & (pause == 0) & valid.any(-1) & torch.isfinite(cand.sum(-1))
        pause = torch.where(go & ~use & (pause > 0), pause - 1, pause)
        x = sel(use, cand, sel(reject, prev_img, img))  # a rejection resumes the plain trajectory
        trial = use
        if k % every == 0 or k == max_iter:
            done = best_rn <= thr(best_img, best_rn)
            if bool(failed.any()):
                raise _non_finite(what, k)
            if bool(done.all()):
                return (best_img, k, best_extra) if aux else (best_img, k)
    worst = float(best_rn.max())
    raise ConvergenceError(
        f"{what} did not reach the tolerance after max_iter={max_iter} sweeps (residual reached {worst:.2e}, "
        f"threshold {float(thr(best_img, best_rn).min()):.2e})"
    )


def _take(t, sel):
    """Rows ``sel`` (an ``(N, r)`` index into the prefixes) of an ``(N, P, k)`` array: ``t[n, sel[n]]``."""
    return t.gather(1, sel[..., None].expand(-1, -1, t.shape[-1]))


def _anderson_host(step, x, thr, *, max_iter, memory, norm, what, aux, narrow=None, pinned=None, history=None):
    """Safeguarded Anderson mixing on the CPU with the host reading every flag (``_fixed_point``).

    The same method and safeguard as the general loop of :func:`_fixed_point` (a candidate is
    used only if finite and kept only if its residual is at most 10 times the problem's best; a
    rejection, or ``2 m`` accepted points without a new best, clears the problem's memory,
    resumes with the plain step of the last accepted point and pauses mixing for
    ``2, 4, ..., 32`` plain steps; the best point's image is returned), with less memory
    traffic: the residual differences and the current residual share one ``(m + 1)``-row
    buffer per problem, the image differences sit in the rows of their residual differences
    (the residual row rotates: the new residual is written over the oldest difference, and
    the previous residual is turned into the newest difference in place), the Gram matrix
    is updated from one pass over the buffer, the least squares runs in the ``(m + 1)``-row
    space with the residual row marked unused, the candidate is one ``baddbmm`` and
    selections run only where problems disagree.

    ``x`` has shape ``(N, P, w)``. With ``narrow`` (a function of an ``(N, r)`` index into the
    ``P`` problems of each of the ``N`` matrices, returning ``step`` on those problems alone), the
    problems that have met their threshold leave the batch once a quarter of a matrix's
    problems have (the products shrink with it): their best point is final (a certified
    one), the rest go on unchanged, since every problem's iteration is independent of the
    others'. Rows are kept equal across the ``N`` matrices by keeping some finished problems,
    which only go on improving their best point.

    ``pinned`` (``(dR, dI)``, each ``(N, P, h, w)``): ``h`` pairs of residual and image differences
    known beforehand (the adjoint's, from the forward solve: :func:`_adjoint_pairs`), kept in
    the least squares next to the ``m`` own pairs and never rotated out; a restart of a problem
    drops them. They only choose candidates, which are evaluated and safeguarded like any other.
    ``history`` (a dict): on return, ``history["pairs"]`` holds the last accepted pairs of every
    problem, ``(dR, dI)`` of shape ``(N, P, m + 1, w)`` (zero rows where fewer were accepted, and one always).
    """
    dtype, dev = x.dtype, x.device
    m = int(memory)
    N, P, w = x.shape
    r = P
    B = N * r
    inf = torch.tensor(float("inf"), dtype=dtype, device=dev)
    ridge = 1e-10 if dtype == torch.float64 else 1e-5
    h = 0 if pinned is None else pinned[0].shape[-2]
    eye = torch.eye(m + 1 + h, dtype=dtype, device=dev)
    buf_r = x.new_zeros(B, m + 1 + h, w)  # m residual differences and the last accepted residual (row rrow)
    buf_i = x.new_zeros(B, m + 1 + h, w)  # image differences, in the rows of their residual differences
    gram = x.new_zeros(B, m + 1 + h, m + 1 + h)  # dot products of the rows of buf_r
    rrow = m
    free = list(range(m - 1, -1, -1))  # rows not written yet
    order = []  # rows holding differences, oldest first
    valid = torch.zeros(B, m + 1 + h, dtype=torch.bool, device=dev)
    if h:  # pinned pairs: rows m + 1 .. m + h, never rotated out (a restart of a problem drops them)
        for dst, src in zip((buf_r, buf_i), pinned, strict=True):
            dst[:, m + 1:] = src.reshape(B, h, w)
        fin = torch.isfinite(buf_r[:, m + 1:]).all(-1) & torch.isfinite(buf_i[:, m + 1:]).all(-1)
        buf_r[:, m + 1:].mul_(fin[..., None])
        buf_i[:, m + 1:].mul_(fin[..., None])
        buf_r[:, m + 1:].nan_to_num_(0.0, 0.0, 0.0)
        buf_i[:, m + 1:].nan_to_num_(0.0, 0.0, 0.0)
        gram[:, m + 1:, m + 1:] = torch.bmm(buf_r[:, m + 1:], buf_r[:, m + 1:].transpose(1, 2))
        valid[:, m + 1:] = torch.diagonal(gram, dim1=-2, dim2=-1)[:, m + 1:] > 0
    best_rn = torch.full((B,), float("inf"), dtype=dtype, device=dev)
    best_img = x.reshape(B, w)
    best_extra = None
    prev_img = best_img
    have_prev = torch.zeros(B, dtype=torch.bool, device=dev)
    trial = torch.zeros(B, dtype=torch.bool, device=dev)
    any_trial = False
    pause = torch.zeros(B, dtype=torch.int64, device=dev)
    rejections = torch.zeros(B, dtype=torch.int64, device=dev)
    stale = torch.zeros(B, dtype=torch.int64, device=dev)
    any_pause = False
    xf = x.reshape(B, w)
    sel = None  # (N, r) index of the problems still in the batch (None: all of them)
    full_img = full_extra = full_hist = None

    def pairs():
        # the accepted pairs of every problem in the batch (residual and image differences; the pinned rows left
        # out, rows not valid zeroed, among them the residual row): (B, m + 1, w) each
        live = valid[:, : m + 1, None]
        return buf_r[:, : m + 1] * live, buf_i[:, : m + 1] * live

    def write_back():
        nonlocal full_img, full_extra, full_hist
        if full_img is None:
            full_img = x.new_empty(N, P, w)
            full_extra = None if not aux else tuple(e.new_empty(N, P, e.shape[-1]) for e in best_extra)
            full_hist = None if history is None else (x.new_zeros(N, P, m + 1, w), x.new_zeros(N, P, m + 1, w))
        idx = sel[..., None]
        full_img.scatter_(1, idx.expand(N, r, w), best_img.view(N, r, w))
        if aux:
            for dst, e in zip(full_extra, best_extra, strict=True):
                dst.scatter_(1, idx.expand(N, r, e.shape[-1]), e.view(N, r, -1))
        if history is not None:
            for dst, e in zip(full_hist, pairs(), strict=True):
                dst.scatter_(1, idx[..., None].expand(N, r, m + 1, w), e.view(N, r, m + 1, w))

    def result(k):
        if sel is None:
            out, extra = best_img.view(N, P, w), best_extra
            extra = extra and tuple(e.view(N, P, -1) for e in extra)
            if history is not None:
                history["pairs"] = tuple(e.view(N, P, m + 1, w) for e in pairs())
        else:
            write_back()
            out, extra = full_img, full_extra
            if history is not None:
                history["pairs"] = full_hist
        return (out, k, extra) if aux else (out, k)

    for k in range(1, max_iter + 1):
        img = step(xf.view(N, r, w))
        if aux:
            img, extra = img
            extra = tuple(e.reshape(B, -1) for e in extra)
        img = img.reshape(B, w)
        new_row = order.pop(0) if len(order) == m else free.pop()
        res = torch.sub(img, xf, out=buf_r[:, new_row])
        rn = _norm(res, norm)
        finite = torch.isfinite(rn)
        all_finite = bool(finite.all())
        if not all_finite:
            if bool((~trial & ~finite).any()):
                raise _non_finite(what, k)
            rn = torch.where(finite, rn, inf)
        accept = (rn <= 10.0 * best_rn) | ~trial if any_trial else None
        all_accept = accept is None or bool(accept.all())
        go = finite if all_accept else accept & finite
        all_go = all_finite and all_accept
        improved = rn < best_rn
        if not all_go:
            improved &= go
        all_improved = bool(improved.all())
        best_rn = torch.where(improved, rn, best_rn)
        best_img = img if all_improved else torch.where(improved[:, None], img, best_img)
        if aux:
            best_extra = (
                extra
                if all_improved or best_extra is None
                else tuple(torch.where(improved[:, None], a, b) for a, b in zip(extra, best_extra, strict=True))
            )
        stale = torch.where(improved, 0, stale + 1 if all_go else torch.where(go, stale + 1, stale))
        # the pair (res - prev_res, img - prev_img) in the last residual's row
        drow = rrow
        # the Gram matrix in one pass over the buffer: the new residual r against every row (the
        # previous residual r' included), then the newest difference d = r - r' by linearity,
        # <d, y> = <r, y> - <r', y> (<r', y> is the old row of r'): the numbers only choose the
        # candidate, which is evaluated and checked like any other point
        cur = torch.bmm(res[:, None, :], buf_r.transpose(1, 2))[:, 0]  # (B, m + 1)
        dcol = cur - gram[:, drow]
        rr, rp = cur[:, new_row], cur[:, drow]
        dcol[:, drow] = rr - 2.0 * rp + gram[:, drow, drow]
        dcol[:, new_row] = rr - rp
        cur[:, drow] = rr - rp
        gram[:, drow, :] = dcol
        gram[:, :, drow] = dcol
        gram[:, new_row, :] = cur
        gram[:, :, new_row] = cur
        torch.sub(res, buf_r[:, drow], out=buf_r[:, drow])
        torch.sub(img, prev_img, out=buf_i[:, drow])
        order.append(drow)
        rrow = new_row
        valid[:, drow] = go & have_prev
        valid[:, rrow] = False
        if not all_go:
            # an unaccepted residual must not become the reference of the next difference:
            # its problem starts a new pair chain from the restart point
            have_prev = have_prev & go
            prev_img = torch.where(go[:, None], img, prev_img)
            bad = ~finite
            if bool(bad.any()):  # non-finite rows would poison the batched products
                buf_r.masked_fill_(bad[:, None, None], 0.0)
                buf_i.masked_fill_(bad[:, None, None], 0.0)
                gram.masked_fill_(bad[:, None, None], 0.0)
                valid &= ~bad[:, None]
        else:
            prev_img = img
        have_prev = have_prev | go
        reject = ~accept | (go & (stale > 2 * m)) if not all_accept else go & (stale > 2 * m)
        any_reject = bool(reject.any())
        if any_reject:
            rejections = rejections + reject.long()
            pause = torch.where(reject, torch.clamp(2 ** torch.clamp(rejections, max=5), max=32), pause)
            stale = torch.where(reject, 0, stale)
            valid &= ~reject[:, None]
            any_pause = True
        # the Anderson candidate from the small Gram matrix (diagonally scaled, ridge on unused rows);
        # rows not written since a problem's last restart, and the residual row, are not valid
        diag = torch.diagonal(gram, dim1=-2, dim2=-1)
        ok = valid & (diag > 0)
        inv = torch.where(ok, torch.rsqrt(torch.where(ok, diag, 1.0)), 0.0)
        A = gram * inv[:, :, None] * inv[:, None, :] + torch.where(ok, ridge, 1.0)[:, :, None] * eye
        gamma = torch.linalg.solve_ex(A, (gram[:, rrow] * inv)[..., None])[0][..., 0] * inv
        use = go & ok.any(-1) & torch.isfinite(gamma).all(-1)
        if any_reject:
            use &= ~reject
        if any_pause:
            use &= pause == 0
            step_down = go & ~use & (pause > 0)
            pause = torch.where(step_down, pause - 1, pause)
            any_pause = bool((pause > 0).any())
        any_use = bool(use.any())
        if any_use:
            gamma = torch.where(use[:, None], gamma, 0.0)
            nxt = torch.baddbmm(img[:, None, :], gamma[:, None, :], buf_i, alpha=-1.0)[:, 0]
        else:
            nxt = img
        if any_reject:
            nxt = torch.where(reject[:, None], prev_img, nxt)
        xf = nxt
        trial = use
        any_trial = any_use
        done = best_rn <= thr(best_img.view(N, r, w), best_rn.view(N, r)).reshape(B)
        if bool(done.all()):
            return result(k)
        if narrow is None:
            continue
        act = ~done.view(N, r)
        keep_r = int(act.sum(1).max())
        if keep_r > _KEEP * r:
            continue
        # a quarter or more of every matrix's problems are finished: the batch keeps the rest
        if sel is None:
            sel = torch.arange(P, device=dev).expand(N, P)
        write_back()
        local = torch.argsort(act.to(torch.int8), dim=1, descending=True, stable=True)[:, :keep_r]
        rows = (local + torch.arange(N, device=dev)[:, None] * r).reshape(-1)
        sel = sel.gather(1, local)
        r, B = keep_r, N * keep_r
        buf_r, buf_i, gram, valid = buf_r[rows], buf_i[rows], gram[rows], valid[rows]
        best_rn, best_img, prev_img, xf = best_rn[rows], best_img[rows], prev_img[rows], xf[rows]
        have_prev, trial, pause, rejections, stale = (
            have_prev[rows], trial[rows], pause[rows], rejections[rows], stale[rows])
        if aux:
            best_extra = tuple(e[rows] for e in best_extra)
        any_trial = bool(trial.any())
        any_pause = bool((pause > 0).any())
        step = narrow(sel)
    worst = float(best_rn.max())
    raise ConvergenceError(
        f"{what} did not reach the tolerance after max_iter={max_iter} sweeps (residual reached {worst:.2e}, "
        f"threshold {float(thr(best_img.view(N, r, w), best_rn.view(N, r)).min()):.2e})"
    )


def _thresholds(rho, tol, dtype):
    thr = max(tol * (1.0 - rho), float(_floor(dtype)))
    return thr, _max_iter(rho, thr)


def _first_image(K, p0, p1, colsum, rho):
    """The image ``G(0)`` of the prefixes ``p0 .. p1 - 1`` in closed form: ``(G(0), colsum)``.

    Lemma 1 (``proofs/operator_fast_paths.md``): at ``g = 0`` the row sums ``r_i = sum_j K_ij``
    of a prefix do not depend on the prefix, so ``C_pj = F_pj``, the sum of ``K_ij / r_i`` over
    the rows ``i <= p``, and ``G(0)_j = -rho (log F_pj - log F_pp)`` on prefix ``p`` (0 outside).
    ``colsum`` (``(N, 1, p0)``) holds the column sums of ``K_ij / r_i`` over the rows above the
    block (zero beyond their diagonal, so only columns ``< p0``); the returned one adds the
    block's rows. Every ``F_pj`` with ``j <= p`` is at least ``K_jj / r_j > 0`` (the kernel
    path's spread keeps ``K_jj`` normal), so the logarithms are finite. ``r_i >= 1``: the row
    maximum of ``K`` is 1.
    """
    N = K.shape[0]
    w = p1
    Kb = K[:, p0:p1, :w]
    F = torch.cumsum(Kb / Kb.sum(-1, keepdim=True), dim=-2)
    F[..., :p0] += colsum
    P = torch.arange(p0, p1, device=K.device)
    maskf = (torch.arange(w, device=K.device)[None, :] <= P[:, None]).to(K.dtype)
    L = torch.log(F + (1.0 - maskf))
    x = L.sub_(L.gather(-1, P.expand(N, p1 - p0)[..., None])).mul_(maskf * -rho)
    return x, F[:, -1:, :]


def _solve(s, rho, tol, chunk, solver="auto", grad=True, pin=True):
    """Forward solve on ``s`` of shape (N, T, T) with the kernel: ``(A, G*, K, sweeps, saved)``.

    With ``pin`` (a float64 input) where :func:`_pinning` allows, ``saved`` ends with a list of each block's last
    accepted Anderson pairs (:func:`_anderson_host`'s ``history``), or ``None`` for a block without them.

    With ``solver="anderson"`` (and ``grad``: a backward pass may follow), ``saved`` holds ``(V, U, C)`` of the sweep that certified each
    prefix's duals (``(N, T, T)`` each, zero outside the prefixes), which the backward pass
    reuses instead of sweeping once more at ``G*``; otherwise ``None``.

    Raises ``_KernelRange`` when a plain step leaves the floating-point range (the
    log-domain path is exact there).
    """

    N, T, _ = s.shape
    K = _kernel(s)
    dtype = s.dtype
    thr, max_iter = _thresholds(rho, tol, dtype)
    A = torch.zeros_like(s)
    gstar = torch.zeros_like(s)
    ar = torch.arange(T, device=s.device)
    warm = prev = None
    sweeps = 0
    lean = _lean(rho, solver)
    keep = grad and lean  # nothing to reuse without a backward pass
    colsum = torch.zeros(N, 1, 0, dtype=dtype, device=s.device)  # sum of K_ij / r_i over the rows solved (Lemma 1)
    saved = tuple(torch.zeros_like(s) for _ in range(3)) if keep else None
    # the last accepted pairs of every block's forward solve (float64 inputs, pin), stored in float32: the adjoint's
    # Anderson iteration keeps them (_adjoint_pairs); they only choose its candidates
    hist = [] if keep and pin and _pinning(rho, solver, s.device, dtype) else None
    store = torch.float32
    for p0, p1 in _blocks(T, N, chunk):
        w = p1
        P = ar[p0:p1]
        Kc = K[:, :w, :w]
        mask = ar[:w][None, :] <= P[:, None]
        maskf = mask.to(dtype)
        offf = 1.0 - maskf
        x = torch.zeros(N, p1 - p0, w, dtype=dtype, device=s.device)
        memory = _memory(rho, w, solver)
        if lean:
            # the accelerated route starts every prefix at the image of g = 0, in closed form (Lemma 1,
            # proofs/operator_fast_paths.md): G(0)_j = -rho (log F_pj - log F_pp) with F_pj the sum of
            # K_ij / r_i over rows i <= p (r_i = sum_j K_ij), one running column sum over the rows of
            # the blocks. Measured (T = 1024, rho = 0.9, scores N(0, 1)): 10.3 sweeps per block
            # against 13.6 from the previous block's solutions translated by the block size (whose
            # columns near the anchor, reached by a few rows, start far off). It is a start, not an
            # image: no problem is stopped before an evaluation of the map certifies it
            x, colsum = _first_image(K, p0, p1, colsum, rho)
        elif prev is not None and memory > 0:
            # accelerated blocks: the previous block's solutions translated by its size c, prefix
            # p starting from prefix p - c shifted c columns to the right (column j of prefix p is
            # reached by the same number of rows, p - j + 1, as column j - c of prefix p - c, so
            # the profile of the duals near the anchor carries over; the first c columns repeat
            # its first dual), normalised like them (last dual 0). Any start converges (Theorem 1,
            # proofs/contraction.md); this one saves about one sweep in ten at rho = 0.9 against
            # the last prefix repeated, which the plain path keeps (its rounding is unchanged)
            sh = prev.shape[1]  # blocks after the first are no wider than it (_blocks)
            x[:, :, sh:] = prev[:, : p1 - p0, : p1 - sh]
            x[:, :, :sh] = prev[:, : p1 - p0, :1]
            x = x * maskf
        elif warm is not None:
            # warm start: the last solved prefix (normalised, its last dual 0), repeated on the
            # new columns (so every new prefix starts normalised too)
            k = warm.shape[-1]
            x[:, :, :k] = warm[:, None, :]
            x[:, :, k:] = warm[:, None, -1:]
            x = x * maskf
        narrow = None
        if lean:

            def narrow(sel, Kc=Kc, maskf=maskf, P=P):
                # the sweep of the problems sel (N, r) of the block (all of them for sel = None)
                mk = maskf.expand(N, -1, -1) if sel is None else maskf[sel]
                offk, nrmask = 1.0 - mk, mk * -rho
                idx = (P.expand(N, -1) if sel is None else P[sel])[..., None]

                def sub_step(y):
                    g, extra = _sweep_lean(y, Kc, mk, offk, nrmask, idx)
                    return (g, extra) if keep else g

                return sub_step

            step = narrow(None)
        else:

            def step(y, Kc=Kc, maskf=maskf, offf=offf, P=P):
                g, V, _, U, C = _sweep(y, Kc, maskf, offf, rho, P)
                return (g, (V, U, C)) if keep else g

        pairs = {} if hist is not None and memory > 0 else None
        try:
            out = _fixed_point(
                step,
                x,
                lambda img, rn: thr * img.abs().amax(-1).clamp(min=1.0),
                max_iter=max_iter,
                memory=memory,
                norm="osc",
                what=f"prefixes {p0}..{p1 - 1}",
                aux=keep,
                lean=_lean(rho, solver),
                narrow=narrow,
                history=pairs,
            )
        except ConvergenceError as err:
            if getattr(err, "kind", "") == "non-finite":
                raise _KernelRange from err
            raise
        x, k = out[:2]
        if keep:
            for dst, src in zip(saved, out[2], strict=True):
                dst[:, p0:p1, :w] = src
        if hist is not None:
            hist.append(None if not pairs else tuple(e.to(store) for e in pairs["pairs"]))
        sweeps += k
        V = torch.exp(x) * maskf
        row = Kc[:, P, :] * V  # K_pj V_pj: row p of its own prefix; its sum is R_pp
        A[:, p0:p1, :w] = row / row.sum(-1, keepdim=True)
        gstar[:, p0:p1, :w] = x
        warm = x[:, -1, :]
        prev = x
    if hist is not None:
        saved = saved + (hist,)
    return A, gstar, K, sweeps, saved


# the adjoint keeps the forward solve's pairs below this rho (measured, float32 and float64, T = 512: adjoint sweeps
# per block 11 -> 7-8 at rho = 0.8, 13 -> 9-10 at 0.9, 20 -> 13-15 at 0.95, 39-42 -> 22-32 at 0.9 in float64; at 0.99
# they cost sweeps, 39 -> 42-56, the forward's last pairs there coming from a run with restarts)
_PIN_RHO = 0.98


def _pinning(rho, solver, device, dtype):
    """Whether the forward solve keeps its Anderson pairs for the adjoint (:func:`_adjoint_pairs`): the CPU's
    accelerated loop (:func:`_anderson_host`), with a backward pass, below ``_PIN_RHO``, for float64 inputs.

    Measured (T = 512, rho = 0.9, one thread, interleaved): the float64 backward 0.75 s -> 0.60 s (adjoint sweeps
    per block 39-42 -> 22-32); in float32 the adjoint's sweeps fall less (13 -> 10-11, the last pairs of a float32
    solve carry rounding of about 1% of their size) than the six more rows of its least squares and the pairs'
    conversions cost (backward 0.16 s -> 0.23 s), so float32 inputs (and float32 inputs moved to float64 by
    their score spread) do without."""
    return (_lean(rho, solver) and rho < _PIN_RHO and device.type == "cpu" and _HOST_CHECKS
            and dtype == torch.float64)


def _adjoint_pairs(dR, dI, V, Cp, maskf):
    """The forward solve's Anderson pairs turned into pairs of the adjoint iteration: ``(dR', dI')``.

    The Jacobian of the dual update is ``J = rho D_c^{-1} S`` with ``S = pi^T pi`` (symmetric) and
    ``c = pi^T 1 = V C`` the column masses of the plan ``pi_ij = U_i K_ij V_j`` (module docstring,
    step 3: ``(J^T y)_k = rho sum_i pi_ik sum_j pi_ij y_j / c_j``), so ``J^T D_c = D_c J``. A forward
    pair (``dx = dI - dR`` between two iterates, ``dI`` between their images) satisfies
    ``J~ dx = dI`` to first order, ``J~ = P J`` the normalised map's Jacobian. For ``w = Pi_c dx``
    (``Pi_c`` removes the ``c``-weighted mean: ``c^T w = 0``, and ``J~ 1 = 0``), ``u = D_c w`` sums to
    zero (so ``P^T u = u``), ``c^T J w = rho 1^T S w = rho c^T w = 0`` (``S 1 = c``), hence
    ``J w = Pi_c J~ w = Pi_c dI`` and the adjoint map ``F(lam) = b + J^T P^T lam`` moves by
    ``F(lam + u) - F(lam) = J^T u = D_c J w = D_c Pi_c dI``. The pair of the adjoint is thus
    ``(du, dF) = (D_c Pi_c dx, D_c Pi_c dI)``, residual difference ``dF - du``. The forward's last
    pairs span the slow modes of ``J`` (its largest eigenvalues after ``rho``), which are the
    adjoint's slow modes too (``J^T`` is similar to ``J`` by ``D_c``): kept in the adjoint's least
    squares they deflate them. ``dR``, ``dI``: ``(N, P, m, w)``; ``V``, ``Cp``: the certifying
    sweep's products (:func:`_sweep_lean`), ``maskf`` the prefixes' mask ``(P, w)``.
    """
    mk = maskf[None, :, None, :]
    c = (V * Cp * maskf)[:, :, None, :]
    total = c.sum(-1, keepdim=True).clamp_(min=torch.finfo(c.dtype).tiny)

    def weighted(z):
        return (z - (z * c).sum(-1, keepdim=True) / total).mul_(mk).mul_(c)

    du = weighted(dI - dR)
    dF = weighted(dI)
    return dF - du, dF


def _project(lam, P):
    """``P^T lam`` for the normalisation ``G~ = G - G_p 1`` (adjoint of the quotient map):
    the sum of each prefix's entries is taken off its last entry (module docstring, step 2)."""
    total = lam.sum(-1, keepdim=True)
    idx = P.expand(lam.shape[:-1])[..., None]
    return lam.scatter_add(-1, idx, -total)


def _backward(grad, A, gstar, K, rho, tol, chunk, solver="auto", saved=None, pairs=None):
    """The implicit gradient ``ds`` for ``grad = dL/dA`` (all (N, T, T)), kernel path.

    With ``saved = (V, U, C)`` from the forward pass (``solver="anderson"``), the Jacobian is
    taken at the point whose image certified ``G*`` (within ``tol`` of the fixed point, as
    ``G*`` is) instead of sweeping once more at ``G*``, and the adjoint's last products are
    those of the sweep that certified ``lambda`` (within its tolerance, like ``lambda``).
    """

    N, T, _ = A.shape
    dtype = A.dtype
    thr, max_iter = _thresholds(rho, tol, dtype)
    ds = torch.zeros_like(A)
    ar = torch.arange(T, device=A.device)
    for b, (p0, p1) in enumerate(_blocks(T, N, chunk)):
        w = p1
        P = ar[p0:p1]
        Kc = K[:, :w, :w]
        maskf = (ar[:w][None, :] <= P[:, None]).to(dtype)
        offf = 1.0 - maskf
        if saved is None:
            _, V, R, U, C = _sweep(gstar[:, p0:p1, :w], Kc, maskf, offf, rho, P)
        else:
            V, U, C = (t[:, p0:p1, :w] for t in saved)
        a = A[:, p0:p1, :w]
        ga = grad[:, p0:p1, :w] * maskf
        # direct part: A_pj = K_pj V_pj / R_pp is a softmax of s_pj + g_j over j <= p
        direct = a * (ga - (ga * a).sum(-1, keepdim=True))
        ds[:, p0:p1, :w] += direct
        if rho == 0.0:
            continue
        # l1 norm per prefix: J~^T is an l1 rho-contraction on sum-zero vectors (module docstring, step 2)
        bscale = direct.abs().sum(-1).amax(-1, keepdim=True).clamp(min=torch.finfo(dtype).tiny)
        keep = saved is not None
        pinned = None
        if keep:
            # the accelerated route's products (_sweep_lean: C' = C + offf, V unmasked): the same
            # J^T y with fewer passes; the projection P^T lam = lam - (sum lam) e_p is folded into
            # the scaling by -rho / C (the correction lands on entry p alone)
            nCinv_all = (maskf / C).mul_(-rho)

            def narrow(sel, nCinv_all=nCinv_all, Kc=Kc, U=U, V=V, direct=direct, P=P):
                # the adjoint step of the problems sel (N, r) of the block (all of them for sel = None)
                if sel is None:
                    nCinv, Us, Vs, bs, idx = nCinv_all, U, V, direct, P.expand(N, -1)[..., None]
                else:
                    nCinv, Us, Vs, bs = (_take(t, sel) for t in (nCinv_all, U, V, direct))
                    idx = P[sel][..., None]
                nCp = nCinv.gather(-1, idx)
                nU = -Us

                def sub_step(y):
                    Cb = y * nCinv
                    Cb.scatter_add_(-1, idx, y.sum(-1, keepdim=True).neg_().mul_(nCp))
                    Rb = _times_kt(Cb, Kc).mul_(nU).mul_(Us)  # Ub U is of order one: U^2 alone may overflow
                    return torch.addcmul(bs, _times_k(Rb, Kc), Vs), (Cb, Rb)

                return sub_step

            step = narrow(None)
            if pairs is not None and pairs[b] is not None and _memory(rho, w, solver, adjoint=True) > 0:
                pinned = _adjoint_pairs(*(h.to(dtype) for h in pairs[b]), V, C, maskf)
        else:
            narrow = None
            Cinv = maskf / (C + offf)

            def adjoint(lam, Cinv=Cinv, Kc=Kc, U=U, P=P):
                Cb = -rho * _project(lam, P) * Cinv
                Ub = _times_kt(Cb, Kc)
                Rb = (Ub * U).mul_(U).neg_()  # Ub U is of order one: U^2 alone may overflow
                return Cb, Rb

            def step(y, adjoint=adjoint, Kc=Kc, V=V, direct=direct):
                Cb, Rb = adjoint(y)
                return direct + _times_k(Rb, Kc) * V

        out = _fixed_point(
            step,
            direct,
            lambda img, rn, bscale=bscale: thr * torch.maximum(bscale.expand_as(rn), img.abs().sum(-1)),
            max_iter=max_iter,
            memory=_memory(rho, w, solver, adjoint=True),
            norm="l1",
            what=f"adjoint of prefixes {p0}..{p1 - 1}",
            aux=keep,
            pinned=pinned,
            lean=_lean(rho, solver),
            narrow=narrow,
        )
        Cb, Rb = out[2] if keep else adjoint(out[0])
        # dG/dK contracted with lambda: K enters R = V K^T and C = U K
        # only the lower triangle of Kbar meets a non-zero K_ij: row tiles [i0, i1) up to column i1
        RbT, UT = Rb.transpose(1, 2), U.transpose(1, 2)
        for i0 in range(0, w, _TILE):
            i1 = min(w, i0 + _TILE)
            Kbar = torch.bmm(RbT[:, i0:i1], V[..., :i1]) + torch.bmm(UT[:, i0:i1], Cb[..., :i1])
            ds[:, i0:i1, :i1] += Kbar * Kc[:, i0:i1, :i1]
    return ds


class _KernelRange(Exception):
    """The kernel path left the floating-point range; the log-domain path takes over."""


def _log_groups(T, N):
    # prefixes per group: the (N, c, w, w) log-domain arrays stay within _CHUNK_ELEMENTS
    c = max(1, _CHUNK_ELEMENTS // max(1, N * T * T))
    return [(p0, min(T, p0 + c)) for p0 in range(0, T, c)]


def _log_parts(S, x, P, rho):
    """Log-domain sweep of a group of prefixes: ``(G(x), log plan)`` with ``S`` (N, w, w),
    ``x`` (N, c, w) (0 outside each prefix); the plan of prefix ``p`` is
    ``exp(f_i + s_ij + g_j)`` on ``j <= i <= p`` (``-inf`` elsewhere)."""
    w = S.shape[-1]
    ar = torch.arange(w, device=S.device)
    inside = ar[None, :] <= P[:, None]  # (c, w): row or column within the prefix
    xm = x.masked_fill(~inside, float("-inf"))
    L = S[:, None, :, :] + xm[:, :, None, :]  # (N, c, i, j)
    f = -torch.logsumexp(L, dim=-1)
    f = f.masked_fill(~inside, float("-inf"))  # rows beyond the prefix take no part
    logplan = L + f[..., :, None]
    g = -rho * torch.logsumexp(S[:, None, :, :] + f[..., :, None], dim=-2)
    g = g.masked_fill(~inside, 0.0)
    g = (g - g.gather(-1, P.expand(g.shape[:-1])[..., None])).masked_fill(~inside, 0.0)
    return g, logplan.nan_to_num(nan=float("-inf"))


def _solve_log(s, rho, tol, solver="auto"):
    """Forward solve in the log domain (float64; nothing can overflow): ``(A, G*, None, sweeps)``.

    The same normalised dual update as the kernel path, each log-sum-exp evaluated with its
    maximum factored out, on groups of prefixes whose ``(c, w, w)`` arrays stay bounded.
    """
    N, T, _ = s.shape
    tri = torch.ones(T, T, dtype=torch.bool, device=s.device).tril()
    S = s.masked_fill(~tri, float("-inf"))
    S = S - S.amax(-1, keepdim=True)
    thr, max_iter = _thresholds(rho, tol, s.dtype)
    A = torch.zeros_like(s)
    gstar = torch.zeros_like(s)
    ar = torch.arange(T, device=s.device)
    warm = None
    sweeps = 0
    for p0, p1 in _log_groups(T, N):
        w = p1
        P = ar[p0:p1]
        Sc = S[:, :w, :w]
        inside = ar[:w][None, :] <= P[:, None]
        x = torch.zeros(N, p1 - p0, w, dtype=s.dtype, device=s.device)
        if warm is not None:
            k = warm.shape[-1]
            x[:, :, :k] = warm[:, None, :]
            x = x.masked_fill(~inside, 0.0)
        x, k = _fixed_point(
            lambda y, Sc=Sc, P=P: _log_parts(Sc, y, P, rho)[0],
            x,
            lambda img, rn: thr * img.abs().amax(-1).clamp(min=1.0),
            max_iter=max_iter,
            memory=_memory(rho, w, solver),
            norm="osc",
            what=f"prefixes {p0}..{p1 - 1}",
            lean=_lean(rho, solver),
        )
        sweeps += k
        logits = (Sc[:, P, :] + x).masked_fill(~inside, float("-inf"))
        A[:, p0:p1, :w] = torch.softmax(logits, dim=-1)
        gstar[:, p0:p1, :w] = x
        warm = x[:, -1, :]
    return A, gstar, None, sweeps


def _backward_log(grad, A, gstar, rho, tol, s, solver="auto"):
    """The implicit gradient in plan form (log-domain path).

    With the plan ``pi`` of a prefix (rows summing to one) and its column-normalised form
    ``Q_ij = pi_ij / sum_k pi_kj``, the products of the kernel path read (module docstring,
    step 3, with ``U_i K_ij V_j = pi_ij`` and ``C_j V_j = sum_i pi_ij``):
    ``J^T y = rho pi^T (Q y)`` and ``((dG/ds)^T y)_ij = rho (pi_ij (Q y)_i - Q_ij y_j)``, with
    ``y`` the projected adjoint; every factor is at most one in size, so nothing overflows.
    """
    N, T, _ = s.shape
    dtype = s.dtype
    tri = torch.ones(T, T, dtype=torch.bool, device=s.device).tril()
    S = s.masked_fill(~tri, float("-inf"))
    S = S - S.amax(-1, keepdim=True)
    thr, max_iter = _thresholds(rho, tol, dtype)
    ds = torch.zeros_like(s)
    ar = torch.arange(T, device=s.device)
    for p0, p1 in _log_groups(T, N):
        w = p1
        P = ar[p0:p1]
        Sc = S[:, :w, :w]
        inside = ar[:w][None, :] <= P[:, None]
        a = A[:, p0:p1, :w]
        ga = grad[:, p0:p1, :w].masked_fill(~inside, 0.0)
        direct = a * (ga - (ga * a).sum(-1, keepdim=True))
        ds[:, p0:p1, :w] += direct
        if rho == 0.0:
            continue
        _, logplan = _log_parts(Sc, gstar[:, p0:p1, :w], P, rho)
        pi = torch.exp(logplan)  # (N, c, i, j)
        Q = torch.exp(logplan - torch.logsumexp(logplan, dim=-2, keepdim=True).nan_to_num(neginf=0.0))

        def adjoint(lam, P=P, Q=Q):
            y = _project(lam, P)
            return y, (Q @ y[..., None])[..., 0]

        bscale = direct.abs().sum(-1).amax(-1, keepdim=True).clamp(min=torch.finfo(dtype).tiny)
        lam, _ = _fixed_point(
            lambda y, adjoint=adjoint, pi=pi, direct=direct: direct
            + rho * (pi.transpose(-1, -2) @ adjoint(y)[1][..., None])[..., 0],
            direct,
            lambda img, rn, bscale=bscale: thr * torch.maximum(bscale.expand_as(rn), img.abs().sum(-1)),
            max_iter=max_iter,
            memory=_memory(rho, w, solver, adjoint=True),
            norm="l1",
            what=f"adjoint of prefixes {p0}..{p1 - 1}",
            lean=_lean(rho, solver),
        )
        y, Qy = adjoint(lam)
        ds[:, :w, :w] += rho * (pi * Qy[..., :, None] - Q * y[..., None, :]).sum(1)
    return ds


class _NoSecondDerivative(torch.autograd.Function):
    """The identity on a gradient of :func:`causal_ot_attention`, tied to the incoming gradient (so that a second
    derivative reaches it) and refusing to be differentiated."""

    @staticmethod
    def forward(ctx, value, anchor):
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("causal_ot_attention supports first derivatives only: its backward pass solves the adjoint "
                           "system without recording a graph, so a second derivative (double backward) is refused")


class _CausalOT(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=None)
    def forward(ctx, scores, rho, tol, chunk, solver):
        shape = scores.shape
        T = shape[-1]
        s = scores.detach().reshape(-1, T, T)
        work = torch.float64 if s.dtype == torch.float64 else torch.float32
        path = "kernel"
        if T > 0:
            tri = torch.ones(T, T, dtype=torch.bool, device=s.device).tril()
            lo = s.masked_fill(~tri, float("inf")).amin(dim=(-1, -2))
            hi = s.masked_fill(~tri, float("-inf")).amax(dim=(-1, -2))
            spread = float((hi - lo).max())
            if work == torch.float32 and spread > _FLOAT32_SPREAD:
                work = torch.float64
            if spread > _FLOAT64_SPREAD:
                path = "log"
        with torch.autocast(device_type=s.device.type, enabled=False):  # the fixed point never runs in bf16
            while path == "kernel":
                try:
                    A, gstar, K, sweeps, saved = _solve(s.to(work), rho, tol, chunk, solver, ctx.needs_input_grad[0],
                                                        pin=scores.dtype == torch.float64)
                    break
                except _KernelRange:
                    # duals beyond exp's range: float64 (range 700), then the log domain
                    if work == torch.float32:
                        work = torch.float64
                    else:
                        path = "log"
            if path == "log":
                # a spread beyond the float64 kernel's range, or duals beyond exp's: exact log domain
                s = s.to(torch.float64)
                A, gstar, _, sweeps = _solve_log(s, rho, tol, solver)
                K = s
                saved = None
        ctx.pairs = None
        if saved is None:
            ctx.save_for_backward(A, gstar, K)
        else:  # the backward needs (V, U, C), not G*; the forward's Anderson pairs (a list per block) where kept
            ctx.save_for_backward(A, None, K, *saved[:3])
            ctx.pairs = saved[3] if len(saved) > 3 else None
        ctx.rho, ctx.tol, ctx.chunk, ctx.shape, ctx.in_dtype = rho, tol, chunk, shape, scores.dtype
        ctx.solver = solver
        ctx.sweeps, ctx.path = sweeps, path
        return A.to(scores.dtype).reshape(shape)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        if torch.is_grad_enabled():
            # create_graph=True: the adjoint solve records no usable graph (differentiating the gradient again gave
            # silently wrong values), so it runs without one and its result carries a node that refuses a second
            # derivative by name; a first derivative is unchanged. Not torch's once_differentiable: its error node
            # is not linked to the scores, so grad(g, scores) reports them unused (and allow_unused=True gives None)
            with torch.no_grad():
                out = _CausalOT._adjoint(ctx, grad)
            return (_NoSecondDerivative.apply(out[0], grad),) + tuple(out[1:])
        return _CausalOT._adjoint(ctx, grad)

    @staticmethod
    def _adjoint(ctx, grad):
        A, gstar, K, *saved = ctx.saved_tensors
        T = ctx.shape[-1]
        g = grad.reshape(-1, T, T).to(A.dtype)
        with torch.autocast(device_type=A.device.type, enabled=False):
            if ctx.path == "log":  # K holds the scores (float64)
                ds = _backward_log(g, A, gstar, ctx.rho, ctx.tol, K, ctx.solver)
            else:
                ds = _backward(g, A, gstar, K, ctx.rho, ctx.tol, ctx.chunk, ctx.solver, tuple(saved) or None, ctx.pairs)
        return ds.to(ctx.in_dtype).reshape(ctx.shape), None, None, None, None


def causal_ot_attention(scores, rho, *, tol=None, chunk=_CHUNK, solver="auto"):
    """Prefix-consistent causal OT attention of ``scores``, differentiable.

    Parameters
    ----------
    scores : Tensor, shape (..., T, T)
        Scores (already scaled, bias included); only the lower triangle is read and it must
        be finite. float32, bfloat16 or float64.
    rho : float
        Balancing strength in [0, 1); ``rho = 0`` is causal softmax.
    tol : float, optional
        Accuracy (oscillation seminorm) of the column duals of every prefix (and of the adjoint, relative
        to its size). Default :func:`default_tol` of the fixed point's dtype.
    chunk : int
        Prefixes solved together (working memory ``O(batch * chunk * T)`` plus the
        ``O(batch * T^2)`` kernel, duals and output).
    solver : {"auto", "plain", "anderson"}
        ``"auto"``: below ``rho = 0.6``, for ``T <= 512`` or off the CPU, the plain iteration
        (safeguarded Anderson mixing, memory 3, on blocks wider than 512 prefixes),
        bit-identical to earlier releases; the route of ``"anderson"`` from 0.6 on, and on the
        CPU for ``T > 512`` (where its host-read mixing loop costs no synchronisation). ``"anderson"``: safeguarded Anderson mixing
        wherever it pays (memory 2 on blocks wider than 512 below ``rho = 0.6``, 3 up to 0.9,
        6 beyond) and a backward pass that reuses the certifying sweeps' products (two more
        ``T x T`` arrays saved). ``"plain"``: the plain iteration everywhere. Every solver
        certifies the same tolerance (module docstring); in float32 that tolerance is floored at
        about ``256 eps / (1 - rho)`` (3e-3 at ``rho = 0.99``), and two solvers may differ by up to
        that much there (measured 4.3e-4), either one the closer to the float64 answer.

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
        ``rho`` outside [0, 1), ``tol`` not positive, ``solver`` unknown, non-finite scores, or a non-square
        input (a score spread beyond 600 takes the log-domain path, module docstring).
    ConvergenceError
        A prefix (or its adjoint) did not converge: with ``solver="plain"``, the plain iteration ran out of
        sweeps (the message gives its measured rate per sweep and the sweeps it lacked); with the accelerated
        route, the plain iteration it falls back to did too (the accelerated failure is chained as the cause).
    """
    rho = check_rho(rho)
    if not isinstance(scores, torch.Tensor) or scores.ndim < 2 or scores.shape[-1] != scores.shape[-2]:
        raise DomainError("scores", getattr(scores, "shape", type(scores).__name__), "a tensor of shape (..., T, T)")
    if scores.dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        raise DomainError("scores", scores.dtype, "float32, bfloat16, float16 or float64")
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise DomainError("chunk", chunk, "a positive integer")
    if not isinstance(solver, str) or solver not in _SOLVERS:
        raise DomainError("solver", solver, "one of " + ", ".join(map(repr, _SOLVERS)))
    work = torch.float64 if scores.dtype == torch.float64 else torch.float32
    if tol is None:
        tol = default_tol(work)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (tol > 0 and math.isfinite(tol)):
        raise DomainError("tol", tol, "a finite positive number")
    T = scores.shape[-1]
    if T == 0 or scores.numel() == 0:
        return scores.clone()
    if solver == "auto" and T > _MIX_WIDTH and scores.device.type == "cpu":
        # the committed runs (T <= 512, or on an accelerator) keep their iteration bit for bit; wider inputs on
        # the CPU take the faster accelerated route (bench/bench_ot_attention.py)
        solver = "anderson"
    tri = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()
    low = scores.detach()[..., tri]
    if not bool(torch.isfinite(low).all()):
        raise DomainError("scores", "non-finite entries", "finite scores on and below the diagonal")
    from ..limits import check_allocation

    # kernel, duals and output of the whole batch, plus the block working arrays; the accelerated route keeps
    # three more T x T arrays for the backward (the certifying sweep's products) when a gradient is wanted
    grad = scores.requires_grad and torch.is_grad_enabled()
    arrays = 4 + (3 if grad and _lean(float(rho), solver) else 0)
    if grad and _pinning(float(rho), solver, scores.device, scores.dtype):
        # the forward's last m + 1 pairs for the adjoint: 2 (m + 1) lower triangles in half the working precision
        arrays += math.ceil((_memory(float(rho), T, solver) + 1) / 2)
    check_allocation(arrays * scores.numel() * 8, "scores", tuple(scores.shape))
    return _CausalOT.apply(scores, float(rho), float(tol), int(chunk), solver)
