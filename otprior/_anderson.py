"""Batched, safeguarded Anderson acceleration for contractions.

The fixed-point maps of this package (the dual update of the causal OT operator,
Theorem 1 of ``proofs/contraction.md``) are rho-contractions in the sup norm and, on
the quotient by constants, in the oscillation seminorm ``osc(x) = max x - min x``. For a
q-contraction ``G``, ``||x - x*|| <= ||G(x) - x|| / (1 - q)``, so stopping when the
residual is at most ``tol * (1 - q)`` certifies ``||x - x*|| <= tol``. Anderson mixing
(type II, Walker & Ni 2011) only chooses the points at which ``G`` is evaluated; the
certificate is computed at the returned point, so acceleration never weakens it.

Safeguards: the least-squares problem is solved on unit-normalised differences with a
relative Tikhonov term; a problem whose residual has not improved on its best for
``2 * memory`` iterations, or jumped by 100x, restarts its memory with a plain step;
non-finite extrapolations are replaced by the plain step.
"""

from __future__ import annotations

import numpy as np

from ._validation import ConvergenceError


def anderson_memory(rho: float) -> int:
    """Anderson memory chosen by the contraction factor ``rho``.

    The slow modes of the dual update contract at rates close to ``rho``; mixing
    resolves about one mode per stored difference, and more modes come close to one as
    ``rho -> 1``, but a long memory makes the least-squares problem ill-conditioned and
    costs a product per stored difference. Measured on the constant-score prior and the
    operator (``bench/bench_ot.py``): 3 below 0.5, 6 up to 0.9, 10 beyond (16 and 30 were
    slower at ``rho = 0.9995``).
    """
    if rho < 0.5:
        return 3
    if rho < 0.9:
        return 6
    return 10


def _norm(res, seminorm):
    if seminorm == "osc":
        return np.max(res, axis=1) - np.min(res, axis=1)
    return np.max(np.abs(res), axis=1)


