"""Batched, safeguarded Anderson acceleration for contractions.

The fixed-point maps of this package (the dual update of the causal OT operator,
Theorem 1 of ``proofs/contraction.md``) are rho-contractions in the sup norm and, on
the quotient by constants, in the oscillation seminorm ``osc(x) = max x - min x``. For a
q-contraction ``G``, ``||x - x*|| <= ||G(x) - x|| / (1 - q)``, so stopping when the
residual is at most ``tol * (1 - q)`` certifies ``||x - x*|| <= tol``. Anderson mixing
(type II, Walker & Ni 2011) only chooses the points at which ``G`` is evaluated; the
certificate is computed at the returned point, so acceleration never weakens it.

Safeguard (acceleration can only help). The plain step from an accepted point ``x_k``
goes to ``G(x_k)``. The Anderson candidate ``x_a`` is used instead only if it is finite
and inside the caller's safe range (``bound``); ``G(x_a)`` is then evaluated and ``x_a``
is accepted only if its residual is at most ``10`` times the best accepted residual
``r_best`` of the problem (Anderson residuals are not monotone, and a strict decrease
rejected useful steps: measured on the operator at ``rho = 0.99``, 2.2x more sweeps). A
rejected candidate is discarded; so is the memory of a problem whose best residual has
not improved for ``2 m`` accepted points. Either way the iteration resumes with the plain
step of the last accepted point (the plain trajectory goes on, so near the rounding floor,
where residuals only fluctuate, it dips below the threshold as the plain iteration does),
and Anderson is paused for ``2, 4, 8, ...`` (at most 32) plain steps after successive
rejections. Hence a
candidate that overflows or leaves the safe range is never a failure of the problem: a
problem fails only where a plain step from an accepted point fails (non-finite image,
safe range left) or when the sweep budget runs out. Every accepted residual is at most
10 times the best, and the answer is certified at its own point.

Stall (where the caller gives the contraction factor ``rate``). Every ``W`` sweeps
(``W = max_iter // 4``, at least ``8 m``) a problem whose best residual ``r_b`` shrank by less
than ``rate ** W`` over the last ``W`` sweeps (slower than the plain iteration is guaranteed to
go; no new best at all is the extreme case) stops mixing for good if the plain iteration from
its best iterate is guaranteed to finish in the sweeps left: at least
``log(r_b / threshold) / log(1 / rate) + 8`` of them (Theorem 1: each plain step contracts the
residual by ``rate``). It then goes on with plain steps from its best iterate (the next point is
the image of the best accepted point). The window is tied to the budget because mixing at
``rho >= 0.999`` goes through long stretches without a new best and then converges (measured:
1345 accepted points in a run of 1546 sweeps at n = 64, ``rho = 0.999``); a shorter window
stopped such runs, and with the default budget no measured ordinary run lasts the two windows
the first comparison needs. The mixing may still fail where the plain iteration from the start would not: the
callers therefore solve a failed problem again by the plain iteration from the same start with
the same budget (``causal_ot_attention``, ``causal_ot_fixed_point``; Remark 5 of
``proofs/operator_fast_paths.md``), so the accelerated operator fails only where the plain one
does.

The least-squares problem ``min_gamma ||r_k - dR gamma||`` is solved in the small
``m x m`` space: the Gram matrix ``dR^T dR`` of the stored residual differences is kept
up to date (one new row per sweep, ``m`` inner products ``d_j . (r_k - r_{k-1})``, formed as
``d_j . r_k - d_j . r_{k-1}``: the first are the new right-hand side and the second the last
one, so one pass over the stored differences serves both), scaled by its diagonal
(unit-normalised differences, without forming them) with a relative Tikhonov term
``1e-10``, and the candidate is ``G(x_k) - dG gamma``.
"""

from __future__ import annotations

import numpy as np

from ._validation import ConvergenceError

# largest number of plain steps Anderson is paused for after a rejected candidate
_MAX_PAUSE = 32
# a candidate is accepted when its residual is at most this factor times the best so far
_ACCEPT = 10.0
# the stall rule's window: a quarter of the budget, and at least this many sweeps times the memory (module
# docstring; mixing at rho >= 0.999 goes through long stretches without a new best residual and then converges,
# measured up to 1345 sweeps at n = 64, rho = 0.999, so a window shorter than the budget's would stop it)
_STALL = 8
_STALL_BUDGET = 4
# halvings of a rejected candidate towards the plain step before it is discarded (``backtrack``)
_BACKTRACK = 8
# histories of at least this many doubles are kept in the caller's workspace (smaller ones are
# served by the allocator without fresh pages)
_REUSE = 1 << 18


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


