"""Batched Anderson acceleration for sup-norm contractions.

The fixed-point maps of this package (the dual update of the causal OT operator,
Theorem 1 of ``proofs/contraction.md``) are rho-contractions in the sup norm. For a
q-contraction ``G``, ``||x - x*|| <= ||G(x) - x|| / (1 - q)``, so stopping when the
residual is at most ``tol * (1 - q)`` certifies ``||G(x) - x*|| <= q * tol <= tol``.
Anderson mixing (type II, Walker & Ni 2011) only chooses the points at which ``G`` is
evaluated; the certificate is computed at the returned point, so acceleration never
weakens it.
"""

from __future__ import annotations

import numpy as np

from ._validation import ConvergenceError


def anderson_solve(G, x0, threshold, *, max_iter, memory=6, accelerate=True, history=False):
    """Solve ``x = G(x)`` for a batch of independent problems.

    Parameters
    ----------
    G : callable
        ``G(x, rows)`` maps the iterates ``x`` (shape ``(b, m)``) of the problems whose
        batch indices are ``rows`` to their images; non-finite images are allowed and
        reported as failures.
    x0 : ndarray, shape (B, m)
    threshold : float or ndarray of shape (B,)
        Stop a problem when ``max |G(x) - x| <= threshold``.
    max_iter : int
    memory : int
        Number of past differences in the Anderson least-squares problem.
    accelerate : bool
        ``False`` gives the plain iteration ``x <- G(x)``.
    history : bool
        Also return the sup-norm residual of every iteration (batch of one only).

    Returns
    -------
    x : ndarray, shape (B, m)
        ``G`` evaluated at the last iterate of each problem.
    info : dict
        ``iterations`` (per problem), ``residual`` (the certified residual), ``failed``
        (rows whose map produced non-finite values), and ``history`` when requested.
    """
    x = np.array(x0, dtype=float, copy=True)
    batch, width = x.shape
    threshold = np.broadcast_to(np.asarray(threshold, dtype=float), (batch,))
    out = np.array(x, copy=True)
    iterations = np.zeros(batch, dtype=int)
    residual = np.full(batch, np.inf)
    failed = np.zeros(batch, dtype=bool)
    best = np.full(batch, np.inf)
    trace = []
    rows = np.arange(batch)
    # ring buffers of residual and image differences, shape (b, memory, width)
    d_res = np.zeros((batch, memory, width)) if accelerate else None
    d_img = np.zeros((batch, memory, width)) if accelerate else None
    filled = 0
    prev_res = prev_img = None
    for k in range(1, max_iter + 1):
        img = G(x, rows)
        res = img - x
        finite = np.all(np.isfinite(img), axis=1)
        rn = np.where(finite, np.max(np.abs(np.where(finite[:, None], res, 0.0)), axis=1), np.inf)
        if history:
            trace.append(float(rn[0]) if rn.size else 0.0)
        iterations[rows] = k
        residual[rows] = rn
        done = (rn <= threshold[rows]) | ~finite
        out[rows[done]] = np.where(finite[done, None], img[done], x[done])
        failed[rows[~finite]] = True
        keep = ~done
        if not keep.any():
            rows = rows[:0]
            break
        # restart the memory of a problem whose residual jumped (safeguard)
        jumped = rn > 1e2 * best[rows]
        best[rows] = np.minimum(best[rows], rn)
        if accelerate and prev_res is not None:
            slot = filled % memory
            d_res[:, slot] = res - prev_res
            d_img[:, slot] = img - prev_img
            filled += 1
            if jumped.any():
                d_res[jumped] = 0.0
                d_img[jumped] = 0.0
        if not keep.all():
            sel = np.flatnonzero(keep)
            rows = rows[sel]
            x, img, res = x[sel], img[sel], res[sel]
            if accelerate:
                d_res, d_img = d_res[sel], d_img[sel]
        prev_res, prev_img = res, img
        if accelerate and filled:
            used = min(filled, memory)
            Dr, Dg = d_res[:, :used], d_img[:, :used]
            gram = Dr @ Dr.transpose(0, 2, 1)
            scale = np.maximum(np.trace(gram, axis1=1, axis2=2), 1e-300)
            gram += (1e-12 * scale)[:, None, None] * np.eye(used)
            gamma = np.linalg.solve(gram, Dr @ res[..., None])
            x = img - (Dg.transpose(0, 2, 1) @ gamma)[..., 0]
            bad = ~np.all(np.isfinite(x), axis=1)
            x[bad] = img[bad]
        else:
            x = img
    if rows.size:
        out[rows] = x
        raise ConvergenceError(
            f"{rows.size} of {batch} problems did not reach the tolerance in max_iter={max_iter} "
            f"iterations (largest residual {residual[rows].max():.3e}, threshold {threshold[rows].min():.3e})",
            partial=out,
        )
    info = {"iterations": iterations, "residual": residual, "failed": failed}
    if history:
        info["history"] = np.array(trace)
    return out, info