def anderson_solve(
    G, x0, threshold, *, max_iter, memory=6, accelerate=True, history=False, seminorm="sup", floor=None
):
    """Solve ``x = G(x)`` for a batch of independent problems.

    Parameters
    ----------
    G : callable
        ``G(x, rows)`` maps the iterates ``x`` (shape ``(b, m)``) of the problems whose
        batch indices are ``rows`` to their images; non-finite images are allowed and
        reported as failures (``ConvergenceError``).
    x0 : ndarray, shape (B, m)
    threshold : float or ndarray of shape (B,)
        Stop a problem when its residual is at most ``threshold``.
    max_iter : int
    memory : int
        Number of past differences in the Anderson least-squares problem.
    accelerate : bool
        ``False`` gives the plain iteration ``x <- G(x)``.
    history : bool
        Also return the residual of every iteration (batch of one only).
    seminorm : {"sup", "osc"}
        How the residual ``G(x) - x`` is measured.
    floor : callable, optional
        ``floor(img)`` gives per problem the rounding level of one evaluation of ``G``;
        the stopping threshold is ``max(threshold, floor)`` (the residual cannot be
        driven below rounding). The residual reached is returned, so the caller
        reports the certificate actually obtained.

    Returns
    -------
    x : ndarray, shape (B, m)
        ``G`` evaluated at the last iterate of each problem.
    info : dict
        ``iterations`` (per problem), ``residual`` (at the returned point's
        predecessor: the certificate), and ``history`` when requested.

    Raises
    ------
    ConvergenceError
        Some problem did not reach its threshold, or its map produced non-finite values;
        ``partial`` holds the last iterates.
    """
    x = np.array(x0, dtype=float, copy=True)
    batch, width = x.shape
    threshold = np.array(np.broadcast_to(np.asarray(threshold, dtype=float), (batch,)))
    out = np.array(x, copy=True)
    iterations = np.zeros(batch, dtype=int)
    residual = np.full(batch, np.inf)
    failed = np.zeros(batch, dtype=bool)
    best = np.full(batch, np.inf)
    stale = np.zeros(batch, dtype=int)
    trace = []
    rows = np.arange(batch)
    memory = max(1, int(memory))
    d_res = np.zeros((batch, memory, width)) if accelerate else None
    d_img = np.zeros((batch, memory, width)) if accelerate else None
    count = np.zeros(batch, dtype=int)  # differences stored per problem
    prev_res = prev_img = None
    for k in range(1, max_iter + 1):
        img = G(x, rows)
        res = img - x
        finite = np.all(np.isfinite(img), axis=1) & np.all(np.isfinite(x), axis=1)
        with np.errstate(invalid="ignore"):
            rn = np.where(finite, _norm(np.where(finite[:, None], res, 0.0), seminorm), np.inf)
        if history:
            trace.append(float(rn[0]) if rn.size else 0.0)
        iterations[rows] = k
        residual[rows] = rn
        thr = threshold[rows]
        if floor is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                thr = np.maximum(thr, np.where(finite, floor(np.where(finite[:, None], img, 0.0)), 0.0))
        done = (rn <= thr) | ~finite
        out[rows[done]] = np.where(finite[done, None], img[done], x[done])
        failed[rows[~finite]] = True
        keep = ~done
        if not keep.any():
            rows = rows[:0]
            break
        improved = rn < best[rows]
        stale[rows] = np.where(improved, 0, stale[rows] + 1)
        jumped = rn > 1e2 * best[rows]
        best[rows] = np.minimum(best[rows], rn)
        restart = jumped | (stale[rows] > 2 * memory)
        if accelerate and prev_res is not None:
            slot = count[rows] % memory
            idx = np.arange(rows.size)
            d_res[idx, slot] = res - prev_res
            d_img[idx, slot] = img - prev_img
            count[rows] += 1
            if restart.any():
                d_res[restart] = 0.0
                d_img[restart] = 0.0
                count[rows[restart]] = 0
                stale[rows[restart]] = 0
        if not keep.all():
            sel = np.flatnonzero(keep)
            rows = rows[sel]
            x, img, res, restart = x[sel], img[sel], res[sel], restart[sel]
            if accelerate:
                d_res, d_img = d_res[sel], d_img[sel]
        prev_res, prev_img = res, img
        used = int(min(count[rows].max(initial=0), memory)) if accelerate else 0
        if used:
            Dr, Dg = d_res[:, :used], d_img[:, :used]
            scale = np.sqrt(np.sum(Dr * Dr, axis=2))  # (b, used)
            ok = scale > 0
            inv = np.where(ok, 1.0 / np.where(ok, scale, 1.0), 0.0)
            Dr_n = Dr * inv[..., None]
            Dg_n = Dg * inv[..., None]
            gram = Dr_n @ Dr_n.transpose(0, 2, 1)
            gram += (1e-10 + np.where(ok, 0.0, 1.0))[:, :, None] * np.eye(used)[None]
            gamma = np.linalg.solve(gram, Dr_n @ res[..., None])
            x = img - (Dg_n.transpose(0, 2, 1) @ gamma)[..., 0]
            bad = ~np.all(np.isfinite(x), axis=1) | restart
            x[bad] = img[bad]
        else:
            x = img
    if rows.size or failed.any():
        out[rows] = x
        nbad = rows.size + int(failed.sum())
        raise ConvergenceError(
            f"{nbad} of {batch} problems did not reach the tolerance in max_iter={max_iter} iterations "
            f"or produced non-finite values (largest residual {np.max(residual[rows], initial=0.0):.3e}, "
            f"threshold {np.min(threshold, initial=np.inf):.3e})",
            partial=out,
        )
    info = {"iterations": iterations, "residual": residual, "failed": failed}
    if history:
        info["history"] = np.array(trace)
    return out, info