def _gamma(gram, rhs, nstored):
    """Solve the scaled, regularised ``m x m`` normal equations of the stored slots.

    Slots ``j >= nstored`` (and slots whose difference is zero) get ``gamma_j = 0``.
    """
    b, m, _ = gram.shape
    diag = np.diagonal(gram, axis1=1, axis2=2)
    if b and not (nstored < m).any() and (diag > 0).all() and np.isfinite(diag).all():
        # every slot valid (the usual case): the operations below without the masks, so the same
        # numbers (the masks select everything, and adding zero off the diagonal changes nothing;
        # Remark 4, proofs/operator_fast_paths.md)
        inv = 1.0 / np.sqrt(diag)
        A = gram * inv[:, :, None] * inv[:, None, :]
        idx = np.arange(m)
        A[:, idx, idx] += 1e-10
        return np.linalg.solve(A, (rhs * inv)[..., None])[..., 0] * inv
    valid = (np.arange(m)[None, :] < nstored[:, None]) & (diag > 0) & np.isfinite(diag)
    inv = np.where(valid, 1.0 / np.sqrt(np.where(valid, diag, 1.0)), 0.0)
    both = valid[:, :, None] & valid[:, None, :]
    A = np.where(both, gram * inv[:, :, None] * inv[:, None, :], 0.0)
    # relative Tikhonov term on the unit-normalised problem; identity on unused slots
    A += np.where(valid, 1e-10, 1.0)[:, :, None] * np.eye(m)[None]
    y = np.linalg.solve(A, (np.where(valid, rhs * inv, 0.0))[..., None])[..., 0]
    return y * inv


def _drop(a, holes, movers, size):
    """The first ``size`` rows of ``a`` after the rows ``movers`` are copied onto the rows
    ``holes`` (``holes < size <= movers``): only the moved rows are copied. Applying it twice
    to one array (aliases) gives the same result, since the rows ``movers`` are not written."""
    if holes.size:
        a[holes] = a[movers]
    return a[:size]


def anderson_solve(G, x0, threshold, *, max_iter, memory=6, accelerate=True, history=False, seminorm="sup",
                   floor=None, bound=None, workspace=None, images_last=False, history32=False, first_image=None,
                   backtrack=False, rate=None, certified=None):
    """:func:`_anderson_solve` with overflow and invalid operations of the mixing's products
    silent: a candidate whose products overflow is rejected by the safeguard (non-finite),
    exactly as the plain step would be, so the warning would report nothing the result does
    not already say (the plain iteration issues none)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _anderson_solve(G, x0, threshold, max_iter=max_iter, memory=memory, accelerate=accelerate,
                               history=history, seminorm=seminorm, floor=floor, bound=bound, workspace=workspace,
                               images_last=images_last, history32=history32, first_image=first_image,
                               backtrack=backtrack, rate=rate, certified=certified)


def _anderson_solve(
    G,
    x0,
    threshold,
    *,
    max_iter,
    memory=6,
    accelerate=True,
    history=False,
    seminorm="sup",
    floor=None,
    bound=None,
    workspace=None,
    images_last=False,
    history32=False,
    first_image=None,
    backtrack=False,
    rate=None,
    certified=None,
):
    """Solve ``x = G(x)`` for a batch of independent problems.

    Parameters
    ----------
    G : callable
        ``G(x, rows)`` maps the iterates ``x`` (shape ``(b, m)``) of the problems whose
        batch indices are ``rows`` to their images; non-finite images are allowed.
    x0 : ndarray, shape (B, m)
    threshold : float or ndarray of shape (B,)
        Stop a problem when its residual is at most ``threshold``.
    max_iter : int
        Evaluations of ``G`` per problem (rejected Anderson candidates included).
    memory : int
        Number of past differences in the Anderson least-squares problem.
    accelerate : bool
        ``False`` gives the plain iteration ``x <- G(x)``.
    history : bool
        Also return the residual of every accepted point (batch of one only).
    seminorm : {"sup", "osc"}
        How the residual ``G(x) - x`` is measured.
    floor : callable, optional
        ``floor(amax)`` gives per problem the rounding level of one evaluation of ``G``
        from ``amax = max |G(x)|`` (per problem);
        the stopping threshold is ``max(threshold, floor)`` (the residual cannot be
        driven below rounding). The residual reached is returned, so the caller
        reports the certificate actually obtained.
    bound : float, optional
        Safe range of ``G``: it is evaluated only at points with ``max |x| <= bound``.
        An Anderson candidate outside is replaced by the plain step; a plain image
        outside (that is not already the answer) is a failure of kind ``"range"``.
    workspace : dict, optional
        Owned by the caller and reused across calls (one thread): the memory of the mixing
        is kept there, so that a sequence of solves, largest first, touches fresh memory
        only once (a fresh ``(B, memory, m)`` history costs a page fault per 4 KiB).
    first_image : ndarray, shape (B, m), optional
        ``G(x0)`` computed by the caller (counted as the first evaluation). It is used as the
        first image, but it never stops a problem: the certificate always comes from ``G``.
    images_last : bool
        Store the differences of the images as ``(B, m, memory)`` (the memory index last), so
        that the candidate ``G(x_k) - dG gamma`` is one matrix-vector product per problem
        without a transposed operand. Only the rounding of the candidates differs. With numpy
        2.4 and one BLAS thread the default ``(B, memory, m)`` layout is the faster one (the
        candidate as a row vector times the stored differences, float32, ``B = 128``, width 1024:
        0.12-0.15 ms against 0.32-0.35 ms for ``memory`` 6-10; numpy 1.x measured 1.7 ms against
        0.29 ms), and its differences are written contiguously.

    backtrack : bool
        A rejected candidate ``x_a`` is not discarded at once: the midpoint of it and the plain
        step ``G(x_k)`` of the last accepted point is evaluated as the next candidate, and so on
        (at most 8 halvings, each one evaluation); only then is the memory restarted. Where ``rho``
        is close to one the duals travel far (``|g*|`` grows like ``log 1/(1 - rho)``) while the
        residual shrinks by ``rho`` per plain step, so mixing extrapolates by about
        ``1 / (1 - rho)`` times the step, beyond where the linear model holds; the full candidate is
        rejected and, without this, the iteration mostly goes on with plain steps (measured at
        ``rho = 0.9999``: 28375 sweeps against 2144 at n = 8, N(0, 1) scores).

    rate : float, optional
        Contraction factor of ``G`` in the chosen seminorm (Theorem 1: ``rho``). Enables the stall
        rule (module docstring): a problem whose mixing goes no faster than ``rate`` per sweep over a
        window switches to plain steps from its best iterate, only where ``rate`` guarantees that they
        reach the threshold within the sweeps left. ``None``: no stall rule.

    certified : callable, optional
        ``certified(rn)``, called after each evaluation of ``G`` with the residuals ``rn`` of its
        images (one per problem of that evaluation, as measured by ``seminorm``; ``inf`` where not
        finite), says which problems may stop on it: ``None`` (all of them, as without it) or a
        boolean (one for the batch or one per problem). An image for which it says ``False``
        (computed inexactly by the caller, e.g. with single-precision products) never stops a
        problem, whatever its residual; the problem goes on, and only an image it calls exact can
        certify it. The residuals let the caller choose its next evaluation without measuring them
        again. A plain ``False`` (the whole evaluation inexact) also says that every image of it
        lies within ``bound`` (the caller checked it), so the solver does not measure their size.

    Returns
    -------
    x : ndarray, shape (B, m)
        ``G`` evaluated at the last accepted point of each problem.
    info : dict
        ``iterations`` (evaluations of ``G`` per problem), ``residual`` (at the returned
        point's predecessor: the certificate), ``rejected`` (Anderson candidates
        discarded per problem), ``stalled`` (whether each problem stopped mixing on a stall),
        and ``history`` when requested.

    Raises
    ------
    ConvergenceError
        Some problem failed; the message says which condition for how many problems
        (tolerance not reached after ``max_iter`` sweeps, with the residual reached;
        non-finite values, with the sweep; the safe range left, with the sweep).
        ``partial`` holds the last iterates and ``failures`` maps each kind
        (``"tolerance"``, ``"non-finite"``, ``"range"``) to the batch indices concerned.
    """
    x = np.array(x0, dtype=float, copy=True)
    batch, width = x.shape
    threshold = np.array(np.broadcast_to(np.asarray(threshold, dtype=float), (batch,)))
    out = np.array(x, copy=True)
    iterations = np.zeros(batch, dtype=int)
    residual = np.full(batch, np.inf)
    rejected_total = np.zeros(batch, dtype=int)
    kind = np.full(batch, "", dtype=object)
    at_sweep = np.zeros(batch, dtype=int)
    trace = []
    rows = np.arange(batch)
    m = max(1, int(memory))
    accelerate = bool(accelerate)
    stall_after = max(_STALL * m, max_iter // _STALL_BUDGET)
    osc = seminorm == "osc"
    # state of the active problems, one row each; when problems finish, the rows of the
    # last active problems move into their places (``_drop``), so the state stays compact
    # and only as many rows are copied as problems finish
    trial = np.zeros(batch, dtype=bool)  # x is an Anderson candidate awaiting acceptance
    have_prev = np.zeros(batch, dtype=bool)
    prev_img = np.zeros((batch, width))
    prev_res = np.zeros((batch, width))
    best_rn = np.full(batch, np.inf)
    best_img = np.zeros((batch, width))
    stale = np.zeros(batch, dtype=int)
    mark_rn = np.full(batch, np.inf)  # best residual at the last checkpoint of the stall rule
    plain = np.zeros(batch, dtype=bool)  # stalled: plain steps only, from the best iterate on
    stalled_total = np.zeros(batch, dtype=bool)
    pause = np.zeros(batch, dtype=int)
    rejections = np.zeros(batch, dtype=int)
    depth = np.zeros(batch, dtype=int)  # halvings of the current candidate (backtrack)
    thresholds = threshold.copy()
    hdt = np.float32 if history32 else np.float64
    if accelerate:
        size = batch * m * width
        if workspace is None or size < _REUSE:
            d_res = np.zeros((batch, m, width), dtype=hdt)
            d_img = np.zeros((batch, width, m) if images_last else (batch, m, width), dtype=hdt)
        else:
            key = "anderson32" if history32 else "anderson"
            buf = workspace.get(key)
            fresh = buf is None or buf.size < 2 * size
            if fresh:
                buf = workspace[key] = np.zeros(2 * size, dtype=hdt)
            d_res = buf[:size].reshape(batch, m, width)
            d_img = buf[size : 2 * size].reshape((batch, width, m) if images_last else (batch, m, width))
            # An unused slot enters the products with gamma = 0 (_gamma), so a stale difference of an
            # earlier solve changes nothing if it is finite. Every difference a solve stores is one
            # of points and images within its safe range (x0, accepted images and candidates are all
            # checked against ``bound``): at most 4 bound in magnitude, finite in float32 for
            # bound < 1e18. The buffer is cleared only after a solve that may have stored others
            # (Remark 4, proofs/operator_fast_paths.md).
            if not fresh and not workspace.get(key + "_finite", False):
                d_res.fill(0.0)
                d_img.fill(0.0)
            workspace[key + "_finite"] = bool(bound is not None and bound < 1e18 and np.abs(x).max(initial=0.0) <= bound)
        gram = np.zeros((batch, m, m))
        count = np.zeros(batch, dtype=int)  # differences stored since the last restart
        rhs_prev = np.zeros((batch, m))  # d_res . res at the last sweep, where rhs_ok
        rhs_ok = np.zeros(batch, dtype=bool)
    # the residuals are written into two buffers in turn (the last one is still read as prev_res, the one
    # before is no longer read), and the differences stored by the mixing are formed in a third: the same
    # numbers as fresh arrays, without touching fresh memory every sweep
    res_bufs = (np.empty((batch, width)), np.empty((batch, width)))
    diff_buf = np.empty((batch, width)) if accelerate else None
    for k in range(1, max_iter + 1):
        b = rows.size
        img = G(x, rows) if k > 1 or first_image is None else np.array(first_image, dtype=float)
        res = np.subtract(img, x, out=res_bufs[k & 1][:b])
        with np.errstate(invalid="ignore", over="ignore"):
            hi, lo = res.max(axis=1), res.min(axis=1)
            rn = hi - lo if osc else np.maximum(hi, -lo)
            # x is always finite (x0, checked candidates, accepted images): rn is finite
            # exactly when the image is
            finite = np.isfinite(rn)
            all_finite = bool(finite.all())
            if not all_finite:
                rn = np.where(finite, rn, np.inf)
        exact = certified(rn) if certified is not None and (k > 1 or first_image is None) else None
        # every image inexact, and within the safe range (certified's contract): nothing stops on them and
        # nothing leaves the range, so their size, which only the rounding floor and the range check read, is
        # not measured (the decisions are those the measurement gives)
        inexact = exact is False
        if (floor is not None or bound is not None) and not inexact:
            amax = np.maximum(img.max(axis=1), -img.min(axis=1))
        else:
            amax = None
        iterations[rows] = k
        # --- acceptance of the Anderson candidates (the safeguard) ---
        if trial.any():
            reject = trial & ~(rn <= _ACCEPT * best_rn)
            accepted = ~reject
            any_reject = bool(reject.any())
        else:
            reject = np.zeros(b, dtype=bool)
            accepted = ~reject
            any_reject = False
        if history and b and accepted[0]:
            trace.append(float(rn[0]))
        thr = thresholds
        if floor is not None and not inexact:
            with np.errstate(invalid="ignore", over="ignore"):
                if all_finite:
                    thr = np.maximum(thr, floor(amax))
                else:
                    thr = np.maximum(thr, np.where(finite, floor(np.where(finite, amax, 0.0)), 0.0))
        if inexact:
            done = np.zeros(b, dtype=bool)
        else:
            done = accepted & finite & (rn <= thr)
            if exact is not None:
                done &= exact
        if k == 1 and first_image is not None and done.any():
            # an image not computed by G certifies nothing: a problem it would stop is evaluated by G, which
            # certifies it or not, so that one sweep suffices wherever it does for the plain iteration (rho = 0,
            # or a loose tolerance, with max_iter = 1 failed)
            sub = np.flatnonzero(done)
            gimg = np.asarray(G(x[sub], rows[sub]), dtype=float)
            gres = gimg - x[sub]
            with np.errstate(invalid="ignore", over="ignore"):
                ghi, glo = gres.max(axis=1), gres.min(axis=1)
                grn = ghi - glo if osc else np.maximum(ghi, -glo)
                gthr = np.broadcast_to(thr, done.shape)[sub]
                gam = np.maximum(gimg.max(axis=1), -gimg.min(axis=1))
                if floor is not None:
                    gthr = np.maximum(gthr, floor(np.where(np.isfinite(gam), gam, 0.0)))
            ok = np.isfinite(grn) & (grn <= gthr)
            if certified is not None:
                exact = certified(grn)
                if exact is not None:
                    ok &= exact
            take = sub[ok]
            img[take] = gimg[ok]
            res[take] = gres[ok]
            rn[take] = grn[ok]
            if amax is not None:
                amax[take] = gam[ok]
            done[:] = False
            done[take] = True
        elif k == 1 and first_image is not None:
            done[:] = False
        bad = accepted & ~finite
        if bound is not None and not inexact:
            with np.errstate(invalid="ignore"):
                outside = accepted & finite & ~done & ~(amax <= bound)
        else:
            outside = np.zeros(b, dtype=bool)
        if any_reject:
            residual[rows[accepted]] = rn[accepted]
        else:
            residual[rows] = rn
        any_done = bool(done.any())
        if any_done:
            out[rows[done]] = img[done]
        stop = done | bad | outside
        any_stop = any_done or bool(stop.any())
        if any_stop:
            for mask, name in ((bad, "non-finite"), (outside, "range")):
                if mask.any():
                    kind[rows[mask]] = name
                    at_sweep[rows[mask]] = k
                    out[rows[mask]] = x[mask]
        go = accepted & ~stop  # accepted points that continue
        all_go = not (any_reject or any_stop)
        # --- memory update at the accepted points ---
        if accelerate:
            upd = go & have_prev & ~plain
            ui = np.flatnonzero(upd)
            q = None
            if ui.size:
                us = count[ui] % m
                if ui.size == b and not (us - us[0]).any():
                    # every problem writes the same slot: written in place
                    s = int(us[0])
                    # the differences in float64, then rounded into the slot (the numbers of a subtraction
                    # into the float32 slot itself, which numpy forms the same way, but in one fast pass each)
                    dr = d_res[:, s]
                    tmp = np.subtract(res, prev_res, out=diff_buf[:b])
                    dr[...] = tmp
                    np.subtract(img, prev_img, out=tmp)
                    if images_last:
                        d_img[:, :, s] = tmp
                    else:
                        d_img[:, s] = tmp
                else:
                    dr = res - prev_res
                    d_res[ui, us] = dr[ui]
                    if images_last:
                        d_img[ui, :, us] = img[ui] - prev_img[ui]
                    else:
                        d_img[ui, us] = img[ui] - prev_img[ui]
                # the new row of the Gram matrix: d_j . dr = d_j . res - d_j . prev_res, where
                # d_j . res is the next right-hand side (one pass over the memory serves both)
                # and d_j . prev_res was the last one (the other slots are unchanged since)
                if rhs_ok[ui].all():
                    q = np.matmul(d_res, res.astype(hdt, copy=False)[:, :, None])[:, :, 0].astype(float)
                    col = q - rhs_prev
                    dru = dr if ui.size == b else dr[ui]
                    col[ui, us] = np.einsum("ij,ij->i", dru, dru)
                else:
                    col = np.matmul(d_res, dr.astype(hdt, copy=False)[:, :, None])[:, :, 0]
                gram[ui, us, :] = col[ui]
                gram[ui, :, us] = col[ui]
                count[ui] += 1
        # (arrays are rebound, never written in place: img and res may be shared)
        if all_go:
            prev_img, prev_res = img, res
            have_prev = np.ones(b, dtype=bool)
        else:
            prev_img = np.where(go[:, None], img, prev_img)
            prev_res = np.where(go[:, None], res, prev_res)
            have_prev = have_prev | go
        improved = go & (rn < best_rn)
        if improved.all():
            best_img = img
            best_rn = rn
            stale = np.zeros(b, dtype=int)
        else:
            if improved.any():
                best_img = np.where(improved[:, None], img, best_img)
            best_rn = np.where(improved, rn, best_rn)
            stale = np.where(improved, 0, np.where(go, stale + 1, stale))
        stall = None
        if accelerate:
            # a problem whose best residual has not improved for 2 m accepted points restarts
            restart = go & ~plain & (stale > 2 * m)
            if restart.any():
                reject = reject | restart
                any_reject = True
            if any_reject:
                stale = np.where(reject, 0, stale)
            # the stall rule (module docstring): plain steps from the best iterate (the first is the best image)
            if rate is not None and k % stall_after == 0:
                # a checkpoint: the best residual has shrunk by less than rate ** stall_after since the last
                # one (no faster than the plain iteration is guaranteed to go), and plain steps from the best
                # iterate reach the threshold within the sweeps left, with 8 to spare (Theorem 1: the residual
                # contracts by ``rate`` per plain step)
                with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
                    slow = best_rn > rate**stall_after * mark_rn
                    need = np.log(best_rn / np.maximum(thresholds, 1e-300)) / -np.log(rate) if rate > 0 else 1.0
                stall = go & ~plain & slow & (need + 8 <= max_iter - k)
                mark_rn = best_rn.copy()
                if stall.any():
                    plain = plain | stall
                    stalled_total[rows[stall]] = True
                    reject = reject & ~stall
                    any_reject = bool(reject.any())
                else:
                    stall = None
        # --- rejections: resume with the plain step of the last accepted point (for a
        # restart, the current one): the plain trajectory goes on, as it would without mixing
        x_next = img
        btrack = None
        if backtrack:
            # a rejected candidate x is replaced by the midpoint of the plain step of the last accepted
            # point and x, as a new candidate (at most _BACKTRACK halvings in a row); every such point
            # lies between two points of the safe range (convex), so it is finite and inside it
            if any_reject:
                btrack = reject & trial & (depth < _BACKTRACK)
                if stall is not None:
                    btrack &= ~stall
                if btrack.any():
                    x_next = np.where(btrack[:, None], prev_img + 0.5 * (x - prev_img), img)
                    reject = reject & ~btrack
                    any_reject = bool(reject.any())
                    depth = np.where(btrack, depth + 1, 0)
                else:
                    btrack = None
                    depth[:] = 0
            else:
                depth[:] = 0
        if any_reject:
            x_next = np.where(reject[:, None], prev_img, x_next)
            ri = np.flatnonzero(reject)
            rejected_total[rows[ri]] += 1
            rejections[ri] += 1
            pause[ri] = np.minimum(2 ** np.minimum(rejections[ri], 5), _MAX_PAUSE)
            if accelerate:
                count[ri] = 0
        if stall is not None:
            x_next = np.where(stall[:, None], best_img, x_next)
        new_trial = np.zeros(b, dtype=bool)
        if accelerate:
            nstored = np.minimum(count, m)
            want = go & ~reject & ~plain & (pause == 0) & (nstored > 0)
            if want.any():
                if q is None:
                    q = np.matmul(d_res, res.astype(hdt, copy=False)[:, :, None])[:, :, 0].astype(float)
                rhs = q
                rhs_prev = rhs
                gamma = _gamma(gram, rhs, nstored)
                with np.errstate(invalid="ignore", over="ignore"):
                    if images_last:
                        cand = img - np.matmul(d_img, gamma.astype(hdt)[:, :, None])[:, :, 0]
                    else:
                        cand = img - np.matmul(gamma.astype(hdt)[:, None, :], d_img)[:, 0, :]
                    camax = np.maximum(cand.max(axis=1), -cand.min(axis=1))
                    ok = want & np.isfinite(camax)
                    if bound is not None:
                        ok &= camax <= bound
                x_next = cand if ok.all() else np.where(ok[:, None], cand, x_next)
                new_trial = ok
            rhs_ok = want
            step = go & ~new_trial & (pause > 0)
            if step.any():
                pause[step] -= 1
        if btrack is not None:
            new_trial = new_trial | btrack
        trial = new_trial
        x = x_next
        # --- drop the problems that finished or failed ---
        if any_stop:
            keep = ~stop
            b_new = int(keep.sum())
            holes = np.flatnonzero(~keep[:b_new])
            movers = b_new + np.flatnonzero(keep[b_new:])
            rows, thresholds = _drop(rows, holes, movers, b_new), _drop(thresholds, holes, movers, b_new)
            x, trial, have_prev = (_drop(a, holes, movers, b_new) for a in (x, trial, have_prev))
            prev_img, prev_res = _drop(prev_img, holes, movers, b_new), _drop(prev_res, holes, movers, b_new)
            best_img, best_rn = _drop(best_img, holes, movers, b_new), _drop(best_rn, holes, movers, b_new)
            stale, pause, rejections = (_drop(a, holes, movers, b_new) for a in (stale, pause, rejections))
            mark_rn, plain = _drop(mark_rn, holes, movers, b_new), _drop(plain, holes, movers, b_new)
            depth = _drop(depth, holes, movers, b_new)
            if accelerate:
                d_res, d_img = _drop(d_res, holes, movers, b_new), _drop(d_img, holes, movers, b_new)
                gram, count = _drop(gram, holes, movers, b_new), _drop(count, holes, movers, b_new)
                rhs_prev, rhs_ok = _drop(rhs_prev, holes, movers, b_new), _drop(rhs_ok, holes, movers, b_new)
        if not rows.size:
            break
    if rows.size:
        kind[rows] = "tolerance"
        residual[rows] = np.where(have_prev, best_rn, residual[rows])
        # the image of the best accepted point is the best answer available
        out[rows] = np.where(have_prev[:, None], best_img, x)
    failed = kind != ""
    if failed.any():
        failures = {name: np.flatnonzero(kind == name) for name in ("tolerance", "non-finite", "range")}
        parts = []
        sel = failures["tolerance"]
        if sel.size:
            parts.append(
                f"{sel.size} did not reach the tolerance (threshold {np.min(threshold[sel]):.3e}) after "
                f"max_iter={max_iter} sweeps (residual reached {np.max(residual[sel]):.3e} at worst, "
                f"{np.min(residual[sel]):.3e} at best)"
            )
        sel = failures["non-finite"]
        if sel.size:
            parts.append(f"{sel.size} produced non-finite values (first at sweep {int(np.min(at_sweep[sel]))})")
        sel = failures["range"]
        if sel.size:
            parts.append(
                f"{sel.size} left the safe range |x| <= {bound:.3g} (first at sweep {int(np.min(at_sweep[sel]))})"
            )
        err = ConvergenceError(f"{int(failed.sum())} of {batch} problems failed: " + "; ".join(parts), partial=out)
        err.failures = failures
        raise err
    info = {"iterations": iterations, "residual": residual, "rejected": rejected_total, "stalled": stalled_total}
    if history:
        info["history"] = np.array(trace)
    return out, info
