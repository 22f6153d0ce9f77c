"""The exact prior of the causal OT operator for constant scores, and its dilution.

Theorem 2 (``proofs/constant_score_recurrence.md``). For constant scores the fixed
point on a prefix of length ``t`` is :math:`u_i = 1/\\Phi_i`, :math:`v_j = \\Psi_j^{-\\rho}`
with :math:`\\Phi_i = \\sum_{j\\le i} v_j`, :math:`\\Psi_j = \\sum_{i=j}^{t} u_i`, and the
prior of query ``t`` is :math:`\\pi_t(d) = v_{t-d}/\\Phi_t`. Given :math:`c = \\Phi_t`
the backward recurrence :math:`\\Psi_t = 1/c`, :math:`v_k = \\Psi_k^{-\\rho}`,
:math:`\\Phi_{k-1} = \\Phi_k - v_k`, :math:`\\Psi_{k-1} = \\Psi_k + 1/\\Phi_{k-1}` determines
everything, and ``c`` is the unique root of :math:`\\Phi_0(c) = 0`; a trial ``c`` lies
above the root exactly when every :math:`\\Phi_k`, ``k >= 0``, it produces is positive
(Lemma 2.1 there), which is what the certified route decides in ball arithmetic.

Two routes:

* double precision: the fixed-point equations in logarithms, normalised so that
  :math:`\\log v_t = 0` (the prior does not depend on the scale of ``v``), iterated by
  log-cumulative sums of positive terms (no cancellation, nothing can overflow);
* certified (``dps=``): the recurrence in Arb ball arithmetic (python-flint), the root
  bracketed by the sign test of Lemma 2.1; every entry and every window mass is an
  outward-rounded enclosure.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ._anderson import anderson_memory, anderson_solve
from ._balls import Enclosure, arb_from_float, arb_precision, enclosure_from_arb, enclosure_from_ends
from ._power_sums import power_sum
from ._validation import (
    MACHINE_EPSILON,
    ConvergenceError,
    DomainError,
    PrecisionError,
    check_int,
    check_real,
    check_rho,
    refuse_masked,
)
from .limits import check_allocation
from .scale_invariant import log_normaliser

__all__ = [
    "ot_prior",
    "ot_window_mass",
    "ot_window_law",
    "ot_window_mass_bound",
    "ot_dilution_bound",
    "OTPrior",
    "DilutionBound",
]

_EPS = MACHINE_EPSILON
_MAX_DPS = 2000
# Largest working precision (bits) and largest n * bits of one certified recurrence pass.
_MAX_BITS = 20_000
_MAX_WORK = 4e9
# Total work of one certified computation, counted as the sum over recurrence passes of
# n * bits (about 25 ns per unit on one core at high precision, more at low precision:
# the cap is of the order of ten seconds); checked before each pass, and before starting
# against the smallest number of passes a route needs (at 64 bits: the bits actually needed are
# measured on the way, so a refusal can come after part of the work, never past the cap).
_MAX_TOTAL_WORK = 4e8
# the two-pass window-mass route makes at most 12 passes whatever rho: a larger cap
# there serves large n (n = 1e6 at rho = 0.9 needs about 4e8)
_MAX_MASS_WORK = 1.2e9
_MIN_PASSES = 16
# Largest stated log-error of the double route that is returned as an answer; above it
# the certified recurrence is used, or the call is refused.
_VOUCH_LOG_ERROR = 1e-6
# float64 arrays of length about n held at once by the double route (sweep, Anderson
# history, blocked sums): the allocation is checked against the cap before starting
_ARRAYS_PER_N = 32


def _check_n_allocation(n):
    check_allocation(8 * _ARRAYS_PER_N * (int(n) + math.isqrt(int(n)) + 2), "n", n)


class _Work:
    """Counter of the certified route's work (``n * bits`` per recurrence pass).

    Raises ``PrecisionError`` naming ``n`` and ``rho`` before a pass that would take the
    total past ``_MAX_TOTAL_WORK``; every loop of the certified route thus ends within a
    bounded time, whatever ``n`` and ``rho``.
    """

    def __init__(self, n, rho, cap=_MAX_TOTAL_WORK):
        self.n, self.rho, self.done, self.cap = n, rho, 0.0, cap

    def check(self, bits, passes=1):
        need = self.done + passes * self.n * float(bits)
        if need > self.cap:
            raise PrecisionError(
                f"certifying the OT prior at n={self.n}, rho={self.rho!r} needs more than the work cap "
                f"(sum of n * bits over recurrence passes <= {self.cap:.3g}; at {int(bits)} bits, "
                f"{passes} more pass(es) would take it to {need:.3g}): the backward recurrence loses "
                "log2(Phi_n/Phi_1) bits, which grows without bound as rho -> 1 and with n"
            )

    def charge(self, bits):
        self.check(bits)
        self.done += self.n * float(bits)


@dataclass(frozen=True, eq=False)
class OTPrior(NDArrayOperatorsMixin):
    """The constant-score prior :math:`\\pi_n(d)`, ``d = 0 .. n-1``, and how it was obtained.

    Behaves as the float array ``prior`` (``np.asarray(result)``, indexing, ``len``,
    arithmetic and numpy functions).

    Attributes
    ----------
    n : int
    rho : float
    prior : ndarray, shape (n,)
        :math:`\\pi_n(d)`; entries below the smallest double are 0 (see ``log_prior``), and
        entries below the smallest normal double (about ``2.2e-308``) are subnormal doubles with
        fewer significant bits: their relative error exceeds ``log_error_bound`` (0.025 at
        ``n = 257``, ``rho = 1 - 1e-6``, ``d = 181 .. 190``). ``log_prior`` carries them in full.
    log_prior : ndarray, shape (n,)
        :math:`\\log\\pi_n(d)`, finite for every ``d``; ``log_error_bound`` holds for every entry.
    log_c : float
        :math:`\\log\\Phi_n`, the logarithm of the root of Theorem 2.
    iterations : int
        Sweeps of the double-precision iteration (0 when the certified route gave it).
    log_error_bound : float
        Bound on :math:`\\max_d|\\log\\hat\\pi(d)-\\log\\pi(d)|` for ``log_prior``, and for ``prior``
        at its normal (not subnormal) entries: the contraction
        certificate (oscillation of the last residual over ``1 - rho``, Theorem 1), plus
        the blocked-sum rounding; from the balls on the certified route.
    log10_condition : float
        :math:`\\log_{10}(\\Phi_n/\\Phi_1) = -\\log_{10}\\pi_n(n-1)`: the digits the backward
        recurrence loses, hence the extra working precision of the certified route.
    certified : bool
        ``True`` when ``lo``/``hi`` are proved enclosures (``dps=`` given).
    lo, hi, mid, rad : ndarray or None
        Outward-rounded end points, midpoints and radii of the Arb balls (certified only).
    dps : int or None
    values : tuple or None
        The ball midpoints as mpmath numbers of a private context at ``dps`` digits
        (certified only).
    """

    n: int
    rho: float
    prior: np.ndarray
    log_prior: np.ndarray
    log_c: float
    iterations: int
    log_error_bound: float
    log10_condition: float
    certified: bool = False
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    mid: np.ndarray | None = None
    rad: np.ndarray | None = None
    dps: int | None = None
    values: tuple | None = field(default=None, repr=False)

    @property
    def c(self) -> float:
        """:math:`\\Phi_n` (``inf`` when it exceeds the double range; use ``log_c``)."""
        return math.exp(self.log_c) if self.log_c < 709.0 else math.inf

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.prior, dtype=dtype)

    def __len__(self):
        return self.n

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = [x.prior if isinstance(x, OTPrior) else x for x in inputs]
        return getattr(ufunc, method)(*args, **kwargs)

    def __getitem__(self, index):
        return self.prior[index]

    def as_dict(self) -> dict:
        """Plain Python types (lists for arrays, strings for the mpmath values)."""
        out = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif name == "values" and value is not None:
                value = [str(v) for v in value]
            out[name] = value
        return out


# --- double precision: the normalised log-domain sweep ---------------------------------------


def _log_cumsum_exp(x: np.ndarray) -> np.ndarray:
    """``log(cumsum(exp(x)))`` for a 1-d array, without overflow or harmful underflow.

    Blocks of ``b = ceil(sqrt(n))`` entries: inside a block the terms are scaled by the
    block maximum ``m_k`` and summed (relative error <= b eps); the block totals are
    combined by ``logaddexp.accumulate`` into ``B_k``, the logarithm of everything before
    block ``k``. Entry ``i`` of block ``k`` is then ``c + log(exp(B_k - c) + exp(m_k - c) S_i)``
    with ``c = max(B_k, m_k)`` and ``S_i`` the scaled partial sum: one logarithm per entry,
    absolute error in the logarithm <= (b + 1) eps (1 + |value|). A block whose scaled
    partial sums underflow where the earlier blocks do not dominate them is recomputed
    exactly by ``logaddexp``.
    """
    n = x.size
    b = math.isqrt(max(n - 1, 0)) + 1
    X = np.full(b * b, -np.inf)
    X[:n] = x
    X = X.reshape(b, b)
    m = X.max(axis=1)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", under="ignore", invalid="ignore"):
        inner = np.exp(X - m[:, None])
        np.cumsum(inner, axis=1, out=inner)
        totals = np.log(inner[:, -1]) + m  # the block maximum is a term: no underflow
        before = np.concatenate([[-np.inf], np.logaddexp.accumulate(totals)[:-1]])
        c = np.maximum(before, m)
        out = inner * np.exp(m - c)[:, None]
        out += np.exp(before - c)[:, None]
        np.log(out, out=out)
        out += c[:, None]
        # a scaled partial sum below 1e-280 loses digits; it matters only where the
        # earlier blocks do not dominate it: redo those blocks exactly
        weak = np.any((inner < 1e-280) & np.isfinite(X), axis=1) & (before < m - 600.0)
        for k in np.flatnonzero(weak):
            out[k] = np.logaddexp(before[k], np.logaddexp.accumulate(X[k]))
    return out.ravel()[:n]


def _sweep(y: np.ndarray, rho: float, *, with_l1: bool = True):
    """One sweep of Theorem 2's equations on ``y = log v - log v_t``.

    ``L1 = log(Phi / v_t)``, ``L2 = log(Psi v_t)``; ``y' = -rho (L2 - L2[t])``.
    Returns ``(y', L1)`` (``L1`` is ``None`` when ``with_l1`` is false).

    Algorithm: the two log-cumulative sums of :func:`_log_cumsum_exp` share one block
    layout. The first leaves ``Phi`` in scaled form, ``Phi_i = exp(c_k) P_i`` with
    ``P_i >= P_{first of block}`` (``Phi`` increases); the terms of the second,
    ``exp(-L1_i) = exp(-c_k) / P_i``, are scaled by the block's largest one as
    ``P_first / P_i``, a division instead of a logarithm and an exponential, and the
    second sum runs backwards in the same layout. Per entry: one exponential, one
    division and one logarithm (two with ``L1``), against two of each and two
    ``logaddexp`` before. If a scaled partial sum of either pass underflows where the
    neighbouring blocks do not dominate it, the sweep is redone by two exact calls of
    :func:`_log_cumsum_exp`.
    """
    n = y.size
    b = math.isqrt(max(n - 1, 0)) + 1
    X = np.full(b * b, -np.inf)
    X[:n] = y
    X = X.reshape(b, b)
    # padding (-inf) only after entry n: rows 0..last hold entries, row `last` up to column `col`
    # (y is finite: its entries come from logarithms of positive sums); a row's scaled partial
    # sums increase along it (the reversed ones decrease), so the smallest one of the entries is
    # its first (last) one: the underflow tests read one column instead of the whole array
    last, col = divmod(n - 1, b)
    m = X.max(axis=1)
    m = np.where(np.isfinite(m), m, 0.0)
    # every pass below writes into the arrays it reads (X, then E): two n-sized allocations per
    # sweep instead of eight (their first touch cost as much as the arithmetic at n = 1e6)
    with np.errstate(divide="ignore", under="ignore", invalid="ignore", over="ignore"):
        inner = np.subtract(X, m[:, None], out=X)
        np.exp(inner, out=inner)
        np.cumsum(inner, axis=1, out=inner)
        totals = np.log(inner[:, -1]) + m
        before = np.concatenate([[-np.inf], np.logaddexp.accumulate(totals)[:-1]])
        weak = (inner[:, 0] < 1e-280) & (before < m - 600.0)
        weak[last + 1 :] = False
        c = np.maximum(before, m)
        P = inner
        P *= np.exp(m - c)[:, None]
        P += np.exp(before - c)[:, None]  # Phi_i / exp(c_k), nondecreasing in each block
        first = P[:, 0].copy()
        s = -c - np.log(first)  # log of the largest term exp(-L1) of each block
        E = np.divide(first[:, None], P)
        E.reshape(-1)[n:] = 0.0
        rev = E[:, ::-1]
        np.cumsum(rev, axis=1, out=rev)
        inner2 = E  # reversed cumulative sums, in place
        totals2 = np.log(inner2[:, 0]) + s
        after = np.concatenate([np.logaddexp.accumulate(totals2[::-1])[::-1][1:], [-np.inf]])
        smallest2 = inner2[:, -1].copy()
        smallest2[last] = inner2[last, col]
        weak2 = (smallest2 < 1e-280) & (after < s - 600.0)
        weak2[last + 1 :] = False
        if weak.any() or weak2.any() or not np.all(np.isfinite(totals2[:1])):
            L1 = _log_cumsum_exp(y)
            L2 = _log_cumsum_exp(-L1[::-1])[::-1]
            return -rho * (L2 - L2[-1]), (L1 if with_l1 else None)
        c2 = np.maximum(after, s)
        L2 = inner2
        L2 *= np.exp(s - c2)[:, None]
        L2 += np.exp(after - c2)[:, None]
        np.log(L2, out=L2)
        L2 += c2[:, None]
        L2 = L2.reshape(-1)[:n]
        L1 = None
        if with_l1:
            L1 = np.log(P, out=P)
            L1 += c[:, None]
            L1 = L1.reshape(-1)[:n]
    L2 -= L2[-1]
    L2 *= -rho
    return L2, L1


# from this length on the prior's single fixed-point problem is solved by _anderson_one (the
# batched solver's per-sweep bookkeeping on (1, m, n) arrays cost as much as the sweep itself)
_LEAN_MIN_N = 1 << 17


def _anderson_one(G, x0, threshold, floor, max_iter, m):
    """Safeguarded Anderson mixing (type II) for one problem ``x = G(x)`` in the oscillation seminorm.

    The same rules as :func:`otprior._anderson.anderson_solve` for a batch of one: the
    candidate ``G(x_k) - dG gamma`` (``gamma`` from the scaled, regularised ``m x m`` normal
    equations of the stored residual differences) is accepted when its residual is at most
    10 times the best; a rejected candidate, or ``2 m`` accepted points without improvement,
    restarts the memory from the plain step of the last accepted point, with Anderson paused
    for ``2, 4, ..., 32`` plain steps after successive rejections. The stored differences
    are rows of C-ordered ``(m, n)`` arrays, so the Gram row, the right-hand side and the
    candidate are three matrix-vector products. Mixing only chooses the points at which
    ``G`` is evaluated: the answer is ``G`` at the last accepted point and the residual
    returned is that point's, so the certificate of :func:`_float_prior` (Theorem 1) is
    unchanged. Returns ``(G(x), {"iterations": [k], "residual": [r]})``; raises
    ``ConvergenceError`` (``partial`` the best image, shape ``(1, n)``) when the
    threshold is not reached in ``max_iter`` evaluations or an accepted image is not finite.
    """
    from ._anderson import _gamma

    n = x0.size
    DR = np.zeros((m, n))
    DG = np.zeros((m, n))
    gram = np.zeros((m, m))
    count = 0
    x = x0
    prev_img = prev_res = None
    best_rn, best_img = math.inf, None
    trial, pause, rejections, stale = False, 0, 0, 0
    for k in range(1, max_iter + 1):
        img = G(x)
        res = img - x
        rn = float(res.max() - res.min())
        if not math.isfinite(rn):
            if not trial:
                raise ConvergenceError(f"the sweep produced non-finite values (sweep {k})", partial=None)
            reject = True
        else:
            reject = trial and not rn <= 10.0 * best_rn
        if not reject:
            amax = max(float(img.max()), -float(img.min()))
            if rn <= max(threshold, floor(amax)):
                return img, {"iterations": [k], "residual": [rn]}
            if prev_res is not None:
                slot = count % m
                np.subtract(res, prev_res, out=DR[slot])
                np.subtract(img, prev_img, out=DG[slot])
                nst = min(count + 1, m)
                col = np.einsum("ij,j->i", DR[:nst], DR[slot])
                gram[slot, :nst] = col
                gram[:nst, slot] = col
                count += 1
            prev_img, prev_res = img, res
            if rn < best_rn:
                best_rn, best_img, stale = rn, img, 0
            else:
                stale += 1
                if stale > 2 * m:
                    reject, stale = True, 0
        if reject:
            rejections += 1
            pause = min(2 ** min(rejections, 5), 32)
            count = 0
            x, trial = prev_img, False
            continue
        nst = min(count, m)
        if pause == 0 and nst > 0:
            rhs = np.einsum("ij,j->i", DR[:nst], res)
            g = np.zeros(m)
            g[:nst] = rhs
            gamma = _gamma(gram[None], g[None], np.array([nst]))[0][:nst]
            with np.errstate(invalid="ignore", over="ignore"):
                # einsum, not gamma @ DG: the BLAS product of a short row by a wide matrix spins
                # its threads (about 10x the CPU time of one pass, measured on two busy cores)
                cand = img - np.einsum("i,ij->j", gamma, DG[:nst])
            if math.isfinite(float(np.add.reduce(cand))):  # a non-finite entry makes the sum non-finite
                x, trial = cand, True
                continue
        if pause > 0:
            pause -= 1
        x, trial = img, False
    err = ConvergenceError(
        f"the sweep did not reach the tolerance (threshold {threshold:.3e}) after max_iter={max_iter} sweeps "
        f"(residual reached {best_rn:.3e})",
        partial=None if best_img is None else best_img[None, :],
    )
    raise err


def _float_prior(n: int, rho: float, dual_tol: float, max_iter: int):
    """Solve Theorem 2's fixed point in double precision (normalised log domain).

    The map ``y -> y'`` is a rho-contraction in the oscillation seminorm (Theorem 1
    applied to the quotient by constants), so ``osc(y - y*) <= osc(y' - y) / (1 - rho)``
    and ``|log pi(y) - log pi(y*)| <= osc(y - y*)`` entrywise (the normalisation
    ``L1[t]`` moves by at most the oscillation). Raises ``ConvergenceError`` when the
    threshold is not reached.
    """
    b = math.isqrt(max(n - 1, 0)) + 1
    rounding = 4.0 * (b + 2) * _EPS  # relative rounding of one sweep (see _log_cumsum_exp)

    def G(x, rows):
        return _sweep(x[0], rho, with_l1=False)[0][None, :]

    x0 = np.zeros((1, n))
    # stopping threshold on the residual's oscillation; the rounding floor grows with |y|
    threshold = max(dual_tol * (1.0 - rho), 0.0)
    if n >= _LEAN_MIN_N:
        # memory 4 for 0.5 <= rho < 0.995 (measured at n = 1e6: 13 sweeps at rho = 0.5 and 103 at 0.99,
        # against 13 and 77 with the batched solver's 6 and 10, for 0.7x and 0.7x the CPU time)
        memory = 4 if 0.5 <= rho < 0.995 else anderson_memory(rho)
        y, info = _anderson_one(lambda v: _sweep(v, rho, with_l1=False)[0], x0[0], threshold,
                                lambda amax: rounding * (1.0 + amax), max_iter, memory)
    else:
        x, info = anderson_solve(
            G,
            x0,
            threshold,
            max_iter=max_iter,
            memory=anderson_memory(rho),
            seminorm="osc",
            floor=lambda amax: rounding * (1.0 + amax),
        )
        y = x[0]
    _, L1 = _sweep(y, rho)
    log_prior = (y - L1[-1])[::-1]
    log_c = float(L1[-1] / (1.0 - rho))  # x_t = rho log c and log c = x_t + L1[t]
    residual = float(info["residual"][0])
    bound = residual / (1.0 - rho) + rounding * (2.0 + np.max(np.abs(y)))
    return log_prior, log_c, int(info["iterations"][0]), bound


# --- certified: the recurrence in Arb ---------------------------------------------------------


def _recurrence_arb(n, rho_a, c, *, full, work=None):
    """Backward recurrence of Theorem 2 in ball arithmetic at the current flint precision.

    Returns ``(sign, phi, v)``: ``sign`` is +1 when every ``Phi_k`` (k = n-1 .. 0) is
    certainly positive (``c`` above the root, Lemma 2.1), -1 when some ``Phi_k`` is
    certainly negative or ``Phi_0`` is certainly not positive... (``c`` below the root,
    or at it), 0 when a ball contains zero (precision too low). With ``full`` the lists
    ``phi[k] = Phi_k`` (k = 0..n) and ``v[k]`` (k = 1..n) are returned as well.
    """
    import flint

    if work is not None:
        work.charge(flint.ctx.prec)
    phi = c
    psi = flint.arb(0)
    mr = -rho_a
    phis = [None] * (n + 1) if full else None
    vs = [None] * (n + 1) if full else None
    if full:
        phis[n] = c
    one = flint.arb(1)
    # steps k = n .. 2 in blocks of _ARB_BLOCK with one check per block: while every Phi is positive each
    # v > 0 and Phi decreases, so a Phi proved positive at a block's end proves the exact Phi's inside it
    # positive, and a ball inside not proved positive makes the block's end not proved positive (see
    # _steps_arb); such a block is run again one step at a time, with the checks of every step
    k = n
    while k > 1:
        m = min(_ARB_BLOCK, k - 1)
        start = (phi, psi)
        for j in range(k, k - m, -1):
            psi += one / phi
            vk = psi**mr
            phi = phi - vk
            if full:
                vs[j] = vk
                phis[j - 1] = phi
        if not phi > 0:
            phi, psi = start
            if full:  # the checked loop leaves the entries past the step it stops at unset
                for j in range(k, k - m, -1):
                    vs[j] = phis[j - 1] = None
            for j in range(k, k - m, -1):
                psi += one / phi
                vk = psi**mr
                phi = phi - vk
                if full:
                    vs[j] = vk
                    phis[j - 1] = phi
                if phi < 0:
                    return -1, phis, vs, None
                if not phi > 0:
                    return 0, phis, vs, None
        k -= m
    if n >= 1:  # the last step, k = 1: Phi_0 is classified below
        psi += one / phi
        vk = psi**mr
        phi = phi - vk
        if full:
            vs[1] = vk
            phis[0] = phi
    if phi > 0:
        return 1, phis, vs, phi
    if phi <= 0:
        return -1, phis, vs, phi
    return 0, phis, vs, phi


def _certified_root(n, rho, log_c_guess, bits, target_bits, work=None):
    """Bracket ``c`` between two exact dyadics ``a < c < b`` proved by the sign test.

    Lemma 2.1 (``proofs/constant_score_recurrence.md``): ``c`` is above the root iff the
    recurrence started at ``c`` keeps every ``Phi_k`` positive. The bracket is found by
    expanding geometrically in ``log c`` around the guess, then narrowed by bisection to
    relative width ``2**-target_bits``. Returns ``(a, b, bits)``; the precision is
    doubled whenever a sign is undecided.
    """
    import flint

    rho_a = arb_from_float(rho)
    work = _Work(n, rho) if work is None else work
    # the guess only seeds the bracket search; Phi_n >= n (Jensen, proofs/window_law.md)
    # and a failed double route can give anything: keep it finite and plausible
    log_n = math.log(n)
    cap = log_n + n * max(1.0, -math.log1p(-rho))
    log_c_guess = min(max(log_c_guess, log_n), cap) if math.isfinite(log_c_guess) else log_n
    known = None  # a proved bracket (exact dyadics) survives a restart at higher precision
    while True:
        work.check(bits, _MIN_PASSES)
        if bits > _MAX_BITS or n * bits > _MAX_WORK:
            raise PrecisionError(
                f"certifying ot_prior(n={n}, rho={rho!r}) needs more than {min(_MAX_BITS, int(_MAX_WORK / n))} "
                "bits of working precision (the backward recurrence loses log2(Phi_n/Phi_1) bits)"
            )
        with arb_precision(bits):
            guess = flint.arb(log_c_guess).exp().mid()
            step = flint.arb(2) ** -36

            values = []  # (c, N_0(c)) at points above the root

            def sign(c, values=values):
                out = _recurrence_arb(n, rho_a, c, full=False, work=work)
                if out[0] > 0:
                    values.append((c, (out[3] / c).mid()))
                    del values[:-4]
                return out[0]

            def value(c, values=values):
                for point, val in values:
                    if point.mid() == c.mid():
                        return val
                return None

            if known is not None:
                a, b = known
                sa, sb = -1, 1
            else:
                a = (guess * (1 - step)).mid()
                b = (guess * (1 + step)).mid()
                sa, sb = sign(a), sign(b)
            grow = 0
            while sa != 0 and sb != 0 and (sa > 0 or sb < 0):
                grow += 1
                if grow > 200:
                    raise PrecisionError(f"could not bracket the root of Theorem 2 for n={n}, rho={rho!r}")
                step = step * 4
                if sa > 0:  # a is above the root: move down
                    b, sb = a, sa
                    a = (guess * (-step).exp()).mid()
                    sa = sign(a)
                else:
                    a, sa = b, sb
                    b = (guess * step.exp()).mid()
                    sb = sign(b)
            if sa == 0 or sb == 0:
                bits *= 2
                continue
            known = (a, b)
            target = flint.arb(2) ** (-target_bits)
            decided = True
            b_prev = None
            while (b - a) > target * b:
                # geometric bisection while the bracket is wide, arithmetic once narrow
                half = ((a * b).sqrt() if b > 2 * a else (a + b) / 2).mid()
                points = [half]
                # secant step on N_0(c) = Phi_0(c)/c (increasing, Lemma 2.1) through the two
                # lowest points above the root, then a probe just below it
                gb = value(b) if b_prev is not None else None
                gp = value(b_prev) if b_prev is not None else None
                if gb is not None and gp is not None and gb != gp:
                    p = (b - gb * (b - b_prev) / (gb - gp)).mid()
                    if a < p < b:
                        h = b - p
                        points = [p, (p - h * flint.arb(2) ** -8).mid(), half]
                for q in points:
                    if not (a < q < b):
                        continue
                    s = sign(q)
                    if s == 0:
                        decided = False
                        break
                    if s > 0:
                        b_prev, b = b, q
                    else:
                        a = q
                        break
                known = (a, b)
                if not decided:
                    break
            if decided:
                return a, b, bits
        bits *= 2


def _certified_prior(n, rho, log_c_guess, log10_condition, digits, work=None, bits=None):
    """Balls for every entry ``pi_n(d)`` and every ``Phi_k / Phi_n`` (certified route).

    With the root bracketed, ``a < c < b``, Lemma 2.1 gives that ``Phi_k`` and ``v_k``
    are increasing in ``c`` and ``Phi_k / c`` too, so ``pi_n(n-k) = v_k / c`` lies in
    ``[v_k(a) / b, v_k(b) / a]`` and ``Phi_k / c`` in ``[Phi_k(a)/a, Phi_k(b)/b]``; the four
    point evaluations are balls (rounding only), so the hull of their ends is proved.
    A ball evaluation on the whole bracket would also be rigorous but overestimates
    (the dependency of ``Phi`` and ``Psi`` on ``c``).
    """
    import flint

    # the recurrence amplifies a relative error in c by Phi_n / Phi_k <= cond (Theorem 2)
    target_bits = int(3.33 * (digits + 2 + max(log10_condition, 0.0))) + 8
    bits = target_bits + 64 + int(2 * math.log2(n + 1)) if bits is None else int(bits)
    rho_a = arb_from_float(rho)
    work = _Work(n, rho) if work is None else work
    while True:
        a, b, bits = _certified_root(n, rho, log_c_guess, bits, target_bits, work)
        with arb_precision(bits):
            _, phi_a, v_a, _ = _recurrence_arb(n, rho_a, a, full=True, work=work)
            _, phi_b, v_b, _ = _recurrence_arb(n, rho_a, b, full=True, work=work)
            if all(p is not None for p in phi_a[1:]) and all(p > 0 for p in phi_a[1:]):
                entries = []
                for d in range(n):
                    k = n - d
                    lo = (v_a[k] / b).lower()
                    hi = (v_b[k] / a).upper()
                    entries.append(flint.arb(lo).union(flint.arb(hi)))
                ratios = [
                    flint.arb((phi_a[k] / a).lower()).union(flint.arb((phi_b[k] / b).upper())) for k in range(1, n + 1)
                ]
                ratios.insert(0, flint.arb(0))
                worst = max(float((e.rad() / e.mid()).upper()) for e in entries)
                if worst <= 10.0 ** (-digits - 1):
                    return entries, ratios, flint.arb(a).union(flint.arb(b)), bits
        # the conditioning measured on the balls at b > c: Phi_1(b)/b >= Phi_1(c)/c (Lemma 2.1),
        # so this is a lower bound of log10(Phi_n/Phi_1); the target jumps to it at once (it rose
        # by 32 bits per round before: hundreds of rounds where the start assumed no conditioning)
        measured = 0.0
        with arb_precision(bits):
            if phi_b[1] is not None and phi_b[1] > 0:
                measured = max(0.0, -float((phi_b[1] / b).log().mid()) / math.log(10.0))
        target_bits = max(target_bits + 32, int(3.33 * (digits + 2 + measured)) + 8)
        bits = max(bits + 64, target_bits + 64 + int(2 * math.log2(n + 1)))
        if bits > _MAX_BITS:
            raise PrecisionError(f"certifying ot_prior(n={n}, rho={rho!r}) to {digits} digits needs more than {_MAX_BITS} bits")


def _certified_result(n, rho, dps, float_res, log10_condition=None, bits=None):
    if isinstance(float_res, OTPrior):
        float_res = (float_res.log_prior, float_res.log_c, 0, 0.0)
    log_c0 = float_res[1]
    if log10_condition is None:
        log10_condition = -float(float_res[0][-1]) / math.log(10.0)
    entries, ratios, cball, bits = _certified_prior(n, rho, log_c0, log10_condition, dps, bits=bits)
    with arb_precision(bits):
        # the conditioning as measured on the proved balls: log10(Phi_n / Phi_1)
        if n >= 1 and ratios[1] > 0:
            log10_condition = max(0.0, -float(ratios[1].log().mid()) / math.log(10.0))  # Phi_n >= Phi_1
    with arb_precision(bits):
        log_prior = np.array([float(e.log().mid()) if e > 0 else -np.inf for e in entries])
        log_c = float(cball.log().mid())
    return _from_balls(n, rho, dps, entries, log_prior, log_c, log10_condition, bits)


# --- near rho = 1: Newton's method in logarithms, certified by the contraction (Lemma 4.6) -------

# Lemma 4.6 (proofs/ot_asymptotics.md) is tried first wherever its predicted work fits: the
# log-domain fixed point loses at most log10(1/(1 - rho)) digits (the backward recurrence loses
# log10(Phi_n/Phi_1): 944 digits at n = 1000, rho = 1 - 1e-6). Its refinement is steered by a
# double-precision Jacobian whose rounding, about kappa = eps max|z| / (1 - rho), sets the digits a
# pass gains; kappa is predicted before the work with Lemma 4.7's bound B >= max|z|. Measured rules
# (they choose a route, never what is certified): the route is tried while eps B / (1 - rho) <= 64
# (1 - rho = 1e-12 certified at n = 100 and 1000, ratios 0.7 and 7; n = 5000, ratio 37, did not);
# a pass is predicted to gain max(1, -log10 kappa) digits, and the refinement stops as soon as a
# pass fails to halve the certified error (a certification failure: the recurrence at Lemma 4.7's
# precision follows where its predicted work fits, else the call is refused).
_NEWTON_MIN_SWEEP_Q = 1e-4  # below: never the double sweep
_NEWTON_MAX_Q = 5e-4  # below: Lemma 4.6 where it is tried (measured crossover with the sweep)
_NEWTON_MAX_KAPPA = 64.0
_NEWTON_MAX_STEER = 8.0  # measured eps max|z| / (1 - rho) above which the passes are not started
_NEWTON_ITER = 60  # damped double Newton steps per continuation stage (five stages at most)


def _recurrence_condition_bound(n, rho):
    """Lemma 4.7: an upper bound on ``log(Phi_n/Phi_1)``, the nats the backward recurrence loses.

    ``min(B1, B2)`` with ``B1 = (rho log(1 + log n) + log(1 + (n^q - 1)/q)) / q`` (``q = 1 - rho``;
    ``H_n <= 1 + log n``, ``H_n^(rho) <= 1 + (n^q - 1)/q``) and
    ``B2 = (n - 1) log((n - 1) / (1 - n^-q))``; computed in doubles with a relative margin of
    ``1e-9`` (the bound only chooses a precision and predicts work: the balls decide every result).
    """
    q = 1.0 - rho
    if n <= 1:
        return 0.0
    h1 = math.log(n) + 1.0  # H_n <= 1 + log n
    hr = 1.0 + math.expm1(q * math.log(n)) / q  # H_n^(rho) <= 1 + int_1^n x^-rho dx
    b1 = (rho * math.log(h1) + math.log(hr)) / q
    m1 = -math.expm1(-q * math.log(n))
    b2 = (n - 1) * math.log((n - 1) / m1) if m1 > 0.0 else math.inf
    return min(b1, b2) * (1.0 + 1e-9) + 1e-9


def _newton_bits(n, rho, digits):
    """Working precision of Lemma 4.6's refinement, decided from ``(n, rho, digits)`` alone.

    The certificate is ``osc(r) / (1 - rho)`` (``r`` the residual), which must fall below
    ``10**-(digits + 1) / 4``; the residual is computed with an absolute rounding error of about
    ``n 2**-bits (1 + max|z| + log n)``, ``max|z| <= log(Phi_n/Phi_1)`` (Lemma 4.7's bound).
    """
    q = 1.0 - rho
    zmax = _recurrence_condition_bound(n, rho) + math.log(n) + 1.0
    return (
        64
        + int(math.ceil(3.33 * (digits + 2)))
        + int(math.ceil(math.log2(1.0 / q)))
        + int(math.ceil(math.log2(zmax + 1.0)))
        + int(math.ceil(2.0 * math.log2(n + 1)))
    )


def _newton_kappa(n, rho):
    """The steering's predicted rounding ``eps B / (1 - rho)`` (Lemma 4.6, ``B`` Lemma 4.7's bound on ``max|z|``)."""
    return _EPS * _recurrence_condition_bound(n, rho) / (1.0 - rho)


def _newton_steps(n, rho, digits, zmax=None):
    """Most refinement passes in Arb (Lemma 4.6), from ``(n, rho, digits)`` and ``max|z|``.

    A pass corrects ``z`` by a double solve whose relative error is about
    ``kappa = eps max|z| / (1 - rho)`` (the proof's factor), so it gains about ``-log10 kappa``
    digits: ``max(1, min(15, -log10 kappa))`` are counted per pass. Before the work ``max|z|`` is
    not known and ``1 + log n`` stands for it (a measured lower estimate: the steering's ``max|z|``
    exceeded it at every ``(n, 1 - rho)`` tried, 12 at ``n = 2``, 2173 at ``n = 1000``,
    ``1 - rho = 1e-6``), so this predicts the least work; after the double steering the measured
    ``max|z|`` sizes the passes that may run (a measured rule: the refinement also stops as soon as a
    pass fails to halve the certified error).
    """
    z = 1.0 + math.log(max(n, 1)) if zmax is None else max(float(zmax), 1.0)
    kappa = _EPS * z / (1.0 - rho)
    gain = min(15.0, max(1.0, -math.log10(kappa)))
    return 2 + int(math.ceil((digits + 10) / gain))


def _log_terms(z):
    """``log Phi_k`` and ``log Psi_k`` (k = 1..n) for ``v = e^z``, by log-cumulative sums."""
    lphi = _log_cumsum_exp(z)
    lpsi = _log_cumsum_exp(-lphi[::-1])[::-1]
    return lphi, lpsi


def _newton_correction(z, rho, lphi, lpsi, r):
    """Solve ``(I - rho K) x = r`` in O(n): ``K`` is the Jacobian of ``-log Psi`` (Lemma 4.6).

    ``K_jk = v_k T_max(j,k) / Psi_j`` with ``T_m = sum_{i>=m} Phi_i^-2``. With
    ``p_j = sum_{k<=j} v_k x_k / Phi_j`` and ``w_j = (K x)_j`` the system is the banded
    two-point problem ``p_j - (Phi_{j-1}/Phi_j) p_{j-1} - rho (v_j/Phi_j) w_j = (v_j/Phi_j) r_j``,
    ``(Psi_{j+1}/Psi_j) w_{j+1} - w_j + (u_j/Psi_j) p_j = 0`` (``Psi_{n+1} = 0``), whose
    coefficients lie in [0, 1]; it is solved by LAPACK's banded LU with partial pivoting
    and ``x = r + rho w``.
    """
    from scipy.linalg import solve_banded

    n = z.size
    with np.errstate(under="ignore"):
        al = np.exp(lphi[:-1] - lphi[1:])
        be = np.exp(z - lphi)
        ga = np.exp(lpsi[1:] - lpsi[:-1])
        de = np.exp(-lphi - lpsi)
    ab = np.zeros((5, 2 * n))
    rhs = np.zeros(2 * n)
    ip = np.arange(0, 2 * n, 2)
    iw = ip + 1
    ab[2, ip] = 1.0
    ab[4, ip[:-1]] = -al
    ab[1, iw] = -rho * be
    rhs[ip] = be * r
    ab[2, iw] = -1.0
    ab[3, ip] = de
    ab[0, iw[1:]] = ga
    sol = solve_banded((2, 2), ab, rhs, check_finite=False)
    return r + rho * sol[iw]


def _newton_float(n, rho):
    """Theorem 2's fixed point ``z = log v - log v_n`` in doubles by damped Newton steps.

    ``F(y) = y + rho log Psi(y)``; the step solves ``(I - rho K) dy = F`` (O(n),
    :func:`_newton_correction`), halved until ``osc F`` decreases; ``z`` is then shifted so
    that ``z_n = 0`` (``F(y + a) = F(y) + (1 - rho) a``: the shift changes no oscillation).
    Started at ``z = 0`` for ``1 - rho`` multiplied by 100 until it reaches ``1e-4``, each
    stage started from the last (continuation in ``rho``). An estimate: Lemma 4.6's
    refinement certifies it.
    """
    q = 1.0 - rho
    stages = [q]
    while stages[-1] < 1e-4:
        stages.append(stages[-1] * 100.0)
    z = np.zeros(n)
    floor = 8.0 * (math.isqrt(n) + 3) * _EPS
    for qq in reversed(stages):
        rr = 1.0 - qq if qq != q else rho
        for _ in range(_NEWTON_ITER):
            lphi, lpsi = _log_terms(z)
            F = z + rr * lpsi
            osc = float(np.ptp(F))
            if osc <= floor * (1.0 + float(np.max(np.abs(z)))) + floor * float(np.max(np.abs(lpsi))):
                break
            dz = _newton_correction(z, rr, lphi, lpsi, F)
            t = 1.0
            while True:
                zn = z - t * dz
                zn -= zn[-1]
                lphi_n, lpsi_n = _log_terms(zn)
                if float(np.ptp(zn + rr * lpsi_n)) < osc or t < 1e-4:
                    break
                t *= 0.5
            z = zn
    return z


def _newton_prior(n, rho, digits):
    """Certified prior near ``rho = 1`` by Lemma 4.6 (``proofs/ot_asymptotics.md``).

    The precision (:func:`_newton_bits`) and the most refinement passes (:func:`_newton_steps`)
    are decided from ``(n, rho, digits)`` before any work, and so is the refusal: where
    ``n * bits * (passes + 1)`` exceeds the work cap a ``PrecisionError`` is raised at once.
    Each pass computes the residual ``r = z + rho log Psi(z)`` in Arb, bounds
    ``osc(z - z*) <= osc(r) / (1 - rho)`` (the contraction), and stops when that is below
    ``10**-(digits + 1) / 4``; else it corrects ``z`` by the double solve of
    :func:`_newton_correction` on ``r - r_n``. ``log pi(d) = z_{n-d} - log sum e^z`` then lies
    within ``osc(z - z*)`` of the exact value.
    """
    import flint

    if n == 1:
        one = flint.arb(1)
        return [one], flint.arb(0), 64, 0.0
    bits = _newton_bits(n, rho, digits)
    passes = _newton_steps(n, rho, digits)
    work = _Work(n, rho)
    work.check(bits, passes + 1)  # the refusal, decided before any work
    z = _newton_float(n, rho)
    zmax = float(np.max(np.abs(z)))
    if not math.isfinite(zmax) or _EPS * zmax / (1.0 - rho) > _NEWTON_MAX_STEER:
        raise PrecisionError(
            f"Lemma 4.6's steering at n={n}, rho={rho!r} rounds by eps max|z| / (1 - rho) = "
            f"{_EPS * zmax / (1.0 - rho):.3g} > {_NEWTON_MAX_STEER:g}: its passes would not contract"
        )
    passes = _newton_steps(n, rho, digits, zmax)
    work.check(bits, passes + 1)  # sized by the measured max|z|: still before any pass in Arb
    rho_a = arb_from_float(rho)
    q_a = 1 - rho_a  # exact: rho is a double
    previous = None
    with arb_precision(bits):
        # in Arb: the double 10**(-digits - 1) / 4 is zero from digits = 308 (every dps >= 320 failed)
        target = flint.arb(10) ** (-digits - 1) / 4
        za = [arb_from_float(float(x)) for x in z]
        log2 = flint.arb(2).log()
        for _ in range(passes + 1):
            work.charge(bits)
            phi = flint.arb(0)
            inv = [None] * n
            for i in range(n):
                phi += za[i].exp()
                inv[i] = 1 / phi
            log_phi_n = phi.log()
            psi = flint.arb(0)
            r = [None] * n
            for i in range(n - 1, -1, -1):
                psi += inv[i]
                r[i] = za[i] + rho_a * psi.log()
            top = max(x.upper() for x in r)
            bottom = min(x.lower() for x in r)
            eps = (flint.arb(top) - flint.arb(bottom)) / q_a
            if eps < target:
                eps_up = flint.arb(eps.upper())
                entries = [(za[n - 1 - d] - log_phi_n + flint.arb(0, eps_up)).exp() for d in range(n)]
                # Lemma 4.6: log c = log sum e^z / (1 - rho) (z_n = 0), within eps / (1 - rho)
                cball = (log_phi_n + flint.arb(0, eps_up)) / q_a
                return entries, cball, bits, float(eps.upper())
            if previous is not None and not eps.upper() * 2 < previous:
                break  # the pass did not halve the certified error: the steering no longer contracts
            previous = eps.upper()
            # r - r_n scaled by 2^k before rounding to doubles (below 1e-308 it underflowed to a zero
            # correction: every dps >= 320 failed), the correction scaled back in Arb
            diff = [(x - r[-1]).mid() for x in r]
            size = max(abs(x) for x in diff)
            if not size > 0:
                break
            k = -int(math.floor(float((size.log() / log2).mid())))
            scale = flint.arb(2) ** k
            rm = np.array([float(x * scale) for x in diff])
            zf = np.array([float(x.mid()) for x in za])
            lphi, lpsi = _log_terms(zf)
            dz = _newton_correction(zf, rho, lphi, lpsi, rm)
            dz -= dz[-1]
            za = [(za[i] - arb_from_float(float(dz[i])) / scale).mid() for i in range(n)]
    raise PrecisionError(
        f"Lemma 4.6's refinement of the OT prior at n={n}, rho={rho!r} did not certify {digits} digits "
        f"in {passes + 1} passes at {bits} bits"
    )


def _from_balls(n, rho, dps, entries, log_prior, log_c, log10_condition, bits):
    """The certified :class:`OTPrior` of the Arb balls ``entries``: ``dps``-digit mpmath midpoints (a private
    context), the outward-rounded double enclosures, and ``log_error_bound`` = the balls' relative radius
    (2 err in the logarithm) plus the rounding of the returned doubles: ``prior = mid`` (half an ulp,
    relative) and ``log_prior`` (half an ulp of ``|log|``)."""
    import mpmath

    encl = [enclosure_from_arb(e) for e in entries]
    ctx = mpmath.MPContext()
    ctx.dps = dps
    values = tuple(ctx.mpf(e.mid().str(dps + 5, radius=False)) for e in entries)
    with arb_precision(bits):
        err = max(float((e.rad() / e.mid()).upper()) for e in entries)
    finite = np.abs(log_prior[np.isfinite(log_prior)])
    return OTPrior(
        n=n,
        rho=rho,
        prior=np.array([e.mid for e in encl]),
        log_prior=log_prior,
        log_c=log_c,
        iterations=0,
        log_error_bound=2.0 * err + _EPS * (1.0 + float(np.max(finite, initial=0.0))),
        log10_condition=log10_condition,
        certified=True,
        lo=np.array([e.lo for e in encl]),
        hi=np.array([e.hi for e in encl]),
        mid=np.array([e.mid for e in encl]),
        rad=np.array([e.rad for e in encl]),
        dps=dps,
        values=values,
    )


def _newton_result(n, rho, dps):
    """An :class:`OTPrior` from Lemma 4.6's certified prior (``dps`` digits)."""
    entries, cball, bits, _ = _newton_prior(n, rho, dps)
    with arb_precision(bits):
        logs = [e.log() for e in entries]
        log_prior = np.array([float(x.mid()) for x in logs])
        log10_condition = -float(logs[-1].mid()) / math.log(10.0) if n > 1 else 0.0
        log_c = float(cball.mid()) if n > 1 else 0.0
    return _from_balls(n, rho, dps, entries, log_prior, log_c, log10_condition, bits)


def _certified_first(n, rho):
    """The rule, from ``(n, rho)`` alone, of when ``ot_prior`` skips the double sweep.

    For ``1 - rho < 1e-4`` the double sweep contracts by ``rho`` per sweep (Theorem 1): it
    spent its 2000 sweeps (seconds) and ended unvouched at every ``n`` tried near
    ``rho = 1 - 1e-6``. There the prior is taken from :func:`_near_one` (Lemma 4.6's certified
    Newton route, or the recurrence at Lemma 4.7's precision), whatever ``n``. For
    ``1e-4 <= 1 - rho < 5e-4`` too where Lemma 4.6's route is tried (:func:`_newton_plan`):
    measured, it was 13x faster than the sweep at ``n = 257`` and 10x, 3.3x at ``n = 4096`` for
    ``1 - rho = 1.0001e-4, 3e-4`` (certified to 1e-13 where the sweep stated 3e-7, 6e-8), and
    slower from ``1 - rho = 1e-3`` at ``n = 4096`` (0.6x): the crossover is taken at ``5e-4``.
    """
    q = 1.0 - rho
    return 0.0 < q < _NEWTON_MIN_SWEEP_Q or (q < _NEWTON_MAX_Q and _newton_plan(n, rho, 17) is not None)


def _newton_plan(n, rho, digits):
    """Lemma 4.6's predicted ``(bits, passes, work)``, or ``None`` where the route is not tried.

    Tried where the steering's predicted rounding ``eps B / (1 - rho)`` is at most 64 (measured)
    and ``n * bits * (passes + 1)`` fits the work cap.
    """
    if n <= 1:
        return 64, 0, 0.0
    if _newton_kappa(n, rho) > _NEWTON_MAX_KAPPA:
        return None
    bits = _newton_bits(n, rho, digits)
    passes = _newton_steps(n, rho, digits)
    work = n * float(bits) * (passes + 1)
    return (bits, passes, work) if work <= _MAX_TOTAL_WORK and bits <= _MAX_BITS else None


def _recurrence_plan(n, rho, digits):
    """Theorem 2's recurrence at Lemma 4.7's precision: ``(bits, passes, work, digits lost)``, or ``None``."""
    cond = _recurrence_condition_bound(n, rho) / math.log(10.0)
    target = int(3.33 * (digits + 2 + cond)) + 8
    # a sign test at relative distance 2**-target from the root decides on balls whose radius
    # grows by up to Phi_n/Phi_1 along the run: the bisection's last points need both
    bits = target + int(3.33 * cond) + 64 + int(2 * math.log2(n + 1))
    # the passes of the bisection, times 4: the precision doubled once where a sign is undecided
    # (n = 30, rho = 1 - 1e-15 doubled twice and reached the cap after 15 s: refused at once now)
    passes = 4 * (target + 40 + _MIN_PASSES)
    work = n * float(bits) * passes
    return (bits, passes, work, cond) if work <= _MAX_TOTAL_WORK and bits <= _MAX_BITS else None


def _newton_applies(n, rho, digits=17):
    """Whether Lemma 4.6's route is tried at ``(n, rho, digits)`` (see :func:`_newton_plan`)."""
    return _newton_plan(n, rho, digits) is not None


def _near_one_domain(rho, digits):
    """The largest ``n`` (up to ``2**40``) at which :func:`_near_one` starts a route at ``(rho, digits)``.

    Both predicted works grow with ``n``; found by bisection on the predicate.
    """

    def tried(n):
        return _newton_plan(n, rho, digits) is not None or _recurrence_plan(n, rho, digits) is not None

    lo, hi = 1, 1 << 40
    if tried(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tried(mid):
            lo = mid
        else:
            hi = mid
    return lo


@functools.lru_cache(maxsize=8)
def _near_one_cached(n, rho, digits):
    return _near_one_uncached(n, rho, digits)


def _near_one(n, rho, digits):
    """The certified prior for ``1 - rho < 1e-4``: one rule, decided from ``(n, rho, digits)`` first.

    * Lemma 4.6 (Newton's method in logarithms, certified by the contraction; precision
      ``_newton_bits``, at most ``_newton_steps`` passes) wherever :func:`_newton_plan` predicts
      its work within the cap;
    * Theorem 2's recurrence at the precision given by Lemma 4.7's upper bound on
      ``log(Phi_n/Phi_1)`` (the digits it loses), its bisection to that many bits, where Lemma 4.6
      is not tried or did not certify within its predicted passes and this route's predicted work fits;
    * refused (``DomainError`` naming ``rho``, with ``n`` and the domain answered) where neither
      route's predicted work ``n * bits * passes`` fits the work cap: at once, before any work.

    The same inputs always take the same steps, so they give the same answer or the same refusal.
    Results are kept per ``(n, rho, digits)`` (eight at most, ``n <= 2**16``) and handed out as copies.
    """
    # kept up to n = 2**16 only (a kept prior holds n mpmath values besides its arrays)
    res = _near_one_cached(n, rho, digits) if n <= 1 << 16 else _near_one_uncached(n, rho, digits)
    arrays = {k: getattr(res, k).copy() for k in ("prior", "log_prior", "lo", "hi", "mid", "rad")}
    return dataclasses.replace(res, **arrays)


def _near_one_uncached(n, rho, digits):
    newton = _newton_plan(n, rho, digits)
    recur = _recurrence_plan(n, rho, digits)
    if newton is None and recur is None:
        n_max = _near_one_domain(rho, digits)
        if _newton_kappa(n, rho) > _NEWTON_MAX_KAPPA:
            how = f"Lemma 4.6's steering rounding eps B / (1 - rho) = {_newton_kappa(n, rho):.3g} > {_NEWTON_MAX_KAPPA:g}"
        else:
            nb, npass = _newton_bits(n, rho, digits), _newton_steps(n, rho, digits)
            how = f"Lemma 4.6's route would need {n * float(nb) * (npass + 1):.3g}"
        cond = _recurrence_condition_bound(n, rho) / math.log(10.0)
        raise DomainError(
            "rho",
            rho,
            f"values where the OT prior at n={n} is answered (here: n <= {n_max} at this rho and {digits} digits; "
            f"work cap {_MAX_TOTAL_WORK:.3g} units of n * bits): {how}, and Theorem 2's recurrence at Lemma "
            f"4.7's precision ({cond:.4g} digits lost at most) exceeds the cap; "
            "ot_window_mass and ot_dilution_bound answer at any n and rho (proved bounds)",
        )
    why = None
    if newton is not None:
        try:
            return _newton_result(n, rho, digits)
        except PrecisionError as err:
            why = str(err)
            if recur is None:
                raise DomainError(
                    "rho", rho, f"values where the OT prior at n={n} is certified ({err}; the recurrence at "
                    "Lemma 4.7's precision exceeds the work cap)"
                ) from None
    bits, _, _, cond = recur
    try:
        return _certified_result(n, rho, digits, (None, math.log(n), 0, 0.0), log10_condition=cond, bits=bits)
    except PrecisionError as err:
        extra = f"; {why}" if why else ""
        raise DomainError("rho", rho, f"values where the OT prior at n={n} is certified ({err}{extra})") from None


def _solve_or_recur(n, rho, dual_tol, max_iter):
    """The double route where its own error bound vouches for it, else the certified recurrence.

    The double route's ``log_error_bound`` (Theorem 1's contraction certificate plus the
    rounding floor) is returned with it; where it exceeds ``max(_VOUCH_LOG_ERROR, dual_tol)``
    (the floor ``eps |y|`` over ``1 - rho`` grows without bound as ``rho -> 1``), or where
    the sweep does not converge, the prior is taken from the certified route (17 digits)
    instead, within the work cap of :class:`_Work`; beyond it a ``DomainError`` naming
    ``rho`` says that neither route can answer.
    """
    budget = max_iter if (1.0 - rho) > 1e-4 else min(max_iter, 2000)
    limit = max(_VOUCH_LOG_ERROR, float(dual_tol))
    if _certified_first(n, rho):
        # the rule of _certified_first, decided from (n, rho) alone: the sweeps contract by rho
        # and would spend seconds to end unvouched; _near_one decides its precision, its passes
        # and its refusal before any work (Lemmas 4.6, 4.7)
        if 1.0 - rho < _NEWTON_MIN_SWEEP_Q:
            return _near_one(n, rho, 17)
        try:  # 1e-4 <= 1 - rho < 5e-4: where Lemma 4.6 does not certify, the sweep as before
            return _near_one(n, rho, 17)
        except DomainError:
            pass
    # decided before any work: the double route's stated error is at least its rounding
    # floor over 1 - rho (the residual cannot fall below one sweep's rounding); where that
    # exceeds the vouching level the certified recurrence is needed, and where even its
    # fewest passes at 64 bits exceed the work cap, the call is refused at once
    floor = 4.0 * (math.isqrt(max(n - 1, 0)) + 3) * _EPS / (1.0 - rho)
    if floor > limit and n * 64.0 * _MIN_PASSES > _MAX_TOTAL_WORK:
        raise DomainError(
            "rho",
            rho,
            f"values where the OT prior at n={n} can be computed: the double-precision route cannot "
            f"vouch for a log-error below {floor:.3g} (> {limit:.3g}) and the certified recurrence needs "
            f"at least {n * 64.0 * _MIN_PASSES:.3g} units of work (cap {_MAX_TOTAL_WORK:.3g}); "
            "ot_window_mass and ot_dilution_bound answer at any n and rho (proved bounds)",
        )
    try:
        res = _float_prior(n, rho, dual_tol, budget)
    except ConvergenceError as err:
        partial = err.partial
        if partial is None or not np.all(np.isfinite(partial)):
            raise
        y = partial[0]
        why = f"the double-precision sweep did not converge within max_iter={max_iter}"
    else:
        if res[3] <= limit and np.all(np.isfinite(res[0])) and math.isfinite(res[1]):
            return res
        y = None
        why = f"the double-precision route can only vouch for a log-error of {res[3]:.3g} (> {limit:.3g})"
    if y is not None:
        # an unconverged sweep says nothing reliable about c or the conditioning (at n = 16,
        # rho = 1 - 1e-6 it suggested 976 digits for a true 56): start from the proved lower
        # bound c >= n and no extra digits, and let the sign test raise the precision where a
        # sign is undecided (the same inputs always take the same steps)
        log_c = math.log(n)
        cond = 0.0
    else:
        log_c = res[1]
        cond = -float(res[0][-1]) / math.log(10.0)
    cond = cond if math.isfinite(cond) else 0.0
    try:
        return _certified_result(n, rho, 17, (None, log_c, 0, 0.0), log10_condition=max(cond, 0.0))
    except PrecisionError as err:
        raise DomainError(
            "rho",
            rho,
            f"values where the OT prior at n={n} can be computed: {why}, and the certified "
            f"recurrence exceeds its caps ({err})",
        ) from None


def ot_prior(n, rho, *, dps=None, dual_tol=1e-13, max_iter=20_000, return_info=False):
    """Exact constant-score prior :math:`\\pi_n(d)` of the causal OT operator.

    Parameters
    ----------
    n : int
        Query position (prefix length), ``n >= 1``.
    rho : float
        Balancing strength in [0, 1).
    dps : int, optional
        Certified route: Arb balls proved to contain every entry, with relative radius
        below ``10**-dps``; ``values`` holds the midpoints to ``dps`` digits.
    dual_tol : float
        Double route: accuracy of the log scalings in the oscillation seminorm
        (the operator's numerical tolerance, as in :func:`~otprior.causal_ot_attention`).
    max_iter : int
        Sweeps of the double route before :class:`~otprior.ConvergenceError`.
    return_info : bool
        Deprecated (kept for existing callers): return ``(result.prior, result)``.

    Returns
    -------
    OTPrior
        ``result.prior[d]`` for distance ``d = 0 .. n-1`` (sums to one), ``log_prior``,
        ``log_c``, the error certificate, and the balls when ``dps`` is given. The result
        behaves as the array ``prior``.

    Raises
    ------
    ConvergenceError
        The double route did not reach its threshold in ``max_iter`` sweeps (slow
        contraction as ``rho -> 1`` at large ``n``); nothing is returned silently.
    PrecisionError
        The certified route (``dps=``) needs more than its caps: 20000 bits, and a total
        work (the sum of ``n * bits`` over recurrence passes) of ``4e8``, checked before
        each pass and, against the fewest passes a route needs, before starting.
    DomainError
        Naming ``rho`` (the message gives ``n`` and the domain answered): near ``rho = 1``
        the route's predicted work exceeds the cap, decided before any work (e.g.
        ``n = 30, rho = 1 - 1e-15``; ``n > 274725`` at ``rho = 1 - 1e-6``), or after a bounded,
        predicted amount of work where Lemma 4.6 did not certify and the recurrence does not fit
        (``n = 5000``, ``rho = 1 - 1e-12``, after its double steering); elsewhere the
        double route cannot vouch for its answer and the certified recurrence that would
        replace it exceeds the caps above. Naming ``n``
        (:class:`~otprior.limits.ResourceError`): the arrays would exceed the memory cap.

    Notes
    -----
    Double route (Theorem 2 as a fixed point): ``y = log v - log v_n`` is iterated by
    ``L1 = log cumsum exp(y)`` (``= log Phi / v_n``), ``L2 = log reverse-cumsum
    exp(-L1)``, ``y' = -rho (L2 - L2[n])``, with Anderson mixing whose memory is chosen
    by ``rho``. Only positive terms are added, in logarithms, so nothing overflows for
    any ``rho < 1`` (``log c`` reaches 395 at ``n = 64``, ``rho = 1 - 1e-9``). The
    stopping rule certifies ``osc(y - y*) <= dual_tol`` (Theorem 1) unless the rounding
    floor of a sweep, ``4 (sqrt(n) + 3) eps (1 + max|y|)``, exceeds ``dual_tol (1 - rho)``;
    ``log_error_bound`` reports what was certified either way; an answer whose bound
    exceeds ``max(1e-6, dual_tol)`` is never returned: the certified recurrence (17
    digits) replaces it, or the call is refused. Near ``rho = 1`` (``1 - rho < 1e-4``, any
    ``n``; for ``1e-4 <= 1 - rho < 5e-4`` where Lemma 4.6's route is tried, measured faster than the
    sweep there) the sweep is not started: one rule decides from ``(n, rho, dps)`` before any work
    which route runs, how many bits and passes it may take, and whether it is refused
    (``DomainError`` naming ``rho``, with ``n`` and the largest ``n`` answered at that ``rho``), so the
    same inputs always give the same answer or the same refusal. First, wherever its predicted work
    fits the cap and its steering's predicted rounding ``eps B / (1 - rho)`` is at most 64 (``B``
    Lemma 4.7's bound; a measured rule), Lemma 4.6 (``proofs/ot_asymptotics.md``): Newton's method on
    the fixed point in logarithms, steered in doubles by an O(n) banded solve and refined in Arb,
    certified by the contraction, ``osc(z - z*) <= osc(residual) / (1 - rho)``; this problem loses at
    most ``log10(1/(1 - rho))`` digits (measured within one digit of it), where the recurrence loses
    ``log10(Phi_n/Phi_1)`` (944 digits at ``n = 1000``, ``rho = 1 - 1e-6``, answered in about a
    second now; ``n = 100``, ``rho = 1 - 1e-12`` in about 0.3 s). Its passes are sized by the
    steering's measured ``eps max|z| / (1 - rho)`` and stop when one fails to halve the error; where
    it does not certify, or is not tried, the recurrence runs at the precision of Lemma 4.7's proved
    upper bound on ``log(Phi_n/Phi_1)`` (``n = 20``, ``rho = 1 - 1e-15``: 229 digits lost, bound
    300) where its predicted work fits, else the call is refused (``n = 30``
    there). From ``n = 2**17`` the sweep's Anderson mixing runs as a one-problem loop (same
    safeguards, memory 4 for ``0.5 <= rho < 0.995``).
    Certified route: the backward recurrence in Arb at ``64 + 3.33 (dps + log10 cond)``
    bits, the root bracketed by exact dyadics proved below/above it by Lemma 2.1 and
    narrowed by bisection, then the recurrence run on the bracket as one ball.

    Examples
    --------
    >>> p = ot_prior(4, 0.0)        # rho = 0: uniform
    >>> p.prior.round(12).tolist()
    [0.25, 0.25, 0.25, 0.25]
    >>> round(float(ot_prior(256, 0.5)[0]), 6)
    0.045634
    >>> r = ot_prior(16, 0.9995, dps=20)       # certified: Arb balls
    >>> round(float(r.values[1]), 10), bool(r.rad[1] < 1e-21 * r.mid[1])
    (0.0124827178, True)
    """
    n = check_int(n, "n", minimum=1)
    rho = check_rho(rho)
    dual_tol = check_real(dual_tol, "dual_tol", low=0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter")
    if dps is not None:
        dps = check_int(dps, "dps", minimum=1, maximum=_MAX_DPS)
    _check_n_allocation(n)
    if rho == 0.0:
        float_res = (np.full(n, -math.log(n)), math.log(n), 0, 0.0)
    elif dps is not None and _certified_first(n, rho):
        try:
            float_res = _near_one(n, rho, dps)
        except DomainError:
            if 1.0 - rho < _NEWTON_MIN_SWEEP_Q:
                raise
            float_res = _solve_or_recur(n, rho, dual_tol, max_iter)  # 1e-4 <= 1 - rho < 5e-4: as before
    else:
        float_res = _solve_or_recur(n, rho, dual_tol, max_iter)
    if dps is not None:
        if isinstance(float_res, OTPrior) and float_res.dps == dps:
            return float_res  # Lemma 4.6 / 4.7 at dps digits (near rho = 1)
        return _certified_result(n, rho, dps, float_res)
    if isinstance(float_res, OTPrior):
        return (float_res.prior, float_res) if return_info else float_res
    log_prior, log_c, iterations, bound = float_res
    with np.errstate(under="ignore"):
        prior = np.exp(log_prior) if rho > 0.0 else np.full(n, 1.0 / n)
    result = OTPrior(
        n=n,
        rho=rho,
        prior=prior,
        log_prior=log_prior,
        log_c=log_c,
        iterations=iterations,
        log_error_bound=float(bound),
        log10_condition=-float(log_prior[-1]) / math.log(10.0),
    )
    return (prior, result) if return_info else result


# --- masses and bounds -----------------------------------------------------------------------


_MAX_LENGTH = int(1e300)  # the double 1e300 as an exact integer: every n up to it is answered
# exact routes up to these lengths (above: the proved bounds of Theorem 4 and Lemma 4.1,
# proofs/ot_asymptotics.md); the exact route is O(n) and its cost grows as rho -> 1
_EXACT_FLOAT_MAX = 1 << 16
_EXACT_CERT_MAX = 1 << 12
# ... and the certified value up to 10^4 while n <= 2e4 (1 - rho): there the exact route's two Arb passes
# (27-32 ms CPU at n = 1e4, rho <= 0.5, on a loaded machine) stay within the 50 ms target, where the
# bounds route's width is 1e-2 (Lemma 4.3's O(100)/n) against the exact route's 1e-12
_EXACT_CERT_WIDE_MAX = 10_000
_EXACT_CERT_WORK = 20_000
# the double exact route costs about n / (1 - rho) sweep-elements (23 ms at n = 65536, rho = 0.5
# on one core): up to this work it is used, since it is exact to rounding where the bounds
# route's estimate is off by up to its certified width (1e-3..1e-5 at n = 5000..65536)
_EXACT_FLOAT_WORK = 1 << 18
# windows up to this size are mapped through the exact W-step backward recurrence
# (Lemma 4.2); larger windows use the closed forms of Theorem 4(i)
_RECUR_W_MAX = 1 << 12
_CONTINUED_W = 1 << 11  # windows above it: the D exact steps of the solve continued by Lemma 4.11's count
_GL_NODES = 12  # Gauss-Legendre nodes of the count's second-order term (Lemma 4.11)

# below this 1 - rho the exact route's sweeps and bits grow without a usable a-priori estimate
_EXACT_MIN_Q = 1e-4
# ... except for short prefixes, where the certified recurrence answers within its caps
_EXACT_NEAR_ONE_MAX = 256
# ... and up to this length where Lemma 4.6's route is tried (1 - rho < 5e-4)
_EXACT_NEWTON_MAX = 1 << 13
# above this rho the exact route is used up to _EXACT_NEAR_ONE_MAX only (256 < n <= 4096: Lemma 4.3)
_EXACT_MAX_RHO = 0.9
ROUTES = ("exact", "exact-rho0", "bounds")


def _broadcast_ints(window, n):
    """``(window, n)`` broadcast as object arrays of exact Python ints, ``1 <= window <= n <= 1e300``.

    Python ints, numpy integers, integral floats and object arrays of them are taken
    exactly (``check_int``); the error names the parameter, its value and the domain.
    """
    arrays = []
    for name, raw in (("window", window), ("n", n)):
        refuse_masked(raw, name)
        if isinstance(raw, (str, bytes, bytearray, memoryview)):  # a memoryview may hold raw bytes
            raise DomainError(name, raw, "integers (or rectangular arrays of integers) at least 1")
        try:
            arr = np.asarray(raw, dtype=object)
        except ValueError:
            raise DomainError(name, raw, "integers (or rectangular arrays of integers) at least 1") from None
        arrays.append(arr)
    try:
        w, nn = np.broadcast_arrays(*arrays)
    except ValueError:
        raise DomainError("window", window, f"an array whose shape broadcasts with n's {np.shape(arrays[1])}") from None
    wo = np.empty(w.shape, dtype=object)
    no = np.empty(w.shape, dtype=object)
    for index in np.ndindex(w.shape):
        nk = _plain_int(nn[index], 1, _MAX_LENGTH)
        if nk is None:
            nk = check_int(nn[index], "n", minimum=1, maximum=_MAX_LENGTH)
        no[index] = nk
        wk = _plain_int(w[index], 1, nk)
        wo[index] = check_int(w[index], "window", minimum=1, maximum=nk) if wk is None else wk
    return wo, no


def _plain_int(v, lo, hi):
    """``v`` as an int when it is a Python or numpy integer (not a bool) in ``[lo, hi]``, else ``None``
    (then ``check_int`` decides, and words its refusal): the common case without the refusal's text,
    whose bound of 301 digits was written out on every call (45 us of a 0.6 ms float call)."""
    if type(v) is int:
        out = v
    elif isinstance(v, np.integer) and not isinstance(v, (np.bool_, np.timedelta64)):
        out = int(v)
    else:
        return None
    return out if lo <= out <= hi else None


def _scalar_or_array(out, shape):
    if shape == ():
        return out.reshape(())[()] if out.dtype == object else float(out.reshape(()))
    return out.reshape(shape)


def _c_bounds_arb(n, r):
    """Proved ``(c_lo, c_hi)`` with ``c_lo <= c_n <= c_hi`` as balls (Lemma 4.1, proofs/ot_asymptotics.md).

    ``c_n >= n`` (Theorem 4(iii), Jensen) and ``c_n^{1-rho} <= H_n^{(rho)}``.
    """
    import flint

    q = 1 - r
    H = _power_sum_arb(n, r)
    return flint.arb(n), (H.log() / q).exp()


def _window_from_c_arb(W, c, r):
    """``1 - Phi_{t-W}(c)/c`` by W steps of Theorem 2's backward recurrence (Lemma 4.2), a ball.

    The recurrence started at ``Phi_t = c`` does not involve ``t``. Returns ``None`` when
    a ``Phi_k`` is not proved positive along the way.
    """
    import flint

    phi = c
    psi = flint.arb(0)
    total = flint.arb(0)  # sum of the W newest v_k: m = total / c, no cancellation when m is tiny
    mr = -r
    for _ in range(int(W)):
        psi += 1 / phi
        v = psi**mr
        total += v
        phi = phi - v
        if not phi > 0:
            return None
    return total / c


def _window_from_c_float(W, c, rho):
    phi, psi, total = c, 0.0, 0.0
    for _ in range(int(W)):
        psi += 1.0 / phi
        v = psi ** (-rho)
        total += v
        phi -= v
        if not phi > 0.0:
            return math.nan
    m = total / c
    return m if m < 0.5 else 1.0 - phi / c  # 1 - Phi_W / c: the sum's rounding swamps 1 - m as m -> 1


# --- Lemma 4.3: the lifetime of the backward recurrence (proofs/ot_asymptotics.md) -------------
#
# Started at Phi = c, the recurrence of Theorem 2 does not involve t; c_t is the c whose
# trajectory lives exactly t steps (Lemma 2.1). Lemma 4.3 bounds the lifetime of the
# trajectory from D exact steps (Arb) and the near-invariant J = log Phi + Psi^q / q of the
# continuum limit, with the drift of J bounded step by step; no O(t) work.

_BULK_D = 512  # exact steps before the bulk of Lemma 4.3
_BULK_MU = (128.0, 512.0, 32.0)  # targets for M = Phi Psi where the bulk ends (sigma)
_BULK_MAX_BITS = 4096


def _bulk_steps(n):
    """Exact steps before the bulk of Lemma 4.3: 512, fewer (down to 64) for short prefixes."""
    return max(64, min(_BULK_D, n // 8))


_STEP_BLOCK = 8  # double steps between positivity checks (see _steps_float)
_FROZEN_MIN = 64  # steps left from which _steps_float looks for the frozen tail (_frozen_steps_float)


def _frozen_steps_float(P, Q, tot, kappa, mr, count, summed):
    """The ``count`` steps of :func:`_steps_float` where no step moves ``P``, vectorised; ``None`` where one does.

    If ``P - v_k`` rounds to ``P`` at every step (each ``v_k`` below a quarter of an ulp of ``P``: at
    ``n = 1e300``, ``rho <= 0.9`` from the first step on), the one-step loop's doubles are ``P`` unchanged,
    ``Q_k = (...((Q + 1/P) + 1/P) ...) + 1/P`` (``k`` sequential additions of the one double ``1/P``),
    ``v_k = kappa Q_k^mr`` and ``tot`` the sequential sum of the ``v_k``: ``np.add.accumulate`` adds in that
    order, ``np.float_power`` is the C library's ``pow`` (the function Python's ``**`` calls on positive
    finite doubles; ``np.power`` is not: its SIMD kernels differ in the last bit) and the products and the
    test ``P - v_k == P`` are single IEEE operations. The test is made on every step's ``v_k``, so the
    result is the loop's, bit for bit, whenever it is returned; ``None`` (the caller runs the loop) otherwise.
    """
    step = np.full(count + 1, 1.0 / P)
    step[0] = Q
    qs = np.add.accumulate(step)
    v = np.float_power(qs[1:], mr)
    v *= kappa
    if not bool(np.all(P - v == P)):
        return None
    if summed:
        v[0] += tot  # tot + v_1, then the sequential sum of the rest (the loop's order)
        acc = np.add.accumulate(v)
        # the loop stops summing at the end of the first block of _STEP_BLOCK steps where tot >= 1/2 (it may
        # enter at or above 1/2 with P > 1 or from a caller's state): the partial sum there, as the loop returns it
        ends = acc[_STEP_BLOCK - 1:_STEP_BLOCK * (count // _STEP_BLOCK):_STEP_BLOCK]
        hit = np.flatnonzero(ends >= 0.5)
        tot = float(ends[hit[0]]) if hit.size else float(acc[-1])
    return P, float(qs[-1]), tot


def _frozen_start(P, Q, kappa, rho):
    """Steps after which ``kappa Q^-rho`` stays below a quarter ulp of ``P`` (``Q`` grows by ``>= 1/P`` a step,
    ``P`` does not grow); ``math.inf`` where that is not within reach. Only a guess for :func:`_steps_float`:
    :func:`_frozen_steps_float` tests every step itself."""
    if not (P > 0.0 and kappa >= 0.0 and rho > 0.0):
        return math.inf
    if kappa == 0.0:
        return 0.0
    quarter = 0.25 * math.ulp(P)
    if quarter == 0.0:  # P below 2^-1020: a quarter ulp rounds to zero, no v is below it
        return math.inf
    log_need = (math.log(kappa) - math.log(quarter)) / rho  # log of the Q from which v < ulp(P)/4
    if log_need > 700.0:
        return math.inf
    return max(0.0, (math.exp(log_need) - Q) * P)


def _steps_float(P, Q, tot, kappa, mr, count, summed, frozen=True):
    """``count`` steps ``Q += 1/P; v = kappa Q^mr; P -= v`` (and ``tot += v`` if ``summed``) in doubles.

    Returns ``(P, Q, tot)``, or ``None`` where some ``P`` is not positive. Once ``tot >= 1/2`` (at the
    end of a block) it is no longer summed: ``f_W`` is then read as ``1 - P`` (:func:`_bulk_steps_float`),
    and ``tot`` returned is a partial sum, at least 1/2. The operations are
    those of the one-step loop, in the same order (the same doubles); positivity is checked once
    per block of 8 steps: while ``P > 0`` each ``v > 0``, so ``P`` decreases and a positive ``P``
    at the end of a block proves every ``P`` inside it positive, while a ``P <= 0`` inside a block
    stays non-positive (``Q`` decreases, ``v >= 0``), turns ``nan`` or complex, or raises: each of
    which the check at the block's end turns into ``None``.

    Where the steps left reach the regime in which no step moves ``P`` (``v`` below a quarter ulp of ``P``,
    :func:`_frozen_start`), the loop stops there and :func:`_frozen_steps_float` does the rest vectorised,
    with the same doubles (its docstring); the loop resumes where its test fails.
    """
    if frozen and count >= _FROZEN_MIN:
        k = _frozen_start(P, Q, kappa, -mr)
        if k <= count - _FROZEN_MIN:
            k = int(k)
            k += -k % _STEP_BLOCK
            if k:
                st = _steps_float(P, Q, tot, kappa, mr, k, summed, False)
                if st is None:
                    return None
                P, Q, tot = st
                if tot >= 0.5:
                    summed = False
            fz = _frozen_steps_float(P, Q, tot, kappa, mr, count - k, summed)
            if fz is not None:
                return fz
            return _steps_float(P, Q, tot, kappa, mr, count - k, summed, False)
    blocks, rest = divmod(count, _STEP_BLOCK)
    try:
        if summed:
            for _ in range(blocks):
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                Q += 1.0 / P; v = kappa * Q**mr; tot += v; P -= v  # noqa: E702
                if not P > 0.0:
                    return None
                blocks -= 1
                if tot >= 0.5:  # the rest without the sum (f_W = 1 - P from here on)
                    summed = False
                    break
            if summed:
                for _ in range(rest):
                    Q += 1.0 / P
                    v = kappa * Q**mr
                    tot += v
                    P -= v
        if not summed:
            for _ in range(blocks):
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                Q += 1.0 / P; P -= kappa * Q**mr  # noqa: E702
                if not P > 0.0:
                    return None
            for _ in range(rest):
                Q += 1.0 / P
                P -= kappa * Q**mr
        if not P > 0.0:
            return None
    except (ArithmeticError, TypeError):  # P = 0 divided by, 0 raised to a negative power, a complex P compared
        return None
    return P, Q, tot


def _bulk_steps_float(log_c, rho, D, W, start=None):
    """``D`` steps of Theorem 2's recurrence from ``c = exp(log_c)`` in scaled doubles.

    With ``P = Phi / c``, ``Q = Psi c`` and ``kappa = c^{-(1-rho)}`` a step is
    ``Q += 1/P; v = kappa Q^{-rho}; P -= v`` (``v = v_k / c``). Returns ``(log Phi_D,
    log Psi_D, f_W(c), log(Phi_D / c), state)`` or ``None`` when some ``Phi`` is not positive;
    ``state = (P, Q, tot, D)`` after the ``D`` steps, ``tot`` the sum of the first ``min(W, D)``
    ``v_k / c``. ``start``, such a state after ``k <= min(W, D)`` steps from the same ``log_c``
    (with every step summed), continues it: the same doubles as the ``D`` steps from scratch.

    ``f_W(c) = 1 - Phi_W / c`` is returned as the sum of the ``v_k / c`` below one half (full
    relative accuracy as ``f_W -> 0``) and as ``1 - P_W`` above (full relative accuracy in
    ``1 - f_W`` as ``f_W -> 1``: the sum's rounding, about ``W eps``, was 1e-14 at ``1 - f_W ~ 1e-14``,
    outside the certified enclosure).
    """
    kappa = math.exp(-(1.0 - rho) * log_c)
    mr = -rho
    if start is None:
        P, Q, tot, done = 1.0, 0.0, 0.0, 0
    else:
        P, Q, tot, done = start
    first = min(W, D)
    st = _steps_float(P, Q, tot, kappa, mr, first - done, True)  # the window's steps, summed
    if st is None:
        return None
    P, Q, tot = st
    mass = tot if tot < 0.5 else 1.0 - P
    st = _steps_float(P, Q, tot, kappa, mr, D - first, False)  # the same steps without the sum
    if st is None:
        return None
    P, Q, _ = st
    return log_c + math.log(P), math.log(Q) - log_c, mass, math.log(P), (P, Q, tot, D)


def _bulk_log_count_float(log_c, rho, D, W):
    """``log`` of the continuum count ``e^{J_D} F(Psi_D)`` after ``D`` exact steps (the
    estimate behind Lemma 4.3), with ``f_W(c)``, ``J_D``, ``log(Phi_D / c)`` and the state of
    :func:`_bulk_steps_float`; ``None`` when the trajectory dies first."""
    from scipy.special import gammaincc

    st = _bulk_steps_float(log_c, rho, D, W)
    if st is None:
        return None
    log_p, log_s, tot, log_ratio, state = st
    q = 1.0 - rho
    u = math.exp(q * log_s) / q
    tail = float(gammaincc(1.0 / q, u))
    if not tail > 0.0:
        return None
    return log_p + u + log_normaliser(q) + math.log(tail), tot, log_p + u, log_ratio, state


_BULK_COARSE_D = 32  # exact steps of the coarse solve that seeds the secant of _bulk_solve_float


_BULK_FAST_COARSE_RHO = 0.97  # from this rho the float route's solve is seeded by a coarse solve (_bulk_solve_float)


def _drift_coefficient(rho, D):
    """``A_D = D^(1-rho)/(1-rho) - H_D^(rho)``: the first-order drift ``J_D - log c ~ A_D c^-(1-rho)`` of the
    ``D`` exact steps (Lemma 4.3's count, Lemma 4.10 of proofs/ot_asymptotics.md), by Euler-Maclaurin:
    ``-zeta(rho) - D^-rho/2 + rho D^(-rho-1)/12`` (next term below ``D^(-rho-3)/100``)."""
    from scipy.special import zeta

    return -float(zeta(rho)) - 0.5 * D**-rho + rho * D ** (-rho - 1.0) / 12.0


def _bulk_seed(n, rho, D):
    """``(x0, slope)``: the root of Lemma 4.10's first-order form ``x + log Z_q + A_D e^{-q x} = log n`` of
    the ``D``-step count of Lemma 4.3 (``q = 1 - rho``, ``x = log c``) and its slope there, a seed for the
    secant; ``None`` where Newton on it does not settle (the slope ``1 - q A_D e^{-q x}`` below 0.05)."""
    q = 1.0 - rho
    A = _drift_coefficient(rho, D)
    lz = log_normaliser(q)
    t = math.log(n)
    y = t - lz  # Theorem 4(ii)'s c ~ n / Z_q
    for _ in range(40):
        k = math.exp(-q * y)
        s = 1.0 - q * A * k
        if not (s > 0.05 and math.isfinite(s)):
            return None
        dy = (y + lz + A * k - t) / s  # the function is increasing and concave where s > 0: Newton is safe
        y -= dy
        if abs(dy) <= 1e-15 * max(1.0, abs(y)):
            return y, 1.0 - q * A * math.exp(-q * y)
    return None


def _bulk_solve_float(n, rho, D, W, with_est=False, fast=False):
    """``log c`` with ``D + e^{J_D} F(Psi_D) = n`` (the estimate of Lemma 4.3), secant steps
    safeguarded by a bracket; ``None`` when no bracket is found. With ``with_est``, ``(log c, est)``
    where ``est`` is :func:`_bulk_log_count_float` at that ``log c`` (``None`` if not at hand).

    ``fast`` (the float route, :func:`_bulk_mass_float`): the secant starts from Lemma 4.10's seed
    (:func:`_bulk_seed`, its error ``O(c^-2(1-rho))``: ``1e-9`` at ``n = 1e9``, ``rho = 0.5``, where Theorem
    4(ii)'s guess was ``3e-5`` off) with that form's slope, for ``rho >= 0.97`` from the coarse solve's
    root seeded the same way and moved by the drift ``(A_D - A_32) e^{-q x}`` the 32 steps leave out;
    the bracket's upper end is Lemma 4.1's with ``H_n <= 1 + (n^q - 1)/q`` (no power sum); and the solve
    stops at the first point within the stopping distance of the secant's next iterate on either side
    of the root (the same distance as before, which was accepted on the side ``count >= n`` only and
    took an evaluation more to reach it). The root is that of the same count, to the same distance
    (proofs/ot_asymptotics.md, Lemma 4.10); 1-3 evaluations of 512 steps fewer at ``rho`` from 0.1 to 0.95.

    For ``D > 64`` and ``rho >= 0.95`` the secant starts from the root of the same count after 32
    exact steps, and from that solve's last secant slope: near ``rho = 1`` Theorem 4(ii)'s first
    guess lies hundreds of units of ``log c`` above the root, where the secant on 512 steps took
    10-14 evaluations (1 ms at ``rho = 0.999``); a 32-step evaluation costs 1/16 of one (CPU time
    of the float window mass 0.5-0.8x at ``rho`` in 0.99, 0.999, 1 - 1e-6, measured interleaved).
    Both solves stop by the same rule, so the answer is the 512-step count's root as before (to
    the doubles' noise).
    """
    if fast:
        return _bulk_solve_fast(n, rho, D, W, with_est)
    x0 = slope0 = None
    log_h = math.log(power_sum(1, n, rho))  # Lemma 4.1's end, once for both solves
    if D > 64 and rho >= 0.95:  # below, Theorem 4(ii)'s guess is close and the coarse solve costs more than it saves
        # the coarse root only seeds the secant: 1e-6 in log(count) is far below the 32- vs 512-step gap (1e-2)
        coarse = _bulk_solve_core(n, rho, _BULK_COARSE_D, 0, None, None, log_h=log_h, seed_tol=1e-6)
        if coarse is not None:
            x0, slope0 = coarse[:2]
    out = _bulk_solve_core(n, rho, D, W, x0, slope0, log_h=log_h)
    if out is None:
        return (None, None) if with_est else None
    return (out[0], out[2]) if with_est else out[0]


def _bulk_solve_fast(n, rho, D, W, with_est):
    """:func:`_bulk_solve_float` with ``fast`` (its docstring)."""
    q = 1.0 - rho
    # Lemma 4.1's end with H_n <= 1 + int_1^n s^-rho ds = 1 + (n^q - 1)/q (the sum of a decreasing function)
    log_h = math.log1p(math.expm1(q * math.log(n)) / q)
    seed = None
    if D > 64 and rho >= _BULK_FAST_COARSE_RHO:
        cs = _bulk_seed(n, rho, _BULK_COARSE_D)
        coarse = _bulk_solve_core(
            n, rho, _BULK_COARSE_D, 0, *(cs or (None, None)), log_h=log_h, seed_tol=1e-7, any_side=True
        )
        if coarse is not None:
            xc, sc = coarse[:2]
            shift = (_drift_coefficient(rho, D) - _drift_coefficient(rho, _BULK_COARSE_D)) * math.exp(-q * xc)
            seed = (xc - shift / sc, sc)
    else:
        seed = _bulk_seed(n, rho, D)
    out = _bulk_solve_core(n, rho, D, W, *(seed or (None, None)), log_h=log_h, any_side=True)
    if out is None:
        return (None, None) if with_est else None
    return (out[0], out[2]) if with_est else out[0]


def _bulk_solve_core(n, rho, D, W, x0, slope0, log_h=None, seed_tol=None, any_side=False):
    """The safeguarded secant of :func:`_bulk_solve_float` from ``x0`` with first slope ``slope0``
    (Theorem 4(ii)'s guess and slope 1 when ``None``); returns ``(log c, last slope, evaluation)`` or
    ``None``. ``log_h``: ``log H_n^{(rho)}`` (Lemma 4.1's end) when the caller has it. ``seed_tol``: stop
    at the first point whose ``|log(count) - log(n - D)|`` is below it and return that point (a seed for
    another solve, not an answer: 2-3 evaluations fewer). ``any_side``: the stopping rule's point is
    accepted on either side of the root (Lemma 4.10), not only where ``count >= n``."""
    target = math.log(n - D)
    q = 1.0 - rho
    lo = math.log(n)  # c_n >= n (Theorem 4(iii))
    hi = (math.log(power_sum(1, n, rho)) if log_h is None else log_h) / q  # Lemma 4.1
    if not (math.isfinite(hi) and hi >= lo):
        return None
    hi += 1e-9 * (1.0 + abs(hi))

    lost = [0.0]  # log(c / Phi_D) at the last point: the doubles' count is noise below eps c/Phi_D

    seen = {}  # the evaluations of this solve, so that the answer's own count is not recomputed

    def g(x):
        r = _bulk_log_count_float(x, rho, D, W)
        seen[x] = r
        if r is not None:
            lost[0] = max(0.0, -r[3])
        return -math.inf if r is None else r[0] - target

    # the ends are evaluated only if the iteration needs them (two of the 7..12 evaluations
    # at rho <= 0.99): g(lo) < 0 and g(hi) >= 0 are what Theorem 4(iii) and Lemma 4.1 say of the
    # root; the estimate's own count is checked at hi before answering if no point reached g >= 0
    a, b = lo, hi
    ga = gb = None
    if x0 is None:
        x = min(max(lo - log_normaliser(q), lo), hi)  # Theorem 4(ii)'s c ~ n / Z_q as the first guess
    else:
        x = min(max(x0, lo), hi)
    slope = 1.0 if slope0 is None or not (math.isfinite(slope0) and slope0 > 0.0) else slope0
    x_prev = g_prev = None
    dead = 0
    for _ in range(80):
        gx = g(x)
        if seed_tol is not None and abs(gx) <= seed_tol:
            return x, slope, seen.get(x)
        if gx < 0.0:
            a, ga = x, gx
        else:
            b, gb = x, gx
        tol = 4e-16 * max(1.0, abs(b))
        # near rho = 1 (Phi_D ~ e^-500 c) the count's sign flips at random below its noise and the
        # bracket closed one bit per evaluation (18 evaluations for nothing): stop at the noise
        noise = 4e-16 * math.exp(min(lost[0], 700.0))
        if gx == 0.0 or b - a <= max(tol, noise):
            break
        xn = None
        if x_prev is None and math.isfinite(gx):
            # Newton with the coarse solve's slope, else the slope 1 of log(count) in log c for large n
            # (count ~ c Z_q)
            xn = x - gx / slope
        elif x_prev is not None and math.isfinite(gx) and math.isfinite(g_prev) and gx != g_prev:
            slope = (gx - g_prev) / (x - x_prev)
            xn = x - gx / slope  # secant through the last two points
        elif ga is not None and gb is not None and math.isfinite(ga) and gb != ga:
            xn = a - ga * (b - a) / (gb - ga)  # regula falsi on the bracket
        if gx == -math.inf:
            # the trajectory died within the D steps: the root is above x, at a distance the dead
            # points say nothing about; grow the step geometrically from x (the Lemma 4.1 end b
            # can be 1e6 away near rho = 1, where halving took ~35 evaluations)
            dead = dead + 1 if x_prev is not None and g_prev == -math.inf else 0
            xn = min(x + 2.0**dead, 0.5 * (a + b)) if b - a > 2.0 else None
        if (gx >= 0.0 or (any_side and math.isfinite(gx))) and (
            (xn is not None and abs(xn - x) <= 8.0 * tol) or gx == g_prev
        ):
            # converged to a few ulps of x from the side g >= 0 (or the count stalled at its rounding):
            # x is the answer b; stepping across to close the bracket cost 2-3 more evaluations
            # (any_side: from either side, within the same distance of the next iterate, Lemma 4.10)
            if gx < 0.0:
                return x, slope, seen.get(x)
            break
        if xn is None or not (a < xn < b):
            xn = 0.5 * (a + b)
        elif abs(xn - x) <= 0.5 * tol:
            # converged to the rounding of x: step just across, so that the bracket closes
            xn = min(max(xn + (0.5 * tol if gx < 0.0 else -0.5 * tol), a + 0.25 * tol), b - 0.25 * tol)
        x_prev, g_prev, x = x, gx, xn
    if gb is None and not g(b) >= 0.0:  # no point reached the count n, not even Lemma 4.1's end
        return None
    return b, slope, seen.get(b)  # the end with g >= 0, and its evaluation


_ARB_BLOCK = 32  # Arb steps between positivity checks (see _steps_arb)


def _steps_arb(phi, psi, tot, mr, count):
    """``count`` steps ``psi += 1/phi; v = psi^mr; tot += v; phi -= v`` of Theorem 2's recurrence in Arb.

    Returns ``(phi, psi, tot, status)``: ``status`` is ``True`` when every ``phi`` is proved positive,
    ``False`` when one is proved ``<= 0`` (the state at that step), ``None`` when one is undecided
    (the state at that step). The balls are those of the one-step loop with a check after every
    step: the checks are made once per block of 32 steps. While every ``phi`` is positive each
    ``v > 0`` and ``phi`` decreases, so a ``phi`` proved positive at the end of a block proves every
    exact ``phi`` inside it positive; and a ball not proved positive inside the block (containing 0,
    or below it) makes the later balls infinite, ``nan`` or negative, so the block's end is then
    not proved positive either. Such a block is run again one step at a time from its start,
    which finds the step the checked loop stopped at.
    """
    import flint

    one = flint.arb(1)
    done = 0
    while done < count:
        m = min(_ARB_BLOCK, count - done)
        start = (phi, psi, tot)
        for _ in range(m):
            psi += one / phi
            v = psi**mr
            tot += v
            phi -= v
        if phi > 0:
            done += m
            continue
        phi, psi, tot = start
        for _ in range(m):
            psi += one / phi
            v = psi**mr
            tot += v
            phi -= v
            if phi <= 0:
                return phi, psi, tot, False
            if not phi > 0:
                return phi, psi, tot, None
        return phi, psi, tot, None  # not reached: the block's end was not proved positive
    return phi, psi, tot, True


def _bulk_lifetime_arb(c, n, r, D, W, log_sigma, big=(), search=True):
    """Lemma 4.3 at ``c`` (an exact ``arb``) at the current precision; ``W`` a tuple of windows.

    Returns ``None`` when the ``D`` exact steps already reach ``Phi <= 0`` is undecided,
    else a dict: ``fW`` (``{W: ball of f_W(c)}``, Lemma 4.2), ``dead`` (some ``Phi_k <= 0`` proved
    within the ``D`` steps: then ``c <= c_n``), and, when the hypotheses of Lemma 4.3 are
    verified, ``surv`` and ``death`` (balls): ``surv >= n`` proves ``c > c_n`` and
    ``death <= n`` proves ``c <= c_n``. ``big``: the windows above the exact steps (Corollaries 4.4-4.5,
    :func:`_bulk_big_windows`, whose ``search`` this passes on).
    """
    import flint

    q = 1 - r
    mr = -r
    sums = {}
    phi, psi, tot = c, flint.arb(0), flint.arb(0)
    done = 0
    for k in sorted({w for w in W if 0 < w <= D} | {D}):  # the windows' sums taken on the way
        phi, psi, tot, ok = _steps_arb(phi, psi, tot, mr, k - done)
        if ok is False:
            return {"dead": True}
        if ok is None:
            return None
        done = k
        if k in W:
            sums[k] = tot / c  # f_W(c) = (v_n + ... + v_{n-W+1}) / c (Lemma 4.2)
    P, S = phi, psi
    sums["D"] = tot / c  # f_D(c): every window W >= D has at least this mass
    sums["steps"] = D
    # the state after the D steps, at this precision: _outer_windows continues it (the same balls)
    sums["state"] = (phi, psi, tot, D, flint.ctx.prec)
    out = {"dead": False, "fW": sums}
    Sq = S**q
    J = P.log() + Sq / q
    sigma = flint.arb(log_sigma).exp()
    if not (sigma > 1 and sigma > S):
        return out
    sq = sigma**q

    def f(s):  # e^{-s^q/q}
        return (-(s**q) / q).exp()

    def g(s):  # s^{-rho} e^{s^q/q}
        return s**mr * ((s**q) / q).exp()

    qf = float(q.mid())
    delta = flint.arb(0)
    for _ in range(8):  # the bootstrap of Lemma 4.3: delta_- with B(sigma r) <= delta_-
        j_min = J - delta
        y_star = (-j_min).exp() * g(S).union(g(sigma)).upper()
        mu = j_min.exp() * (S * f(S)).union(sigma * f(sigma)).lower()
        if not (y_star < 1 and mu > 0):
            return out
        rr = 1 + 1 / mu
        w0 = math.nextafter(float(S.log().lower()), -math.inf)
        w1 = math.nextafter(float((sigma * rr).log().upper()), math.inf)
        grid, i_sigma = _bulk_grid(w0, log_sigma, max(w1, log_sigma), qf)
        cum1, cum2 = _chord_cumulative(grid, q, r, j_min)
        k1 = r * rr ** (1 + r)
        k2 = rr ** (2 * r) / (2 * (1 - y_star))
        b_tot = k2 * cum2[-1]
        if b_tot <= delta:
            break
        delta = flint.arb((b_tot * 1.25).upper())
    else:
        return out
    if not (len(grid) > i_sigma > 0 and flint.arb(grid[1]).exp() > S):
        return out  # the first piece of the count integrals must start at Psi_D
    A = [k1 * x for x in cum1]
    B = [k2 * x for x in cum2]
    a_tot = A[-1]
    a_ = 1 / q
    scale = q ** (a_ - 1)
    # the count integrals over a coarser subset of the break points (any subset gives proved
    # bounds: A and B are nondecreasing, so their values at the right end of a merged piece
    # bound them on it); a new point wherever A or B has grown by a sixteenth of its total
    # the points are chosen (in doubles, approximately) so that the growth of A or B across
    # a merged piece times the steps counted in it stays below 1/10 of a step
    from scipy.special import gammaincc

    ww = np.array(grid)
    with np.errstate(under="ignore", over="ignore", divide="ignore", invalid="ignore"):
        log_count = float(J.mid()) + log_normaliser(qf) + np.log(gammaincc(1.0 / qf, np.exp(qf * ww) / qf))
    a_f = np.array([float(x.upper()) for x in A])
    b_f = np.array([float(x.upper()) for x in B])
    keep = [0]
    for k in range(1, len(grid)):
        j = keep[-1]
        grow = max(a_f[k] - a_f[j], b_f[k] - b_f[j])
        if k in (i_sigma, len(grid) - 1) or not grow > 0.0:
            if k in (i_sigma, len(grid) - 1):
                keep.append(k)
            continue
        lj, lk = log_count[j], log_count[k]
        if not np.isfinite(lj):  # no estimate: keep the point
            keep.append(k)
            continue
        # log(steps counted between the two points) = lj + log(1 - e^{lk - lj})
        log_steps = lj + (math.log(-math.expm1(lk - lj)) if lk < lj else -math.inf)
        if math.log(grow) + log_steps > math.log(0.1):
            keep.append(k)
    with arb_precision(min(flint.ctx.prec, 128)):  # 38 digits suffice; the cost grows with precision
        F = {k: scale * ((flint.arb(grid[k]) * q).exp() / q).gamma_upper(a_) for k in keep[1:]}
        F[0] = scale * (Sq / q).gamma_upper(a_)  # the count integrals start at Psi_D itself
    low = flint.arb(0)
    up = flint.arb(0)
    for k0, k in zip(keep[:-1], keep[1:], strict=True):
        dF = F[k0] - F[k]
        if k <= i_sigma:
            low += (-B[k]).exp() * dF
        up += A[k].exp() * dF
    eJ = J.exp()
    sum_y2 = 2 * (1 - y_star) * b_tot
    z_max = ((sigma * rr) ** q - Sq) / (2 * q)
    out["surv"] = D + eJ * low + (sq - Sq) / (2 * q) - sum_y2 / 4
    out["death"] = D + eJ * up + z_max + a_tot / 2 + 1 + (J + a_tot).exp() * sigma * f(sigma) / (sq - 1)
    if big:
        # each window's drift bounds are refined for it alone, so that its enclosure does not depend
        # on the other windows asked (one refinement for all of them moved the 7th digit)
        def local(w):
            return _local_drift((w,), grid, i_sigma, J, S, q, r, j_min, k1, k2, D)

        out["big"] = _bulk_big_windows(big, c, D, J, Sq, q, delta, a_tot, y_star, out["surv"], local, search, n)
    return out


def _local_drift(big, grid, i_sigma, J, S, q, r, j_min, k1, k2, D):
    """Upper bounds of Lemma 4.3's ``A`` and ``B`` on a grid refined near each window's ``Psi_W``
    (Corollary 4.5, proofs/ot_asymptotics.md): ``(grid, A, B)``.

    Any break points give proved upper bounds of ``A`` and ``B`` at those points (the chord
    bound of ``_chord_cumulative``); the points added here (where ``Psi_W`` is estimated in
    doubles, and a little above) only make the bounds at ``Psi_W`` tighter. The main grid of
    Lemma 4.3 is left as it is, so the bracket of ``c_n`` does not depend on the windows asked.
    """
    from scipy.special import gammainc, gammaincinv

    qf = float(q.mid())
    extra = []
    try:
        a_ = 1.0 / qf
        jf = float(J.mid())
        u_s = math.exp(qf * math.log(float(S.mid()))) / qf
        p_s = float(gammainc(a_, u_s))
        rate = math.exp(-jf - log_normaliser(qf))
        for W in big:
            p_w = p_s + (W - D) * rate
            if not 0.0 < p_w < 1.0:
                continue
            u = float(gammaincinv(a_, p_w))
            if math.isfinite(u) and u > 0.0:
                lw = math.log(qf * u) / qf
                extra += [lw + 1e-4 * max(1.0, abs(lw)), lw + 1e-2 * max(1.0, abs(lw))]
    except (OverflowError, ValueError):
        extra = []
    pts = sorted({x for x in grid[:i_sigma] if math.isfinite(x)} | {x for x in extra if grid[0] < x < grid[i_sigma]})
    pts = pts + list(grid[i_sigma:])
    cum1, cum2 = _chord_cumulative(pts, q, r, j_min)
    return pts, [k1 * x for x in cum1], [k2 * x for x in cum2]


_ONE_BELOW = 1.0 - 2.0**-53  # the double next below 1
_PINNED_RATIO = 2.0**-56  # a proved Phi_{n-W}/c below it leaves the double lower end 1 - 2^-53 of m_n(W)


def _bulk_big_windows(big, c, D, J, Sq, q, delta, a_tot, y_star, surv, local=None, search=True, n=None):
    """Corollaries 4.4 and 4.5: balls ``(lo, hi)`` around ``Phi_{n-W}(c) / c`` for windows ``W > D`` inside the bulk.

    With ``W <= I`` (ensured by ``surv >= W``), ``Phi_{n-W} = e^{J_W} f(Psi_W)`` with
    ``J_D - delta <= J_W <= J_D + A``. With ``L(s) = int_0^s f`` (a lower incomplete gamma,
    accurate where the count is a tiny part of ``n``), the count of Lemma 4.3 at ``k = W``
    gives ``L(Psi_W) <= L(Psi_D) + (W - D + (1 - y*) delta / 2) e^{-(J_D - delta)}`` and
    ``L(Psi_W) >= L(Psi_D) + (W - D - z_W - A/2) e^{-(J_D + A)}`` (``z_W`` the trapezoid
    term up to ``Psi_W``); ``L`` increases, so points ``s_+`` with ``L(s_+) >=`` the first and
    ``s_-`` with ``L(s_-) <=`` the second bracket ``Psi_W``, and ``f`` decreases.
    Corollary 4.5: once ``Psi_W <= s_+`` is proved, the drift bounds ``delta`` and ``A`` (over
    the whole bulk, dominated by its far end) are replaced by ``B(s_+)`` and ``A(s_+)`` read on
    the refined grid ``local(W)`` (refined for ``W`` alone) at its first point at or above ``s_+``,
    and ``s_+``, ``s_-`` are recomputed with them. Windows where a bound cannot be proved take the
    lower end of the largest proved window below ``w_max`` (the mass increases in ``W``), else are
    left out; with ``search=False`` they are left out at once (at ``c_lo`` that stand-in, ``(0, hi)``, gives
    only the upper end 1 of the mass, and its search cost 60 % of the certified call at n = 1e6, rho = 0.99).
    """
    import flint
    from scipy.special import gammainccinv, gammaincinv

    a_ = 1 / q
    qf = float(q.mid())
    scale = q ** (a_ - 1)
    Z = scale * flint.arb(a_).gamma()  # Z_q = L(infinity)

    def L(s):
        with arb_precision(min(flint.ctx.prec, 128)):
            return scale * ((s**q) / q).gamma_lower(a_)

    def point(G, up):  # s with L(s) >= G (up) or L(s) <= G (not up): doubles, then proved in Arb
        p_low = float((G / Z).mid())
        p_up = float(((Z - G) / Z).mid())
        if not (0.0 < p_low and 0.0 < p_up):
            return None
        u = float(gammaincinv(1.0 / qf, p_low)) if p_low < 0.5 else float(gammainccinv(1.0 / qf, p_up))
        if not (math.isfinite(u) and u > 0.0):
            return None
        log_s = math.log(qf * u) / qf  # s = (q u)^{1/q}, formed in logarithms (no underflow)
        for nudge in (1e-15, 1e-13, 1e-12, 1e-9, 1e-6, 1e-3):
            s = flint.arb(log_s + (nudge if up else -nudge) * max(1.0, abs(log_s))).exp().mid()
            val = L(s)
            if (up and val >= G) or (not up and val <= G):
                return s
        return None

    def drift_at(s, grid_w):  # (A(s), B(s)) upper bounds: the first refined grid point at or above s
        if grid_w is None:
            return a_tot, delta
        pts, A, B = grid_w
        ls = float(s.log().mid())
        k = bisect.bisect_left(pts, ls)
        while k < len(pts) and not flint.arb(pts[k]).exp() >= s:
            k += 1
        if k >= len(pts):
            return a_tot, delta
        return A[k], B[k]

    def bounds_at(W):
        grid_w = None if local is None else local(W)
        s_plus = point(L_S + (W - D + (1 - y_star) * delta / 2) * (-(J - delta)).exp(), True)
        if s_plus is None:
            return None
        # Corollary 4.5: Psi_W <= s_+, so J_W >= J_D - B(s_+) and the count's y^2 terms are at most 2 (1 - y*) B(s_+)
        _, beta = drift_at(s_plus, grid_w)
        beta = flint.arb(beta.upper()).union(0)
        if beta < delta:
            tighter = point(L_S + (W - D + (1 - y_star) * beta / 2) * (-(J - beta)).exp(), True)
            if tighter is not None and tighter < s_plus:
                s_plus = tighter
        else:
            beta = delta
        alpha, _ = drift_at(s_plus, grid_w)  # J_W <= J_D + A(Psi_W) <= J_D + A(s_+)
        z_w = (s_plus**q - Sq) / (2 * q)  # the trapezoid term of the count up to Psi_W <= s_+
        gain = W - D - z_w - alpha / 2
        s_minus = point(L_S + gain * (-(J + alpha)).exp(), False) if gain > 0 else None
        lo = (J - beta - (s_plus**q) / q).exp() / c
        hi = (J + alpha - (s_minus**q) / q).exp() / c if s_minus is not None else flint.arb(1)
        return lo, hi

    S = Sq ** (1 / q)
    L_S = L(S)
    out = {}
    # the largest window whose count stays below L(infinity) = Z_q (beyond it s_+ does not exist)
    try:
        room = float(((Z - L_S) * (J - delta).exp() - (1 - y_star) * delta / 2).mid())
        w_max = int(min(float(surv.lower()), D + room * (1 - 1e-9))) - 1 if math.isfinite(room) else 0
    except (OverflowError, ValueError):
        w_max = 0
    reach = []

    def reached():
        # the largest window w <= w_max whose bounds are proved: near w_max the count sits next to
        # L(infinity) and s_+ is often not found (then the floor at 4096 was used, and the lower end
        # fell from 0.99999999999 at W = 10566 to 0.999999999 at 12765, n = 7e4, rho = 0.99); any
        # proved w serves (m_n(W) >= m_n(w) for w <= W), the bisection only seeks a large one
        if not reach:
            found, a, b = None, D, w_max  # bounds_at fails at b or beyond; a < any proved candidate
            res = bounds_at(b) if b > D else None
            if res is not None:
                found = (b, res)
            else:
                for _ in range(40):
                    if b - a <= max(1, b >> 20):
                        break
                    m = (a + b) // 2
                    res = bounds_at(m)
                    if res is None:
                        b = m
                    else:
                        a, found = m, (m, res)
                        if res[1].upper() < _PINNED_RATIO:
                            # Phi_{n-m}/c < 2^-56: the window mass's lower end 1 - that rounds outward to
                            # 1 - 2^-53 at m and above, as at any larger proved w: the search is over
                            # (20 more evaluations, 10-20 ms at rho = 0.99, n >= 1e9, for the same doubles)
                            break
            reach.append(found)
        return reach[0]

    for W in big:
        res = bounds_at(W) if surv >= W else None
        if res is None and D < w_max and search:
            # m_n(W) >= m_n(w) for the largest proved w <= w_max (the mass increases in W,
            # Corollary 4.5): the lower end of the window mass from w, the upper end trivial
            # (before: W/n, which fell below the lower ends of smaller windows)
            inner = reached()
            # and 1 - m_n(W) <= (n - W)/(n - w) (1 - m_n(w)) (Corollary 4.8(d): the n - W smallest of the
            # n - w entries beyond w are at most their share of them)
            res = None
            if inner is not None and inner[0] < W:
                share = flint.arb(1) if n is None else flint.arb(n - W) / (n - inner[0])
                res = (flint.arb(0), inner[1][1] * share)
        if res is not None:
            out[W] = res
    return out


def _bulk_grid(w0, w_sigma, w1, q, top=3.0, fine=0.25):
    """Break points in ``w = log s`` on ``[w0, w1]`` with ``w_sigma`` among them (returned
    with its index). Any break points give proved bounds (Lemma 4.3); these keep the
    chord of the convex exponent within about one unit of it, and use steps of ``fine``
    within ``top`` of ``w_sigma`` and above it, where the weights of the count change."""
    pts = [w0]
    w = w0
    while w < w_sigma and len(pts) < 20000:
        curv = q * math.exp(min(q * w, 700.0))
        step = math.sqrt(8.0 / curv) if curv > 0.0 else w_sigma - w
        while step > 1e-6 and q * math.exp(min(q * (w + step), 700.0)) * step * step > 16.0:
            step /= 2
        if w + step > w_sigma - top:
            step = min(step, max(fine, w_sigma - top - w)) if w < w_sigma - top else min(step, fine)
        w = min(w + step, w_sigma)
        pts.append(w)
    i_sigma = len(pts) - 1
    w = w_sigma
    while w1 - w > fine:
        w += fine
        pts.append(w)
    if w1 > pts[-1]:
        pts.append(w1)
    return pts, i_sigma


def _chord_cumulative(grid, q, r, j_min):
    """Upper bounds of ``e^{-j_min} int_{e^{w_0}}^{e^{w_k}} s^{-beta} e^{s^q/q} ds`` for
    ``beta = 1 + rho`` and ``beta = 2 rho`` at every break point ``w_k``.

    In ``w = log s`` the integrand is ``e^{l(w)}``, ``l(w) = -j_min + (1 - beta) w + e^{qw}/q``,
    convex (``l'' = q e^{qw} > 0``): on each piece ``l`` lies below its chord, and the
    integral of ``e^{chord}`` is ``h (e^{l_b} - e^{l_a}) / (l_b - l_a)``.
    """
    import flint

    cum1, cum2 = [flint.arb(0)], [flint.arb(0)]
    prev = None
    for wf in grid:
        w = flint.arb(wf)
        e = (q * w).exp() / q
        ls = (-j_min - r * w + e, -j_min + (1 - 2 * r) * w + e)
        if prev is not None:
            h = w - prev[0]
            vals = []
            for la, lb in zip(prev[1], ls, strict=True):
                d = lb - la
                if not d.contains(0) and abs(float(d.mid())) > 1e-8:
                    vals.append(h * la.exp() * d.expm1() / d)
                else:  # the chord's integral is at most h e^{max(l_a, l_b)}
                    vals.append(h * flint.arb(la.union(lb).upper()).exp())
            cum1.append(cum1[-1] + vals[0])
            cum2.append(cum2[-1] + vals[1])
        prev = (w, ls)
    return cum1, cum2


def _bulk_sigma(J, q, mu):
    """``log sigma > 0`` with ``y(sigma) = sigma^{-rho} e^{sigma^q/q - J} = 1/mu`` (the relative
    step ``v/Phi`` where the bulk ends, were ``J`` constant), or ``None``."""
    lmu = math.log(mu)
    rho = 1.0 - q

    def h(ls):
        return J + rho * ls - math.exp(min(q * ls, 700.0)) / q - lmu

    if not h(0.0) > 0.0:
        return None
    a, b = 0.0, 1.0
    while h(b) > 0.0:
        a, b = b, 2.0 * b
        if b > 1e12:
            return None
    for _ in range(200):
        m = 0.5 * (a + b)
        if h(m) > 0.0:
            a = m
        else:
            b = m
        if b - a <= 1e-12 * b:
            break
    return a


def _bulk_enclosure(n, rho, windows):
    """Proved ``(c_lo, c_hi, fW_lo, fW_hi)`` by Lemma 4.3 (``fW`` balls of ``f_W`` at the ends
    when ``W <= D``), or ``None`` where its hypotheses cannot be verified (then the caller
    keeps Lemma 4.1's bounds).

    Algorithm: ``log c`` estimated in doubles (:func:`_bulk_solve_float`); the bounds of
    Lemma 4.3 evaluated in Arb at the estimate; ends moved by the counts' relative gaps
    over the count's slope in ``log c`` and proved by Lemma 4.3 at those ends (widened and
    retried at most three times).
    """
    import flint

    big = tuple(sorted({int(w) for w in windows if w > _RECUR_W_MAX}))
    small = {int(w) for w in windows if w <= _RECUR_W_MAX}
    # D depends on n alone, so that a window's enclosure never depends on the other windows
    # asked with it; windows inside the exact steps read f_W from them, the others (W <= 4096)
    # are mapped through W steps of the recurrence at the two proved ends afterwards (Lemma 4.2(b))
    D = _bulk_steps(n)
    windows = tuple(sorted(w for w in small if w <= D))
    outer = small - set(windows)
    outer_lo = tuple(sorted(outer))  # at c_lo only the windows asked: f_W(c_lo) is an upper end
    if big:
        # m_n(W) increases in W: every window above the exact steps is at least m_n(4096) >= f_4096(c_hi)
        # (Lemma 4.2(b)), so the lower end cannot drop from W = 4096 to 4097 (Corollary 4.5's floor)
        outer.add(_RECUR_W_MAX)
    outer = tuple(sorted(outer))
    if n <= 4 * D:
        return None
    Wf, W = 0, windows
    x, est = _bulk_solve_float(n, rho, D, Wf, with_est=True)
    if x is None:
        return _bulk_upper_root(n, rho, D, W, math.log(n))
    if est is None:
        est = _bulk_log_count_float(x, rho, D, Wf)
    if est is None or est[3] < -40.0:  # the doubles cancelled: Phi_D / c below e^-40
        return _bulk_upper_root(n, rho, D, W, x)
    q = 1.0 - rho
    h = 1e-6 * max(1.0, abs(x))
    up_, dn_ = _bulk_log_count_float(x + h, rho, D, Wf), _bulk_log_count_float(x - h, rho, D, Wf)
    if up_ is None or dn_ is None:
        return None
    slope = (up_[0] - dn_[0]) / (2 * h)
    if not slope > 0.0:
        return None
    bits = 128 + int(1.45 * -est[3]) + 2 * D.bit_length()
    if bits > _BULK_MAX_BITS:
        return None
    with arb_precision(bits):
        r = arb_from_float(rho)
        for mu in _BULK_MU:
            ls = _bulk_sigma(est[2], q, mu)
            if ls is None:
                continue
            res = _bulk_lifetime_arb(flint.arb(x).exp().mid(), n, r, D, W, ls)
            if res is None or "surv" not in res:
                continue
            gap_hi = max(0.0, math.log(n / float(res["surv"].lower()))) if res["surv"] > 0 else math.inf
            gap_lo = max(0.0, math.log(float(res["death"].upper()) / n))
            if not math.isfinite(gap_hi):
                continue
            ends = []
            for sign, gap, key in ((1, gap_hi, "surv"), (-1, gap_lo, "death")):
                shift = 1.2 * gap / slope + 1e-13 * (1.0 + abs(x))
                found = None
                for _ in range(4):
                    c = flint.arb(x + sign * shift).exp().mid()
                    # sigma placed for this c (J moves with c; near rho = 1 the estimate's sigma left
                    # Lemma 4.3's hypotheses unverified at the lower end, and a second mu was tried)
                    est_c = _bulk_log_count_float(x + sign * shift, rho, D, 0)
                    ls_c = _bulk_sigma(est_c[2], q, mu) if est_c is not None else None
                    # at c_lo (sign < 0) a window beyond the count's reach has only the trivial upper end 1
                    rc = _bulk_lifetime_arb(c, n, r, D, W, ls if ls_c is None else ls_c, big, search=sign > 0)
                    if rc is None or rc["dead"]:
                        break  # undecided, or dead within the exact steps: no f_W there
                    if key in rc:
                        if (sign > 0 and rc["surv"] >= n) or (sign < 0 and rc["death"] <= n):
                            # Corollary 4.4's ratios Phi_{n-W}/c for large windows ride along in fW
                            found = (c, {**rc["fW"], **{("big", w): v for w, v in rc.get("big", {}).items()}})
                            break
                    shift *= 2.0
                if found is None:
                    break
                ends.append(found)
            if len(ends) == 2:
                (c_hi, fw_hi), (c_lo, fw_lo) = ends
                near = {W: _share_windows(n, W, D) for W in outer_lo if 2 * W > n}
                extra = set().union(*near.values()) - set(outer) - set(fw_hi)
                # the windows of Corollary 4.8(d) ride along in the same run (its balls are those of the one-step
                # loop whatever windows it stops at, so the windows asked keep their values)
                _outer_windows(tuple(sorted(set(outer) | extra)), c_hi, fw_hi, r)
                _outer_windows(outer_lo, c_lo, fw_lo, r)
                _next_to_n(n, near, fw_hi, extra)
                return c_lo, c_hi, fw_hi, fw_lo
    res = _bulk_upper_root(n, rho, D, W, x)
    if res is not None:
        with arb_precision(128):
            _outer_windows(outer, res[1], res[2], arb_from_float(rho))
    return res


def _share_windows(n, W, D):
    """The windows ``W' = n - 2^j (n - W)`` with ``D < W' < W`` at which Corollary 4.8(d) is read for ``W``."""
    k = n - W
    return {n - (k << j) for j in range(1, 64) if D < n - (k << j) < W}


def _next_to_n(n, near, fw_hi, extra):
    """Corollary 4.8(d) for the windows next to ``n`` (``near``: ``W -> `` its windows ``W'``, :func:`_share_windows`),
    whose ``f_W(c_hi)`` in ``fw_hi`` is a lower end of ``m_n(W)`` (Lemma 4.2(b)):
    ``1 - m_n(W) <= (n - W)/(n - W') (1 - f_{W'}(c_hi))``. Near ``n`` the ``W`` steps from ``c_hi`` leave
    ``Phi_{n-W}(c_hi)`` far above ``Phi_{n-W}(c_n)`` (the trajectory's end is where it is most sensitive to ``c``):
    ``1 - m`` at ``W = n - 1``, ``n = 2000``, ``rho = 0.9`` was enclosed up to 36614 times its value, 512 times with
    ``W' = n - 256``. Each bound reads the ``f_{W'}(c_hi)`` of the run before any is changed (a window's enclosure
    depends on ``(W, n, rho)`` alone); ``fw_hi[W]`` becomes a ball whose lower end is the largest (only its lower end
    is read); the windows of ``extra`` (not asked) are removed afterwards."""
    import flint

    base = dict(fw_hi)
    for W, cands in near.items():
        if W not in base:
            continue
        low = base[W].lower()
        for Wp in cands:
            if Wp in base:
                # 1 - m_n(W) <= k/K (1 - m_n(W')) <= k/K (1 - f_{W'}(c_hi)), rounded outward by Arb
                low = max(low, (1 - flint.arb(n - W) / (n - Wp) * (1 - base[Wp])).lower())
        if low > base[W].lower():
            fw_hi[W] = flint.arb(low).union(flint.arb(max(low, base[W].upper())))
    for Wp in extra:
        fw_hi.pop(Wp, None)


def _outer_windows(windows, c, fw, r):
    """``f_W(c)`` (Lemma 4.2) by ``W`` steps of the recurrence from a proved end ``c`` of the
    bracket of ``c_n``, for windows beyond Lemma 4.3's exact steps, stored in ``fw``; the
    precision is raised (twice at most) where a ``Phi`` is not proved positive. A window left
    out keeps the other bounds of ``_bounds_mass_arb``."""
    import flint

    todo = sorted(windows)
    bits = max(128, flint.ctx.prec)
    state = fw.get("state")  # Lemma 4.3's D exact steps from this c: the first D steps of the run
    for _ in range(3):  # one run of max(W) steps serves every window (the run does not depend on W)
        if not todo:
            return
        with arb_precision(bits):
            if state is not None and state[4] == bits and state[3] < todo[0]:
                phi, psi, total, done = state[:4]
            else:
                phi, psi, total, done = c, flint.arb(0), flint.arb(0), 0
            mr = -r
            for k in todo:
                phi, psi, total, ok = _steps_arb(phi, psi, total, mr, k - done)
                if not ok:
                    break  # a Phi not proved positive: this window and the larger ones are left out
                done = k
                fw[k] = total / c
        todo = [W for W in todo if W not in fw]
        bits *= 2


def _bulk_upper_root(n, rho, D, W, x0):
    """A cruder proved ``c_hi >= c_n`` alone, by Lemma 4.3(a) at ``log c = x0 + dx`` for growing
    ``dx`` (near ``rho = 1`` the tight bracket fails: ``Phi`` falls below ``e^{-40} c`` within the
    exact steps at ``c`` near ``c_n``, not at larger ``c``). Returns ``(None, c_hi, fW_hi, None)``
    or ``None``; the caller keeps Lemma 4.1's lower end ``c_n >= n``."""
    import flint

    q = 1.0 - rho
    tries = 0
    for dx in (1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6):
        est = _bulk_log_count_float(x0 + dx, rho, D, 0)
        if est is None or est[3] < -40.0:
            continue
        bits = 128 + int(1.45 * -est[3]) + 2 * D.bit_length()
        ls = _bulk_sigma(est[2], q, _BULK_MU[0])
        if ls is None or bits > _BULK_MAX_BITS:
            continue
        tries += 1
        with arb_precision(bits):
            c = flint.arb(x0 + dx).exp().mid()
            rc = _bulk_lifetime_arb(c, n, arb_from_float(rho), D, W, ls)
            if rc is not None and "surv" in rc and rc["surv"] >= n:
                return None, c, rc["fW"], None
        if tries >= 3:
            break
    return None


def _bulk_mass_float(W, n, rho):
    """The float value on the bounds route: ``f_W(c)`` at the estimate of Lemma 4.3's count.

    ``log c`` solves ``D + e^{J_D} F(Psi_D) = n`` in doubles (:func:`_bulk_solve_float` with ``fast``: Lemma
    4.10's seed, the stopping rule on either side, proofs/ot_asymptotics.md) and
    ``f_W`` comes from the same ``D`` exact steps; the value is clipped into
    ``[W/n, H_W n^{rho-1}]`` (Lemma 4.2(c)). ``None`` where the estimate is not available
    (short prefixes, windows above 4096, or ``Phi_D / c < e^{-40}``, where the doubles
    cancel): the caller then uses Theorem 4(ii)'s estimate.
    """
    D = _bulk_steps(n)  # as in _bulk_enclosure: c from D exact steps, then W steps from it if W > D
    if n <= 4 * D:
        return None
    q = 1.0 - rho
    if q < _NEAR_ONE_FLOAT_Q or (q <= _NEAR_ONE_FLOAT_Q_SHORT and n <= _NEAR_ONE_FLOAT_N and 2 * (n - W) > n):
        # near rho = 1 the D steps below lose log(c / Phi_D) digits (e^-40 and beyond), and Lemma 4.3's count
        # from them put m_n(1) 1.5 % low at n = 8193, 1 - rho = 1e-6 (the exact route gave 0.99789 at n = 8192);
        # Lemma 4.9's steps in (M, x) do not cancel and its count keeps the trapezoid terms (proofs/ot_asymptotics.md).
        # For 1e-2 >= 1 - rho >= 1.5e-3 it is used up to n = 2^17: the relative error of 1 - m_n(1) against an mpmath
        # reference was 5.1e-3 -> 3.7e-4 (rho = 0.99) and 8e-2 -> 1.2e-3 (0.999) at n = 257, 4.8e-4 -> 1.6e-5 and
        # 1.7e-2 -> 3.1e-5 at n = 3000; at n = 1e300, rho = 0.99 Lemma 4.3's estimate is the closer (7e-11 off)
        v = _near_one_mass_float(W, n, rho)
        if v is not None and math.isfinite(v):
            return _clip_mass(v, W, n, rho)
    x, est = _bulk_solve_float(n, rho, D, min(W, D), with_est=True, fast=True)
    if x is not None and est is None:
        est = _bulk_log_count_float(x, rho, D, min(W, D))
    if est is None:
        return None
    state = est[4]  # the D steps at x, every one summed when W > D: continued, not recomputed
    if W >= D and state[0] < 2.0**-54:
        # Phi_D / c < 2^-54: the D steps' mass 1 - Phi_D/c rounds to 1, and so does every continuation to W >= D
        # (the mass increases in W): the 4096 further steps and the count (0.4 ms at rho = 0.999) change nothing
        return min(1.0, power_sum(1, W, rho) * _n_to_minus_q(n, rho))
    if 2 * (n - W) <= n and rho <= 0.99:
        # the k = n - W <= n/2 oldest keys from the recurrence run forward from the oldest key (the old-end
        # estimate, proofs/ot_asymptotics.md): the count continued from the query side lost 1 - m there
        # (2.8e2 relative at n = 1e5, rho = 0.9, k = 1: its tail is the difference of two numbers of size one)
        try:
            tail = _old_end_mass_float(n - W, x, rho, state)
        except (ValueError, OverflowError, ZeroDivisionError):  # doubles out of range: the count below answers
            tail = None
        if tail is not None:
            # Lemma 4.2(c)'s W/n, correctly rounded (int / int); 1 - (n - W)/n rounded twice, an ulp below the
            # certified lower end at rho = 1e-300, W = 2n/3, where m = W/n to 1e-300
            return _clip_mass(1.0 - tail, W, n, rho)
    if W > _CONTINUED_W:
        # the D steps of the solve continued by Lemma 4.11's count (the 3584 further double steps to W = 4096 cost
        # 0.4 ms, the count 0.05 ms; proofs/ot_asymptotics.md)
        try:
            cont = _continued_mass_float(x, rho, W, start=state)
        except (ValueError, OverflowError, ZeroDivisionError):  # doubles out of range: Theorem 4(ii) answers
            cont = None
        if cont is None and W <= _RECUR_W_MAX:  # the double steps answer where the count does not
            st = _bulk_steps_float(x, rho, W, W, start=state)
            cont = None if st is None else st[2]
        est = (est[0], cont)
        if est[1] is None:
            return None
    elif W > D:
        st = _bulk_steps_float(x, rho, W, W, start=state)
        if st is None:  # the trajectory from the estimate dies within W steps
            return None
        est = (est[0], st[2])
    # where Phi_D / c < e^-40 the doubles of the exact steps cancel and the estimate of c is
    # rough, but f_W depends on c only through the first W steps, where nothing has cancelled:
    # the value stays an estimate (checked against the enclosure), as everywhere on this route
    return _clip_mass(est[1], W, n, rho)


# --- the float near rho = 1: the lifetime in the variables M = Phi Psi, x = Psi^q (Lemma 4.9) ----------
#
# The steps of Theorem 2 from Phi = c lose log(c / Phi_k) digits in P = Phi / c (e^-40 within 512 steps
# at rho = 1 - 1e-6), so the doubles' estimate of c_n fails there. Written in M_i = P_i S_i and
# x_i = S_i^q (Lemma 4.3's notation; x_1 = c^{-q} = m_n(1)) a step is M <- M + 1 - x', x' = x (1 + 1/M)^q:
# no cancellation, and the root is the a = c^{-q} whose trajectory has M_n = 0 (proofs/ot_asymptotics.md).

_NEAR_ONE_FLOAT_Q = 1.5e-3  # below this 1 - rho the float on the bounds route takes c_n from Lemma 4.9's count ...
_NEAR_ONE_FLOAT_Q_SHORT = 0.0101  # ... and up to this one (rho = 0.99 included) up to n = 2^17 (measured: 14-500x closer to the truth there)
_NEAR_ONE_FLOAT_N = 1 << 17
_NEAR_ONE_K = 64  # exact steps in (M, x) before the continuum count
_NEAR_ONE_FLOAT_EXACT_N = 4096  # from this n and at or below this 1 - rho the float skips the exact route (Lemma 4.9 answers)
_NEAR_ONE_FLOAT_EXACT_Q = 1e-8


def _expm1_minus(y):
    """``e^y - 1 - y`` without cancellation (its Taylor series for ``|y| < 0.1``, 12 terms); elementwise for an array."""
    if type(y) is not float and np.ndim(y):  # a Python float skips np.ndim (2 us, 40 calls in a near-one solve)
        y = np.asarray(y, dtype=float)
        if bool(np.all(np.abs(y) < 0.1)):
            # every entry on the series (Lemma 4.9's quadrature nodes): the same operations, in place, and neither the
            # other branch nor the error state's guard (the terms fall, nothing overflows): the same doubles, 2x faster
            term, total = y.copy(), np.zeros_like(y)
            for k in range(2, 14):
                term *= y
                term /= k
                total += term
            return total
        with np.errstate(over="ignore", invalid="ignore"):
            term, total = y.copy(), np.zeros_like(y)
            for k in range(2, 14):
                term = term * y / k
                total = total + term
            return np.where(np.abs(y) < 0.1, total, np.expm1(y) - y)
    if abs(y) >= 0.1:
        return math.expm1(y) - y
    term, total = y, 0.0
    for k in range(2, 14):
        term *= y / k
        total += term
    return total


def _log_zq_plus(q):
    """``log Z_q + 1/q`` (Theorem 3's normaliser, ``Z_q = q^{1/q-1} Gamma(1/q)``) without the cancellation
    of its terms of size ``1/q``: Stirling's series ``(1/2) log(2 pi / q) + q/12 - q^3/360 + q^5/1260 -
    q^7/1680`` for ``q <= 0.01`` (next term below ``q^9 / 1188``), else the terms as they are."""
    if q <= 0.01:
        return 0.5 * math.log(2.0 * math.pi / q) + q / 12.0 - q**3 / 360.0 + q**5 / 1260.0 - q**7 / 1680.0
    return log_normaliser(q) + 1.0 / q


def _near_one_steps(la, q, K, keep=False):
    """``K - 1`` steps of Lemma 4.9's form of Theorem 2's recurrence from ``M_1 = 1 - a``, ``L_1 = 0``
    (``la = log a``, ``L = log(Psi c)``): ``L += log1p(1/M); M -= expm1(la + q L)``. Returns
    ``(M_K, L_K, logs)``, or ``None`` where some ``M`` is not positive (the trajectory dies: ``c < c_n``);
    with ``keep``, ``logs[k - 1] = log(Phi_{n-k} / c) = log M_k - L_k`` (``k = 1..K``), else ``None``."""
    M = -math.expm1(la)
    if not M > 0.0:
        return None
    L = 0.0
    if keep:
        logs = [math.log(M)]
        for _ in range(K - 1):
            L += math.log1p(1.0 / M)
            M -= math.expm1(la + q * L)
            if not M > 0.0:
                return None
            logs.append(math.log(M) - L)
        return M, L, logs
    log1p, expm1 = math.log1p, math.expm1
    for _ in range(K - 1):
        L += log1p(1.0 / M)
        M -= expm1(la + q * L)
        if not M > 0.0:
            return None
    return M, L, None


_NEAR_ONE_QUAD_LC = 6.0  # below this bulk constant lc the count is Lemma 4.9's integral by quadrature, not its bulk form
_NEAR_ONE_QUAD_P = 2  # the substitution w = (lx_end - lx_K) v^p at the count's end, where M -> 0
_near_one_gl = []  # Gauss-Legendre nodes and weights on [0, 1] (computed once)


def _gamma_inverse(g):
    """``M >= 0`` with ``Gamma(M) = log1p(M) + M log1p(1/M) = g`` for an array ``g >= 0`` (Lemma 4.9's invariant):
    Newton on ``y = log M`` (``f(y) = Gamma(e^y) - g`` is increasing and convex in ``y``: from the start above the
    root, which ``M0`` is, Newton's steps stay above it and converge monotonically), 8 steps from ``M0``: ``e^{g-1}``
    (``Gamma(M) >= 1 + log M``) for ``g >= 1.5``, else ``g / (1 + log(1/g) + ...)`` from ``Gamma(M) <= M (1 + log((1+M)/M))``."""
    small = g < 1.5
    gs = np.where(small, g, 1.0)
    m0 = gs / np.log1p(1.0 / gs)  # Gamma(M) >= M log1p(1/M): M0 above the root where g is small ...
    m0 = gs / (1.0 + np.log1p(1.0 / m0))  # ... and one step of M = g / (1 + log(1/M) + ...) from it
    m0 = np.where(small, np.maximum(m0, gs * 0.5), np.exp(np.minimum(g, 700.0) - 1.0))
    y = np.log(m0)
    for _ in range(8):
        M = np.exp(y)
        mh = np.log1p(1.0 / M)
        mh *= M  # M h(M), formed once (it was formed twice: the same doubles)
        step = np.log1p(M)
        step += mh
        step -= g
        step /= mh
        y -= step
    return np.exp(y)


def _near_one_quad_count(M, lx, inv, q):
    """Lemma 4.9's count of the steps after ``(M_K, lx_K)`` without its bulk approximation: ``int dlx / (q
    log1p(1/M(lx)))`` from ``lx_K`` to ``lx_end`` (``u(lx_end) = inv``, where ``M = 0``), ``M(lx)`` from the invariant
    ``Gamma(M) = inv - u(lx)``; ``0`` where the trajectory has no room (``inv <= u(lx_K)``). Gauss-Legendre (32 nodes)
    after ``lx = lx_end - (lx_end - lx_K) v^2``, which smooths the end's ``1 / log(1 / (lx_end - lx))``."""
    lam = q * inv  # e^l - 1 - l = q inv, l = lx_end > 0 (Newton, convex increasing)
    if not lam > 0.0:
        return 0.0
    le = math.sqrt(2.0 * lam) if lam < 1.0 else math.log(lam) + 1.0
    for _ in range(60):
        step = (_expm1_minus(le) - lam) / math.expm1(le)
        le -= step
        if abs(step) <= 1e-15 * le:
            break
    span = le - lx
    if not span > 0.0:
        return 0.0
    if not _near_one_gl:
        xg, wg = np.polynomial.legendre.leggauss(32)
        _near_one_gl.extend(((xg + 1.0) / 2.0, wg / 2.0))
    v, wv = _near_one_gl
    p = _NEAR_ONE_QUAD_P
    w = span * v**p
    # inv - u(le - w) = u(le) - u(le - w) = (expm1(le - w) expm1(w) + e^w - 1 - w) / q: no cancellation as w -> 0
    em1 = np.expm1(w)
    emm = _expm1_minus(w)
    g = np.maximum((np.expm1(le - w) * em1 + emm) / q, 1e-300)  # at the end's rounding, M tiny and its node ~0
    Mq = np.maximum(_gamma_inverse(g), 1e-300)
    h = np.log1p(1.0 / Mq)
    f = p * span * v ** (p - 1) / (q * h)
    return float(np.dot(wv, f))


def _near_one_log_count(la, q, K, lz, keep=False):
    """``log`` of Lemma 4.9's estimate of the steps after the ``K`` exact ones, the steps' ``(logs, L_K)`` (with
    ``keep``, else ``None``) and the
    bulk's constant ``lc`` (``log(M + 1/2)`` where ``x = 1``, the top of ``M``); ``-inf`` where the trajectory
    dies within them. ``lz = log Z_q + 1/q``."""
    from scipy.special import gammaincc

    st = _near_one_steps(la, q, K, keep)
    if st is None:
        return -math.inf, None, -math.inf
    M, L, logs = st
    logs = (logs, L, M)  # the logs (None without keep), L_K and M_K
    lx = la + q * L
    h = math.log1p(1.0 / M)
    # the near-invariant I = Gamma(M) + u(x) - (1 - x) h(M) / 2, Gamma(M) = log1p(M) + M h(M), u = (x - 1 - log x)/q
    inv = math.log1p(M) + M * h + _expm1_minus(lx) / q + 0.5 * math.expm1(lx) * h
    lc = inv - 1.0  # the bulk: log(M + 1/2) = I - 1 - u(x)
    if lc < _NEAR_ONE_QUAD_LC:
        # little or no bulk (M stays near or below 1: 1 - rho <= 1e-8 and n (1 - rho)^(1/2) below about 5): the bulk
        # form log(1 + 1/M) ~ 1/(M + 1/2) fails there, the count's integral does not (proofs/ot_asymptotics.md)
        cnt = _near_one_quad_count(M, lx, inv, q)
        return (math.log(cnt) if cnt > 0.0 else -math.inf), logs, lc
    tail = float(gammaincc(1.0 / q, math.exp(lx) / q))
    if not tail > 0.0:
        return -math.inf, logs, lc
    log_rem = lc + lz + math.log(tail)
    # less the continuum's steps after its M has reached 0 (M + 1/2 = 1/2 at x0 > 1: u(x0) = lc + log 2)
    lam = q * (lc + math.log(2.0))
    if lam > 0.0:
        l0 = math.sqrt(2.0 * lam) if lam < 1.0 else math.log(lam) + 1.0
        for _ in range(60):  # Newton on e^l - 1 - l = lam (convex and increasing for l > 0)
            step = (_expm1_minus(l0) - lam) / math.expm1(l0)
            l0 -= step
            if abs(step) <= 1e-15 * l0:
                break
        tail0 = float(gammaincc(1.0 / q, math.exp(l0) / q))
        if tail0 > 0.0:
            log_fake = lc + lz + math.log(tail0)
            if log_fake >= log_rem:
                return -math.inf, logs, lc
            log_rem += math.log1p(-math.exp(log_fake - log_rem))
    return log_rem, logs, lc


def _near_one_root_float(n, rho, W=1):
    """``(log a, log_w, log_k, L_K, K)``: Lemma 4.9's estimate of ``a = c_n^{-(1-rho)} = m_n(1)`` (``K`` exact steps and
    the count of :func:`_near_one_log_count` equal to ``n``), with ``log(Phi_{n-k} / c)`` at ``k = W`` (``log_w``,
    ``None`` for ``W > K``) and ``k = K`` (``log_k``), and ``L_K = log(Psi_{n-K+1} c)``; ``None`` where no root is
    found. The secant's evaluations keep only ``(M_K, L_K)``; the steps' logs inside (``W < K``) come from the
    best point's steps run once more (the same doubles).

    A safeguarded secant on ``t = log(-log a)``: the root lies in ``[log((1-rho) log n), log log(1 +
    expm1((1-rho) log n)/(1-rho))]`` (``c_n >= n``, Theorem 4(iii); ``c_n^{1-rho} <= H_n^{(rho)}``, Lemma 4.1);
    first guess from the count's leading order, ``a - 1 - log a = (1-rho)(log n - log(2 pi/(1-rho))/2 + 1)`` (where
    that is below 1, from the small-``I`` form ``n (1-rho)^(1/2) ~ (2 I)^(1/2) G(I)``, proofs/ot_asymptotics.md),
    and its slope ``d log(count)/dt = (-log a)(1 - a)/(1-rho)``."""
    q = 1.0 - rho
    K = min(_NEAR_ONE_K, n // 8)
    if K < 8:
        return None
    log_n = math.log(n)
    lz = _log_zq_plus(q)
    target = math.log(n - K)
    t_a = math.log(q * log_n)  # c = n (Theorem 4(iii)): the count is below n
    t_b = math.log(math.log1p(math.expm1(q * log_n) / q)) + 1e-12  # Lemma 4.1: c^q <= 1 + expm1(q log n) / q
    r = q * (log_n - 0.5 * math.log(2.0 * math.pi / q) + 1.0)
    if r > 0.0:  # e^y - 1 - y = r, y < 0 (Newton from below the root: the function is convex and decreasing)
        y = -math.sqrt(2.0 * r) if r < 0.5 else -r - 1.0
        for _ in range(40):
            step = (_expm1_minus(y) - r) / math.expm1(y)
            y -= step
            if abs(step) <= 1e-12 * abs(y):
                break
        t = math.log(-y) if y < 0.0 else 0.5 * (t_a + t_b)
    else:
        t = 0.5 * (t_a + t_b)
    lead = log_n - 0.5 * math.log(2.0 * math.pi / q)
    if lead < 1.0:
        # little bulk: the first guess from the count's small-I form (proofs/ot_asymptotics.md, Lemma 4.9), n sqrt(q)
        # ~ sqrt(2 I) G(I), G(I) ~ 2 / (1 + log(1 / M_top)), M_top = I / log1p(1 / I), and la ~ -sqrt(2 q I)
        s = (n - K) * math.sqrt(q) / (2.0 * math.sqrt(2.0))
        big_i = min(s * s, 1.0)
        for _ in range(6):
            m_top = big_i / math.log1p(1.0 / big_i)
            big_i = min((s * (1.0 + math.log1p(1.0 / m_top))) ** 2, 4.0)
        t = 0.5 * math.log(2.0 * q * big_i)
    t = min(max(t, t_a), t_b)
    la = -math.exp(t)
    slope = max(-la * -math.expm1(la) / q, 1.0)
    g_prev = t_prev = None
    best = None
    for _ in range(60):
        val, kept, _lc = _near_one_log_count(-math.exp(t), q, K, lz)  # kept: (None, L_K, M_K) where it lives
        gt = val - target
        if gt >= 0.0:
            t_b = t
        else:
            t_a = t
        if math.isfinite(gt) and (best is None or abs(gt) < best[1]):
            # the iterate nearest the root from either side (only those from above were kept: the secant converging
            # from below left 1 - m_n(1) 2e-3 off at n = 2e4, 1 - rho = 1e-12, for a count 3e-15 off)
            best = (t, abs(gt), kept)
        if abs(gt) <= 1e-12 or t_b - t_a <= 4e-16 * abs(t_b):
            break
        tn = None
        if math.isfinite(gt):
            if g_prev is not None and gt != g_prev:
                slope = (gt - g_prev) / (t - t_prev)
            if slope > 0.0:
                tn = t - gt / slope
            g_prev, t_prev = gt, t
        if tn is None or not t_a < tn < t_b:
            tn = 0.5 * (t_a + t_b)
        t = tn
    if best is None:
        return None
    t, _, kept = best
    if kept is None:
        return None
    _, L_k, M_k = kept
    log_k = math.log(M_k) - L_k  # the last of the logs, from the same M_K and L_K (the best point's steps)
    log_w = None
    if W < K:  # the logs inside the steps: that point's steps once more, keeping them (the same doubles)
        kept = _near_one_log_count(-math.exp(t), q, K, lz, keep=True)[1]
        if kept is None:
            return None
        log_w = kept[0][W - 1]
    elif W == K:
        log_w = log_k
    return -math.exp(t), log_w, log_k, L_k, K


def _near_one_mass_float(W, n, rho):
    """The float on the bounds route for ``1 - rho < 1.5e-3`` (and ``<= 0.01`` up to ``n = 2^17``): ``m_n(W) = 1 - Phi_{n-W} / c`` at Lemma 4.9's
    estimate of ``c_n`` (an estimate, measured: proofs/ot_asymptotics.md); ``None`` where it is not available
    (then Lemma 4.3's estimate answers). ``W <= K``: ``-expm1(log M_W - L_W)`` from the steps themselves;
    beyond, ``1`` where ``Phi_{n-K} / c < 2^-54`` (the mass increases in ``W``), else the double steps of
    :func:`_bulk_steps_float` (up to ``D = 512``, and to ``W`` for ``W <= 2048``) and for ``W > 2048`` Lemma 4.11's
    count from the ``D`` steps (:func:`_continued_mass_float`)."""
    res = _near_one_root_float(n, rho, W)
    if res is None:
        return None
    la, log_w, log_k, L_k, K = res
    if W <= K:
        return -math.expm1(log_w)
    if log_k < -54.0 * math.log(2.0):
        return 1.0
    # the state after the K steps in the scaled doubles of _bulk_steps_float (P = Phi / c, Q = Psi c), continued:
    # as Phi falls its rounding stays below eps Phi_{n-K} / c absolutely, and m = 1 - P is what is read
    x = -la / (1.0 - rho)
    start = (math.exp(log_k), math.exp(L_k), -math.expm1(log_k), K)
    D = min(W, _RECUR_W_MAX, _BULK_D)
    st = _bulk_steps_float(x, rho, D, D, start=start)
    if st is None:
        return None
    if st[4][0] * (n - W) < 2.0**-54 * (n - D):
        # 1 - m_n(W) <= (n - W)/(n - D) (1 - m_n(D)) (Corollary 4.8(d)) below 2^-54 at the estimate: m rounds to 1
        return 1.0
    if 2 * (n - W) <= n and st[4][0] * (n - W) <= 2.0**-40 * (n - D):
        # next to n the count from the query side has nothing left to resolve 1 - m (below 2^-40 by Corollary 4.8(d)
        # at the estimate): 1.0, the enclosure's upper end there, without its 4096 steps
        return 1.0
    if W <= _CONTINUED_W:
        st = _bulk_steps_float(x, rho, W, W, start=st[4]) if W > D else st
        return None if st is None else st[2]
    try:
        v = _continued_mass_float(x, rho, W, start=st[4])  # Lemma 4.11's count from the D steps
    except (ValueError, OverflowError, ZeroDivisionError):
        v = None
    if v is None and W <= _RECUR_W_MAX:  # the double steps answer where the count does not
        st2 = _bulk_steps_float(x, rho, W, W, start=st[4])
        v = None if st2 is None else st2[2]
    if v is None and st[4][0] * (n - W) <= 2.0**-40 * (n - D):
        # the count continued past the trajectory's lifetime (windows next to n): 1 - m_n(W) is at most
        # (n - W)/(n - D) (1 - m_n(D)) (Corollary 4.8(d)), below 2^-40 at the estimate, so 1.0, the enclosure's upper
        # end there, is within that of m (the proved bounds' 20-30 ms for the same 1.0 at n = 1e10..1e12,
        # W = n - 1e6, rho = 0.999); further from 1 Lemma 4.3's estimate is tried
        return 1.0
    return v


def _mass_lower(W, n):
    """Lemma 4.2(c)'s lower end ``W/n`` as a double (correctly rounded below ``n = 2^1000``)."""
    return W / n if n < 1 << 1000 else math.exp(math.log(W) - math.log(n))


def _clip_mass(v, W, n, rho):
    """``v`` clipped into Lemma 4.2(c)'s ``[W/n, H_W n^(rho-1)]`` (and below 1), the lower end last.

    Both ends are doubles: as ``rho -> 0`` the upper end ``H_W n^(rho-1)`` tends to ``W/n`` and its
    rounding put it up to two ulps below the rounded ``W/n`` (``rho = 1e-300``, ``W = n - 1``,
    ``n = 2^54 - 1``: 0.9999999999999998 for ``m = W/n`` to 1e-290); ``m >= W/n`` is proved, so the lower
    end wins where the two cross.
    """
    if v < 1.0:
        # the upper end's power sum only where it can bind: H_W >= (W^q - 1)/q + (1 + W^-rho)/2 (the trapezoid
        # rule over-estimates the integral of the convex k^-rho), so below that bound times n^-q (less 1e-9 for
        # the roundings) the minimum is v, the same double as with the sum
        q = 1.0 - rho
        low = (math.expm1(q * math.log(W)) / q + 0.5 * (1.0 + W**-rho)) * _n_to_minus_q(n, rho)
        if v < low * (1.0 - 1e-9):
            return max(v, _mass_lower(W, n))
    return max(min(v, 1.0, power_sum(1, W, rho) * _n_to_minus_q(n, rho)), _mass_lower(W, n))


_OLD_END_K = 64  # exact steps from the oldest key in the old-end estimate (proofs/ot_asymptotics.md)


def _old_end_run(log_s, rho, K, keep=True):
    """``K`` steps of Theorem 2's recurrence run forward from the oldest key, in doubles, scaled by ``S = Psi_1``.

    With ``phi_k = Phi_k S^rho`` and ``psi_k = Psi_k / S``: ``Phi_0 = 0``, ``v_k = Psi_k^{-rho}``,
    ``Phi_k = Phi_{k-1} + v_k``, ``Psi_{k+1} = Psi_k - 1/Phi_k``, i.e. ``phi_k = phi_{k-1} + psi_k^{-rho}``,
    ``psi_{k+1} = psi_k - S^{-q} / phi_k``. Returns the list of ``phi_k`` and ``psi_{K+1}``, or ``None`` where
    some ``psi`` is not positive (``S`` too small for ``K`` keys). Without ``keep``: ``phi_K`` in place of the
    list (the same doubles; the secant of :func:`_old_end_mass_float` needs the end alone)."""
    q = 1.0 - rho
    eps_ = math.exp(-q * log_s)  # S^{-q}
    phi, psi, out = 0.0, 1.0, []
    if not keep:
        mr = -rho
        for _ in range(K):
            phi += psi**mr
            psi -= eps_ / phi
            if not psi > 0.0:
                return None
        return phi, psi
    for _ in range(K):
        phi += psi ** (-rho)
        out.append(phi)
        psi -= eps_ / phi
        if not psi > 0.0:
            return None
    return out, psi


def _old_end_gap(log_s, rho, K, target):
    """``J + (y/2 - rho d/12)`` at the state ``(Phi_K, Psi_{K+1})`` reached from ``Psi_1 = e^{log_s}``, minus ``target``;
    with the scaled ``phi_K`` and ``psi_{K+1}`` of :func:`_old_end_run` (``None`` where the run dies)."""
    run = _old_end_run(log_s, rho, K, keep=False)
    if run is None:
        return None
    phi_k, psi = run
    q = 1.0 - rho
    log_phi = math.log(phi_k) - rho * log_s  # log Phi_K
    log_psi = math.log(psi) + log_s  # log Psi_{K+1}
    y = math.exp(-rho * log_psi - log_phi)
    d = math.exp(-(1.0 + rho) * log_psi - 2.0 * log_phi)
    return log_phi + math.exp(q * log_psi) / q + 0.5 * y - rho * d / 12.0 - target, phi_k, psi


def _old_end_mass_float(k, log_c, rho, state):
    """Estimate of ``Phi_k / c_n = 1 - m_n(n - k)``, the mass of the ``k`` oldest keys
    (the old-end estimate, proofs/ot_asymptotics.md); ``None`` where it is not available.

    The recurrence run forward from the oldest key is fixed by ``S = Psi_1`` alone (``Phi_0 = 0``). ``S`` is
    solved from the near-invariant ``J = log Phi + Psi^q/q`` of Lemma 4.3: at the state after the ``D``
    exact steps from ``c`` (``state``, :func:`_bulk_steps_float`) and at the state after ``K = 64`` steps
    from the oldest key, ``J + y/2 - rho d/12`` agree (the drift estimate of :func:`_drift_estimate`
    between the two points, ``y = Psi^{-rho}/Phi``, ``d = Psi^{-1-rho}/Phi^2``); then ``Phi_k`` comes from
    the same forward steps for ``k <= 64``, and beyond from the count read from the oldest key
    (:func:`_old_end_continued`). An estimate, not a bound: the proved bracket is
    ``0 < Phi_k / c <= k / n`` (Lemma 4.2(c)), which the caller applies.
    """
    q = 1.0 - rho
    P, Q, _, D = state
    log_p = log_c + math.log(P)  # log Phi_D (from the query side)
    log_sd = math.log(Q) - log_c  # log Psi_D
    y_d = math.exp(-rho * log_sd - log_p)
    d_d = math.exp(-(1.0 + rho) * log_sd - 2.0 * log_p)
    target = log_p + math.exp(q * log_sd) / q + 0.5 * y_d - rho * d_d / 12.0
    K = _OLD_END_K
    # first guess from the continuum: Phi_K ~ K Psi^{-rho}, J ~ log Phi_K + Psi^q / q, i.e. the larger root u of
    # h(u) = u - (rho/q) log(q u) - (target - log K + H_K), h convex with its minimum at u = rho/q: Newton from the
    # right (monotone); the fixed-point iteration of the same equation diverged for rho/q > 1 (rho = 0.95, n = 513).
    # H_K: Psi falls by 1/Phi_k ~ S^rho / k a step, so Psi_{K+1}^q / q ~ S^q / q - H_K (without it the guess was
    # 4.7 = H_64 below the root in J, and the secant took 3 more runs to get there)
    a_ = rho / q
    rhs = target - math.log(K) + (0.5772156649015329 + math.log(K) + 0.5 / K - 1.0 / (12.0 * K * K))
    u = 10.0 * max(rhs, a_, 1.0)
    for _ in range(60):
        h = u - a_ * math.log(q * u) - rhs
        slope = 1.0 - a_ / u
        if not (h > 0.0 and slope > 0.0):
            break
        u_new = max(u - h / slope, a_)
        if u - u_new <= 1e-12 * u:
            break
        u = u_new
    x0 = math.log(q * u) / q  # log S
    g0 = _old_end_gap(x0, rho, K, target)
    step = 1e-3 * max(1.0, abs(x0))
    while g0 is None and step < 1e3:  # the run died: S too small
        x0 += step
        step *= 2.0
        g0 = _old_end_gap(x0, rho, K, target)
    if g0 is None:
        return None
    # the second point: Newton with the guess's slope d(gap)/d(log S) ~ S^q - rho (the probe x0 + 1e-4 |x0| where it
    # is not positive); then the secant
    slope0 = math.exp(q * x0) - rho
    x1 = x0 - g0[0] / slope0 if slope0 > 0.0 and abs(g0[0]) < slope0 else x0 + 1e-4 * max(1.0, abs(x0))
    if x1 == x0:
        x1 = x0 + 1e-4 * max(1.0, abs(x0))
    g1 = _old_end_gap(x1, rho, K, target)
    if g1 is None:
        return None
    for _ in range(40):  # secant in log S (the gap increases in S, about like S^q)
        if abs(g1[0]) <= 1e-15 * max(1.0, abs(target)) or g1[0] == g0[0]:
            break
        x2 = x1 - g1[0] * (x1 - x0) / (g1[0] - g0[0])
        g2 = _old_end_gap(x2, rho, K, target)
        if g2 is None:
            x2 = 0.5 * (x1 + x2) if x2 < x1 else x2
            g2 = _old_end_gap(x2, rho, K, target)
            if g2 is None:
                return None
        x0, g0, x1, g1 = x1, g1, x2, g2
    if not abs(g1[0]) <= 1e-9:
        return None
    if k <= K:
        phis = _old_end_run(x1, rho, K)[0]  # the same steps at x1, keeping every phi_k
        return math.exp(math.log(phis[k - 1]) - rho * x1 - log_c)
    return _old_end_continued(k, K, x1, g1[1], g1[2], rho, log_c, target)


def _old_end_continued(k, K, log_s, phi_k, psi_k1, rho, log_c, j_mid):
    """``Phi_k / c`` for ``k > K`` by the count of Lemma 4.3 read from the oldest key (the old-end estimate).

    From the state ``(Phi_K, Psi_{K+1})`` of the forward run (scaled: ``phi_k = Phi_K S^rho``,
    ``psi_k1 = Psi_{K+1} / S``, ``S = e^{log_s}``), ``k - K = e^{J_m} (F(Psi_{k+1}) - F(Psi_{K+1}))`` with
    ``F(s) = Z_q Q(1/q, s^q/q)`` (the upper incomplete gamma: no cancellation however small the tail) and
    ``J_m`` the drift-corrected invariant ``j_mid`` (no trapezoid term: with ``J_i ~ J_m - y_i/2`` the step
    count's ``y_i/2`` and trapezoid ``zeta_i/2`` cancel to first order); then ``Phi_k = e^{J_k - Psi^q/q}`` with
    ``J_k = J_K + (y_K - y_k)/2 + rho (d_k - d_K)/12``. ``None`` where the doubles fail.
    """
    from scipy.special import gammaincc, gammainccinv, gammaincinv

    q = 1.0 - rho
    a_ = 1.0 / q
    try:
        log_phi = math.log(phi_k) - rho * log_s  # log Phi_K
        log_psi = math.log(psi_k1) + log_s  # log Psi_{K+1}
        u_k = math.exp(q * log_psi) / q
        j_k = log_phi + u_k
        y_k = math.exp(-rho * log_psi - log_phi)
        d_k = math.exp(-(1.0 + rho) * log_psi - 2.0 * log_phi)
        tail = float(gammaincc(a_, u_k)) + (k - K) * math.exp(-j_mid - log_normaliser(q))
        if not (math.isfinite(tail) and 0.0 < tail < 1.0):
            return None
        u = float(gammainccinv(a_, tail)) if tail < 0.5 else float(gammaincinv(a_, 1.0 - tail))
        if not (math.isfinite(u) and 0.0 < u <= u_k):
            return None
        log_psi_w = math.log(q * u) / q
        y_w = math.exp(-rho * log_psi_w - (j_mid - u))
        d_w = math.exp(-(1.0 + rho) * log_psi_w - 2.0 * (j_mid - u))
        j_w = j_k + 0.5 * (y_k - y_w) + rho * (d_w - d_k) / 12.0
        return math.exp(j_w - u - log_c)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def _n_to_minus_q(n, rho):
    """``n^{-(1-rho)}`` in doubles, as ``n^rho / n`` for ``rho < 1/2`` (``n`` an int up to 1e300).

    ``exp(-(1 - rho) log n)`` rounds ``log n`` (up to 691) and exp magnifies that: 1.5e-13 relative at
    ``n = 1e300``, ``rho = 1e-300``, where the mass is ``W/n`` to 1e-300 and the clip of the float route
    to ``[W/n, H_W n^{rho-1}]`` (Theorem 4(iii)) left it 2.4e-14 above its certified enclosure. Both
    forms err by about ``min(rho, 1 - rho) log(n) eps`` (plus two roundings), and the clip binds only
    where ``rho`` is small (``m ~ H_W (Z_q/n)^q`` with ``Z_q < 1`` otherwise).
    """
    if rho < 0.5:
        return math.exp(rho * math.log(n)) / float(n)
    return math.exp(-(1.0 - rho) * math.log(n))


@functools.cache
def _gauss_legendre_unit(k):
    """Nodes and weights of the ``k``-point Gauss-Legendre rule on ``[0, 1]``."""
    x, w = np.polynomial.legendre.leggauss(k)
    return 0.5 * (x + 1.0), 0.5 * w


def _continued_mass_float(log_c, rho, W, K=None, start=None):
    """Estimate of ``f_W(c)`` for ``W`` beyond the exact steps: the state after ``K`` double steps of the recurrence
    from ``c``, continued by the count of Lemma 4.3 read with the modified invariant of Lemma 4.11
    (proofs/ot_asymptotics.md).

    With ``J = log Phi + Psi^q / q``, ``y = Psi^{-rho} / Phi`` and ``d = Psi^{-1-rho} / Phi^2``, the modified invariant
    ``J_m = J + y/2 - rho d/12 - y^2/12`` is held fixed (Lemma 4.11(a): its steps move it by third-order terms only),
    and the count ``e^{J_m} (L(Psi_W) - L(Psi_K)) = W - K + (y_K - y_W)/12 + sum_{K <= i < W} y_i^2 / 24`` (Lemma
    4.11(b); the sum of ``y^2`` as the integral of the continuum, ``e^{-J_m} int (q u)^{-rho/q} e^u du`` over
    ``u = Psi^q/q`` from ``u_K`` to ``u_W``, by 12-point Gauss-Legendre) is solved for ``u_W`` through the
    regularised incomplete gamma ``P(1/q, u)`` (twice: the second-order terms at the first solution); then
    ``Phi_W / c = (Phi_K / c) e^{(J_W - J_K) - (u_W - u_K)}`` with ``J_W`` from ``J_m`` at ``W``. The mass is formed as
    ``m_K - (1 - m_K) expm1(...)`` (no cancellation when it is tiny; ``1 - m_K`` is the steps' own ``Phi_K / c`` when
    ``m_K >= 1/2``, see :func:`_bulk_steps_float`). ``None`` where the count runs past the trajectory's lifetime or the
    doubles fail. ``start``: a state of :func:`_bulk_steps_float` from the same ``log_c`` (every step summed);
    ``K``: the steps it is first run to (default: the state's own count, i.e. the state continued as it is).

    An estimate (the third-order terms are left out): measured against the full double recurrence from the same
    ``c`` within 13 units of the documented rounding ``(min(W, 4096) + D + ln c) eps m`` from ``K = 512`` for
    ``W >= 4096`` (``bench/bench_ot_continued.py``); the count of Lemma 4.3 read with ``J`` alone and its trapezoid
    term, which continued 4096 steps before, was up to ``2e6`` units off at ``W = 1e5``.
    """
    from scipy.special import gammainc, gammaincc, gammainccinv, gammaincinv

    if K is None:
        K = 0 if start is None else start[3]
    st = _bulk_steps_float(log_c, rho, K, K, start=start)
    if st is None:
        return None
    log_p, log_s, m_k, _, (p_k, _, _, _) = st
    if W == K:
        return m_k
    q = 1.0 - rho
    a_ = 1.0 / q
    u_k = math.exp(q * log_s) / q
    y_k = math.exp(-rho * log_s - log_p)
    d_k = math.exp(-(1.0 + rho) * log_s - 2.0 * log_p)
    j_m = log_p + u_k + 0.5 * y_k - rho * d_k / 12.0 - y_k * y_k / 12.0  # Lemma 4.11(a)

    def at_w(u_w):
        # log Psi_W, y_W, d_W with log Phi_W = J_W - u_W: y_W first formed at J_m, then at J_m - y_W/2 (its error
        # O(y^3), where y_W at J_m alone was y^2/2 off: 3.8e-10 of m at n = 1e6, rho = 0.9, W = 4097)
        log_s_w = math.log(q * u_w) / q if u_w > 0.0 else log_s
        log_p_w = j_m - u_w
        log_p_w -= 0.5 * math.exp(-rho * log_s_w - log_p_w)
        y_w = math.exp(-rho * log_s_w - log_p_w)
        return log_s_w, y_w, math.exp(-(1.0 + rho) * log_s_w - 2.0 * log_p_w)

    def second_order(u_w):
        # (y_K - y_W)/12 + sum y_i^2 / 24 (Lemma 4.11(b)), the sum as the continuum's integral in u
        y_w = at_w(u_w)[1]
        gx, gw = _gauss_legendre_unit(_GL_NODES)
        u = u_k + gx * (u_w - u_k)
        expo = u - (rho / q) * np.log(q * u) - j_m
        if not float(np.max(expo)) < 700.0:  # the term would overflow: no estimate (the caller falls back)
            return math.inf
        sy2 = (u_w - u_k) * float(np.dot(gw, np.exp(expo)))
        return (y_k - y_w) / 12.0 + sy2 / 24.0

    def series(u):
        # L(s) = s sum_j (-u)^j / (j! (1 + j q)), u = s^q / q: the series of the lower incomplete gamma, six
        # terms (error below u^6 / 720); scipy's inverse incomplete gamma lost up to 3e-5 relative at P ~ 1e-295
        return sum((-u) ** j / (math.factorial(j) * (1.0 + j * q)) for j in range(6))

    lower_k = upper_k = rate = None

    def solve(steps):
        # u_W with e^{J_m} (L(Psi_W) - L(Psi_K)) = steps, or None
        nonlocal lower_k, upper_k, rate
        if not (steps > 0.0 and math.isfinite(steps)):
            return None
        if u_k < 1e-3:
            # small u: solved for log s in logarithms by the series
            log_target = float(np.logaddexp(log_s + math.log(series(u_k)), math.log(steps) - j_m))
            u_w = u_k
            for _ in range(8):
                if u_w >= 1e-3 or not series(u_w) > 0.0:
                    # the count left the series' range (windows near n): the incomplete gamma below takes
                    # over; the six-term series turned negative there and math.log raised
                    break
                u_new = math.exp(q * (log_target - math.log(series(u_w)))) / q
                if abs(u_new - u_w) <= 1e-16 * u_new:
                    u_w = u_new
                    break
                u_w = u_new
            if u_w < 1e-3:
                return u_w
        if rate is None:
            rate = math.exp(-j_m - log_normaliser(q))  # e^{-J_m} / Z_q
            lower_k, upper_k = float(gammainc(a_, u_k)), float(gammaincc(a_, u_k))
        gain = steps * rate
        if not (math.isfinite(gain) and gain < upper_k):
            return None
        u_w = float(gammaincinv(a_, lower_k + gain)) if lower_k + gain < 0.5 else float(gammainccinv(a_, upper_k - gain))
        return u_w if math.isfinite(u_w) and u_w >= u_k else None

    u_w = solve(float(W - K))
    if u_w is None:
        return None
    u_w = solve(float(W - K) + second_order(u_w))  # inf (no estimate) where the term overflows
    if u_w is None:
        return None
    _, y_w, d_w = at_w(u_w)
    # (J_W - J_K) - (u_W - u_K), J_W = J_m - y_W/2 + rho d_W/12 + y_W^2/12 (Lemma 4.11(a))
    d = 0.5 * (y_k - y_w) - rho * (d_k - d_w) / 12.0 - (y_k * y_k - y_w * y_w) / 12.0 - (u_w - u_k)
    return m_k - (1.0 - m_k) * math.expm1(d) if m_k < 0.5 else 1.0 - p_k * math.exp(d)


def _drift_estimate(log_s, log_p, u_k, u_w, q):
    """The drift of ``J = log Phi + Psi^q/q`` from step ``K`` to ``W``, estimated as ``(y_K - y_W)/2``
    with ``y = Psi^{-rho}/Phi`` (Lemma 4.3's one-step identities: ``J_{i+1} - J_i = (zeta_i - x_i) +
    log(1 - x_i) + x_i`` and ``zeta_i - x_i`` is about ``(y_i - y_{i+1})/2``, the trapezoid error of
    the step; the ``x^2`` terms are left out), plus the next Euler-Maclaurin term. Without it the continued estimate was off by the
    Euler-Maclaurin term of the sum of the ``v_k`` (1.4e-5 relative at ``W = 10^4``, ``n = 1e300``)."""
    rho = 1.0 - q
    j_k = log_p + u_k
    y_k = math.exp(-rho * log_s - log_p)
    log_s_w = math.log(q * u_w) / q if u_w > 0.0 else log_s
    y_w = math.exp(-rho * log_s_w - (j_k - u_w))
    # the next Euler-Maclaurin term, (y'(W) - y'(K)) / 12 with y' = dy/dk = -rho Psi^{-1-rho} / Phi^2
    d_k = math.exp(-(1.0 + rho) * log_s - 2.0 * log_p)
    d_w = math.exp(-(1.0 + rho) * log_s_w - 2.0 * (j_k - u_w))
    return 0.5 * (y_k - y_w) + rho * (d_w - d_k) / 12.0


def _bounds_mass_arb(W, n, rho, bulk=True, bulk_res=False, floor=None, lower_only=False):
    """Proved enclosure of ``m_n(W; rho)`` at any ``n`` from bounds on ``c_n`` (route ``"bounds"``).

    Lemma 4.2 (proofs/ot_asymptotics.md): ``m = 1 - N_{n-W}(c_n)`` is decreasing in ``c``
    (Lemma 2.1), so ``[f_W(c_hi), f_W(c_lo)]`` with ``f_W`` the W-step recurrence; for large
    windows Theorem 4(i)'s closed forms at both ends; always ``W/n <= m <= H_W n^{rho-1}``
    (the prior decreases in ``d``; Theorem 4(iii)). Returns ``(lo, hi)`` as floats rounded outward.

    For ``W > 4096`` the lower end is at least that of ``W = 4096`` on every path (``m_n`` increases
    in ``W``; Corollary 4.5's floor): ``floor``, that lower end when the caller has it (one per
    ``n`` for a list), else computed here from the same bracket. With ``lower_only`` (that floor) only
    the lower end is formed: the upper end returned is 1, and the bracket's ``c_lo`` end need not
    carry ``f_W`` (the lower end is the same number as without it).
    """
    import flint

    if W >= n:
        return 1.0, 1.0
    if W > _RECUR_W_MAX and floor is None:  # Corollary 4.5: m_n(W) >= m_n(4096) >= the proved lower end at 4096
        if bulk_res is False:
            bulk_res = _bulk_enclosure(n, rho, (W,)) if bulk else None
        floor = _bounds_mass_arb(_RECUR_W_MAX, n, rho, bulk, bulk_res, lower_only=True)[0]
    floor = 0.0 if floor is None else floor
    with arb_precision(128):
        r = arb_from_float(rho)
        c_lo, c_hi = _c_bounds_arb(n, r)
        H = _power_sum_arb(W, r)
        upper = H * flint.arb(n) ** (r - 1)  # Theorem 4(iii)
        lower = flint.arb(W) / n  # the prior decreases in d
        hi_end = min(1.0, enclosure_from_arb(upper).hi)
        lo_end = enclosure_from_arb(lower).lo
        if bulk_res is False:  # not computed by the caller (it shares one per n between windows)
            bulk_res = _bulk_enclosure(n, rho, (W,)) if bulk else None
        from_bulk = False
        if bulk_res is not None and W <= _RECUR_W_MAX:
            # Lemma 4.3 brackets c_n; f_W at its ends (Lemma 4.2), at the bulk's precision
            _, _, fw_hi, fw_lo = bulk_res
            from_bulk = W in fw_hi and (lower_only or (fw_lo is not None and W in fw_lo))
            if W in fw_hi:
                lo_end = max(lo_end, enclosure_from_arb(fw_hi[W]).lo)
            elif "D" in fw_hi and fw_hi["steps"] <= W:  # W beyond the D exact steps: m_n(W) >= m_n(D) >= f_D(c_hi)
                lo_end = max(lo_end, enclosure_from_arb(fw_hi["D"]).lo)
            if fw_lo is not None and W in fw_lo:
                hi_end = min(hi_end, enclosure_from_arb(fw_lo[W]).hi)
        elif bulk_res is not None:
            c_lo = bulk_res[0] if bulk_res[0] is not None else c_lo
            c_hi = bulk_res[1]
            # Corollary 4.4 and Lemma 4.2: m = 1 - Phi_{n-W}(c_n)/c_n lies between the values at c_hi and c_lo
            at_hi = bulk_res[2].get(("big", W))
            at_lo = bulk_res[3].get(("big", W)) if bulk_res[3] is not None else None
            lo_end = max(lo_end, enclosure_from_arb(bulk_res[2]["D"]).lo)  # m_n(W) >= m_n(D) >= f_D(c_hi)
            if _RECUR_W_MAX in bulk_res[2]:  # m_n(W) >= m_n(4096) >= f_4096(c_hi): monotone across the crossover
                lo_end = max(lo_end, enclosure_from_arb(bulk_res[2][_RECUR_W_MAX]).lo)
            if at_hi is not None:
                lo_end = max(lo_end, enclosure_from_arb(1 - at_hi[1]).lo)
            if at_lo is not None:
                hi_end = min(hi_end, enclosure_from_arb(1 - at_lo[0]).hi)
        if W <= _RECUR_W_MAX and not from_bulk:  # Lemma 4.1's ends add nothing inside Lemma 4.3's
            f_hi = _window_from_c_arb(W, c_hi, r)  # c_hi is above the root: every Phi_k > 0
            f_lo = None if lower_only else _window_from_c_arb(W, c_lo, r)
            if f_hi is not None:
                lo_end = max(lo_end, enclosure_from_arb(f_hi).lo)
            if f_lo is not None:
                hi_end = min(hi_end, enclosure_from_arb(f_lo).hi)
        else:
            # Theorem 4(i): H x (1 - (W-1) x)^rho <= m <= H x, x = c^{rho-1} in [c_hi^{rho-1}, c_lo^{rho-1}];
            # the lower function is unimodal in x: its minimum over the interval is at an end
            lows = []
            for c in (c_lo, c_hi):
                x = c ** (r - 1)
                base = 1 - (W - 1) * x
                lows.append(H * x * base**r if base > 0 else flint.arb(0))
            lo_end = max(lo_end, min(enclosure_from_arb(v).lo for v in lows))
            hi_end = min(hi_end, enclosure_from_arb(H * c_lo ** (r - 1)).hi)
        if 2 * W >= n and not lower_only:
            # Corollary 4.8(e): 1 - m_n(W) = Phi_{n-W}/c_n >= (n - W) v_1 / c_n, v_1 >= H_n^{-rho/(1-rho)} (Lemma 4.7's
            # first step), c_n <= c_hi: the upper end below 1 next to n (it was 1 for every W beyond the count's reach)
            c_top = c_hi if bulk_res is None or bulk_res[1] is None else bulk_res[1]
            c_top = flint.arb(min(c_top.upper(), c_hi.upper()))
            harmonic = _power_sum_arb(n, flint.arb(1))
            t_low = flint.arb(n - W) * (-(r / (1 - r)) * harmonic.log()).exp() / c_top
            hi_end = min(hi_end, enclosure_from_arb(1 - t_low).hi)
        if floor > 0.0 and _RECUR_W_MAX < W < n:
            # Corollary 4.8(d): 1 - m_n(W) <= (n - W)/(n - 4096) (1 - m_n(4096)), sharper than m_n(W) >= m_n(4096)
            share = flint.arb(n - W) / (n - _RECUR_W_MAX)
            floor = max(floor, enclosure_from_arb(1 - share * (1 - arb_from_float(floor))).lo)
    return max(0.0, lo_end, floor), (1.0 if lower_only else min(1.0, hi_end))


def _asymptotic_mass_float(W, n, rho, lo, hi):
    """Theorem 4(ii)'s estimate ``f_W(n / Z_q)`` (``H_W (Z_q/n)^{1-rho}`` for large windows),
    clipped into the proved ``[lo, hi]``; for ``1 - rho < 1e-4`` and ``n < e^{1/(1-rho)}`` the upper end ``hi``."""
    q = 1.0 - rho
    if q < _NEWTON_MIN_SWEEP_Q and q * math.log(n) < 1.0:
        # n < e^(1/q): far outside Theorem 4(ii)'s regime (its estimate was e^-1 = 0.3679 at W = 1, n = 100,
        # rho = 1 - 1e-12, for an exact 0.9999999991). There the proved upper end f_W(n) (c_n >= n) is the
        # estimate: measured within 5e-3 of the exact mass at 1 - rho = 1e-5 and 9e-9 at 1e-12 (n = 64..1000,
        # W = 1, 8, n/2, n - 1; exact from W = 8 on)
        return hi
    log_c = math.log(n) - log_normaliser(q)
    if W <= _RECUR_W_MAX and log_c < 700.0:
        v = _window_from_c_float(W, math.exp(log_c), rho)
    else:
        v = power_sum(1, W, rho) * math.exp(-q * log_c)
    if not math.isfinite(v):
        v = math.sqrt(lo * hi) if lo > 0 else hi / 2
    return min(max(v, lo), hi)




def _pinned_next_to_n(W, n, certified):
    """The answer for a window next to ``n`` that needs no work (Corollary 4.8, proofs/ot_asymptotics.md), or ``None``.

    Lemma 4.2(c): ``W/n <= m_n(W) < 1`` for ``W < n`` (``Phi_{n-W} > 0``). Where ``(n - W) 2^54 <= n``,
    ``m >= 1 - 2^-54`` rounds to nearest to the double ``1.0`` (the float, correctly rounded: a tie goes
    to the even ``1.0``); where ``(n - W) 2^53 <= n``, ``[1 - 2^-53, 1]`` is a proved enclosure and no
    pair of doubles encloses ``m`` more narrowly (the greatest double ``<= m`` is ``1 - 2^-53``, the
    least ``>= m`` is ``1``). Exact integer tests: any ``n`` up to 1e300, in O(1).
    """
    gap = n - W
    if gap <= 0:
        return None
    if certified:
        return (_ONE_BELOW, 1.0) if gap << 53 <= n else None
    return 1.0 if gap << 54 <= n else None


def _exact_affordable(n, rho, certified):
    """The rule, decided before any work, of when the exact O(n) route is used (see Notes of ``ot_window_mass``)."""
    if not certified and n >= _NEAR_ONE_FLOAT_EXACT_N and 1.0 - rho <= _NEAR_ONE_FLOAT_EXACT_Q:
        # the float at 1 - rho <= 1e-8 from n = 4096: Lemma 4.9's estimate (1 - m_n(1) within 1.1e-4 relative of mpmath
        # at n = 4096..8193, 1 - rho = 1e-9..2^-53) in about a millisecond, not Lemma 4.6's certified prior (1-2 s at
        # 1 - rho = 1e-12, n = 4096..8192); the certified route keeps the exact route
        return False
    if n <= _EXACT_NEWTON_MAX and _certified_first(n, rho) and _newton_applies(n, rho):
        # near rho = 1 Lemma 4.6 gives the whole prior, certified, in O(n) per pass (measured 0.3 - 0.6 s at
        # n = 5000, 1 - rho = 1e-6 and 1e-9, where the bounds route's float was 1.5 % off at W = 1): Lemma 4.3's
        # bracket is loose there (only its upper end of c is proved: the float at n = 257, rho = 1 - 1e-6,
        # W = 1 was 0.9725 for an exact 0.99948)
        return True
    if n > (_EXACT_CERT_MAX if certified else _EXACT_FLOAT_MAX):
        if not (certified and n <= _EXACT_CERT_WIDE_MAX and n <= _EXACT_CERT_WORK * (1.0 - rho)):
            return False
    if not certified and n > _EXACT_CERT_MAX and n > _EXACT_FLOAT_WORK * (1.0 - rho):
        return False
    if n <= _EXACT_NEAR_ONE_MAX:
        return True  # the double route, or the certified recurrence within its caps
    if rho > _EXACT_MAX_RHO:
        return False  # the exact route's sweeps grow like 1/(1-rho): Lemma 4.3 answers in O(n/8)
    # the double route's rounding floor 4 (sqrt(n) + 3) eps (1 + |y|) / (1 - rho) with |y| >= log n
    # must stay below the vouching level, else the certified recurrence (work n * bits) is needed
    floor = 4.0 * (math.isqrt(n) + 3) * _EPS * (1.0 + math.log(n)) / (1.0 - rho)
    return 1.0 - rho >= _EXACT_MIN_Q and floor <= _VOUCH_LOG_ERROR


def ot_window_mass(window, n, rho, *, certified=False, return_route=False, method="auto"):
    """Window mass :math:`m_n(W;\\rho) = \\sum_{d<W} \\pi_n(d)` of the constant-score prior.

    Parameters
    ----------
    window, n : int or array_like of int
        ``1 <= window <= n <= 1e300`` (the double ``1e300`` as an exact integer); Python
        ints of any size, numpy integers and object arrays are taken exactly; broadcast
        against each other.
    rho : float
    certified : bool
        Return an :class:`~otprior.Enclosure` proved in ball arithmetic (fields are
        arrays for array input) instead of floats.
    return_route : bool
        Also return which route answered (a string, or an object array of strings):
        ``"exact"`` (Theorem 2 solved), ``"exact-rho0"`` (``rho = 0``: ``W/n``) or
        ``"bounds"`` (proved bounds on ``c_n``, Lemmas 4.1 and 4.2 of
        ``proofs/ot_asymptotics.md``).
    method : {"auto", "exact", "bounds"}
        ``"auto"``: the rule below; ``"exact"``: the exact route whatever ``n`` (within
        the memory and work caps of :func:`ot_prior`, whose errors it raises);
        ``"bounds"``: the bounds route.

    Notes
    -----
    Exact route: :math:`m = -\\mathrm{expm1}(L1_{n-W} - L1_n)`, i.e. ``1 - Phi_{n-W}/Phi_n``
    from the log cumulative sums of the solved scalings where ``m >= 1/2`` (full relative
    accuracy as ``m -> 1``), and the sum of the prior's first ``W`` values, formed from their
    logarithms, where ``m < 1/2`` (full relative accuracy as ``m -> 0``: ``1 - Phi_{n-W}/Phi_n``
    rounded to ``eps / m`` relative there). One solve per distinct ``n``; O(n) time.

    It is used, by a rule decided before any work, when ``n <= 256``, or when
    ``n <= 4096`` (certified: also ``n <= 10^4`` while ``n <= 2 10^4 (1 - rho)``, about 30 ms, where
    the bounds route's width is 1e-2; beyond, up to ``n ~ 1e5``, the bounds route stays 1e-2 to 1e-3
    wide at ``rho <= 0.9`` (Lemma 4.3's ``O(100)/n``) while the exact route's two Arb passes cost
    50-250 ms at ``n = 1.6e4..6.5e4``, ``rho <= 0.5``, and 76 ms at ``n = 1e4``, ``rho = 0.9``:
    ``method="exact"`` asks for them), ``rho <= 0.9`` and the double route's rounding floor
    ``4 (sqrt(n) + 3) eps (1 + log n) / (1 - rho)`` is at most ``1e-6``, or when ``n <= 8192``
    and ``1 - rho < 5e-4`` where Lemma 4.6's route is tried (``ot_prior``'s certified Newton route near
    ``rho = 1``: the whole prior in balls, the masses summed from their ends, 0.3 - 0.6 s at
    ``n = 5000``, where Lemma 4.3's bracket is loose and the bounds route's float was 1.5 % off); where the exact route still refuses,
    the bounds route answers instead. The double value (not
    ``certified``) also takes the exact route for ``4096 < n <= 65536`` while
    ``n <= 2^18 (1 - rho)`` (about 20 ms on one core at ``n = 65536``, ``rho = 0.5``):
    there the bounds route's estimate is off by up
    to its certified width (1e-3 to 1e-5), the exact route by rounding. The same inputs
    always take the same route. Beyond these lengths the exact route costs more than the
    bounds route (O(n) against O(512)) and is narrower where it runs: ``method="exact"``
    asks for it.

    Bounds route (any ``n``, O(min(W, 4096) + min(512, n/8)) time; windows above 4096 by
    Corollaries 4.4-4.5): ``m = f_W(c_n)``
    with ``f_W(c) = 1 - Phi_{n-W}(c)/c`` given by ``W`` steps of Theorem 2's backward
    recurrence (they do not involve ``n``) and decreasing in ``c`` (Lemma 4.2), so any
    proved ``c_lo <= c_n <= c_hi`` gives the enclosure ``[f_W(c_hi), f_W(c_lo)]``. The
    bracket of ``c_n`` comes from Lemma 4.3 (``proofs/ot_asymptotics.md``): the recurrence
    started at ``c`` lives more than ``n`` steps iff ``c > c_n``, and its lifetime is bounded
    from ``D = min(512, n/8)`` exact steps in Arb and the near-invariant ``J = log Phi +
    Psi^{1-rho}/(1-rho)`` of the continuum limit, whose drift is bounded step by step. Its
    relative width is about ``c^{-(1-rho)} D^{-rho} + O(100)/n``: it shrinks as ``n`` grows
    (2e-11 at ``n = 1e18``, ``rho = 0.5``). Near ``rho = 1``, where ``Phi`` falls below
    ``e^{-40} c`` within the exact steps, only an upper end ``c_hi`` is proved (Lemma 4.3(a)
    at a larger ``c``): the enclosure is then ``[f_W(c_hi), ...]`` with a mass close to one.
    Where Lemma 4.3's hypotheses cannot be verified (``n <= 256``) the cruder bounds ``n <=
    c_n <= (H_n^{(rho)})^{1/(1-rho)}`` of Lemma 4.1 are used (their ends differ by a factor
    up to about ``1/(1-rho)``); the enclosure is always intersected with ``[W/n, H_W n^{rho-1}]``. The float value on this
    route is ``f_W`` at Lemma 4.3's estimate of ``c_n`` (its count without the error terms);
    its error is at most the certified enclosure's width plus the rounding of its double
    steps, about ``(min(W, 4096) + D + ln n/(1 - rho)) eps m`` (``log c`` is about ``ln n/(1 - rho)``; measured on a sweep; ``D = min(512, n/8)``; for ``W > 4096``
    and ``rho`` below about ``1e-8`` up to 2.4 times the width, proofs/ot_asymptotics.md); for ``W > 2048``
    the ``D`` double steps are continued by the count of Lemma 4.11 (a modified invariant of Lemma 4.3's
    recurrence, exact to second order: within 44 units of the rounding ``(min(W, 4096) + D + ln n/(1 - rho)) eps m`` of
    the full double steps, measured (2.6e-11 relative at ``n = 39322``, ``rho = 0.85``, ``W = 2049``), and
    0.05 ms where the 3584 steps to ``W = 4096`` took 0.4 ms), and for ``W > 4096`` the
    certified lower end is at least that of ``W = 4096`` (the mass increases in ``W``); where that estimate is not available, Theorem 4(ii)'s
    ``f_W(n / Z_q)`` (a formal limit, not a bound), clipped into the proved enclosure. Near ``rho = 1``
    (``1 - rho < 1.5e-3``, and ``1 - rho <= 0.01`` up to ``n = 2^17``) the float instead takes ``c_n`` from
    Lemma 4.9 (``proofs/ot_asymptotics.md``): Theorem 2's recurrence in ``M = Phi Psi`` and
    ``x = Psi^{1-rho}``, which does not cancel, 64 exact steps and a continuum count with its trapezoid
    terms (in its bulk form where the trajectory's ``M`` grows large, else its integral by Gauss-Legendre,
    where ``M`` stays near or below 1: ``1 - rho <= 1e-8`` and ``n (1 - rho)^(1/2)`` below about 5);
    ``m_n(1) = c_n^{-(1-rho)}`` and ``1 - m_n(W) = M_W e^{-L_W}`` from the steps. For the float (not the
    certified route) it also replaces the exact route at ``1 - rho <= 1e-8`` from ``n = 4096``. An estimate: its
    relative error in ``1 - m_n(1)`` was measured at most ``1.1e-4`` over ``1 - rho`` from ``2^-53`` to
    ``1e-8`` and ``n`` from 4096 to ``1e5``, ``1.3e-5`` at ``1 - rho = 1e-6``, ``n = 8193`` (against Theorem 2's
    recurrence solved in mpmath and in doubles), and falls as ``n`` grows; where the exact route ends
    (``n = 8192``, and ``n = 256`` for ``rho`` in ``(0.9, 0.9995]``) the float moves by that error, not by the
    1.5 % of Lemma 4.3's estimate (``bench/bench_ot_crossover.py``).

    Windows next to ``n`` (Corollary 4.8, ``proofs/ot_asymptotics.md``): ``W/n < m < 1``, so where
    ``(n - W) 2^53 <= n`` the enclosure ``[1 - 2^-53, 1]`` (the narrowest by doubles) and, where
    ``(n - W) 2^54 <= n``, the float ``1.0`` (correctly rounded) are returned at once, for any ``n``. For
    ``W >= n/2`` the float of ``1 - m`` (the mass of the ``n - W`` oldest keys) comes from the
    recurrence run forward from the oldest key, its start ``Psi_1`` fixed by the near-invariant of
    Lemma 4.3, and beyond 64 keys from Lemma 4.3's count read from that end (an estimate: measured
    within 2.2e-3 relative of the exact route at ``n = 1e5``, ``rho <= 0.9``, about the error of the
    estimate of ``c_n``). Every float on the bounds route lies in
    ``[W/n, 1]``, hence within ``(n - W)/n`` of ``m`` (proved). The certified ends next to ``n`` use
    ``1 - m(W) <= (n - W)/(n - W') (1 - m(W'))`` for a proved ``W' < W`` and, for ``W >= n/2``,
    ``1 - m(W) >= (n - W) H_n^{-rho/(1-rho)} / c_hi`` (Corollary 4.8(d), (e)).

    Examples
    --------
    >>> round(ot_window_mass(10, 1024, 0.5), 4)
    0.1111
    >>> ot_window_mass([1, 10], 1024, 0.5).round(4).tolist()
    [0.0225, 0.1111]
    >>> e, route = ot_window_mass(64, 10**18, 0.5, certified=True, return_route=True)
    >>> route, f"{e.lo:.9g}", f"{e.hi:.9g}"   # Lemmas 4.2 and 4.3
    ('bounds', '1.03252185e-08', '1.03252185e-08')
    """
    rho = check_rho(rho)
    if not isinstance(certified, bool):
        raise DomainError("certified", certified, "True or False (a Python bool)")
    if method not in ("auto", "exact", "bounds"):
        raise DomainError("method", method, "'auto', 'exact' or 'bounds'")
    w, nn = _broadcast_ints(window, n)
    shape = w.shape
    wf, nf = w.ravel(), nn.ravel()
    if method == "exact":
        for nk in set(nf.tolist()):
            _check_n_allocation(nk)
    routes = np.empty(wf.size, dtype=object)
    lo, hi, mid, rad = (np.empty(wf.size) for _ in range(4))
    out = np.empty(wf.size)
    for nk in sorted(set(nf.tolist())):
        sel = np.flatnonzero(np.array([x == nk for x in nf]))
        ws = [int(wf[k]) for k in sel]
        done = False
        if rho == 0.0:
            routes[sel] = "exact-rho0"
            if certified:
                import flint

                with arb_precision(128):
                    for k, wk in zip(sel, ws, strict=True):
                        e = enclosure_from_arb(flint.arb(wk) / flint.arb(nk))
                        lo[k], hi[k], mid[k], rad[k] = e.lo, e.hi, e.mid, e.rad
            else:
                for k, wk in zip(sel, ws, strict=True):
                    out[k] = wk / nk if nk < 1 << 1000 else math.exp(math.log(wk) - math.log(nk))
            continue
        if method == "exact" or (method == "auto" and _exact_affordable(nk, rho, certified)):
            try:
                if certified:
                    encl = _certified_masses(nk, rho, np.array(ws, dtype=np.int64))
                    for k, e in zip(sel, encl, strict=True):
                        lo[k], hi[k], mid[k], rad[k] = e.lo, e.hi, e.mid, e.rad
                else:
                    vals = _float_masses(nk, rho, np.array(ws, dtype=np.int64))
                    # clipped into Lemma 4.2(c)'s [W/n, H_W n^(rho-1)] as on the bounds route: the sums' rounding
                    # left 1/4096 at rho = 1e-300 two ulps above the proved upper end (and 3/10001 one below W/n)
                    out[sel] = [_clip_mass(float(v), wk, nk, rho) for v, wk in zip(vals, ws, strict=True)]
                routes[sel] = "exact"
                done = True
            except (DomainError, PrecisionError, ConvergenceError):
                if method == "exact":
                    raise
                done = False  # near rho = 1: the proved bounds answer instead
        if done:
            continue
        routes[sel] = "bounds"
        # windows next to n answered at once (Corollary 4.8, proofs/ot_asymptotics.md): W/n <= m < 1 (Lemma
        # 4.2(c)) pins m to the double 1.0 (float) or to [1 - 2^-53, 1] (certified), the narrowest enclosure
        # by doubles; Lemma 4.3's bracket and the W steps (15-20 ms at n = 1e300) add nothing there
        rest = []
        for k, wk in zip(sel, ws, strict=True):
            pinned = _pinned_next_to_n(wk, nk, certified)
            if pinned is None:
                rest.append((k, wk))
            elif certified:
                lo[k], hi[k] = pinned
                mid[k] = 0.5 * pinned[0] + 0.5 * pinned[1]
                rad[k] = math.nextafter(max(mid[k] - pinned[0], pinned[1] - mid[k]), math.inf)
            else:
                out[k] = pinned
        shared = False
        if certified and any(wk < nk for _, wk in rest):
            # one bracket of c_n (Lemma 4.3) for every window of this n: its ends do not depend
            # on the windows asked (only which f_W are read at them), and each large window's drift
            # bounds are refined for it alone (Corollary 4.5)
            shared = _bulk_enclosure(nk, rho, [wk for _, wk in rest if wk < nk])
        floor = None
        for k, wk in rest:
            if not certified and wk < nk:
                est = _bulk_mass_float(wk, nk, rho)
                if est is not None and (est > _mass_lower(wk, nk) or _clip_mass(1.0, wk, nk, rho) <= est * (1 + 2**-50)):
                    out[k] = est
                    continue
                # an estimate clipped at Lemma 4.2(c)'s lower end W/n while [W/n, H_W n^(rho-1)] is wider than
                # a few ulps (as rho -> 0 the count's doubles lose m - W/n ~ rho: 1.2e-9 below the proved
                # enclosure at rho = 1e-8, W = 8192, n = 1e5): the proved bounds below answer, the float
                # clipped into them
            if floor is None and _RECUR_W_MAX < wk < nk and shared is not False:
                floor = _bounds_mass_arb(_RECUR_W_MAX, nk, rho, bulk_res=shared, lower_only=True)[0]  # one per n
            a, b = _bounds_mass_arb(wk, nk, rho, bulk_res=shared, floor=floor)
            if certified:
                lo[k], hi[k] = a, b
                mid[k] = 0.5 * (a + b)
                rad[k] = math.nextafter(max(mid[k] - a, b - mid[k]), math.inf)
            else:
                out[k] = 1.0 if wk >= nk else _clip_mass(_asymptotic_mass_float(wk, nk, rho, a, b), wk, nk, rho)
    route = _scalar_or_array(routes, shape)
    if certified:
        # a mass lies in [0, 1]: intersecting the proved enclosure with it stays proved
        lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
        mid = np.clip(mid, lo, hi)
        if shape == ():
            res = Enclosure(lo=float(lo[0]), hi=float(hi[0]), mid=float(mid[0]), rad=float(rad[0]))
        else:
            res = Enclosure(lo=lo.reshape(shape), hi=hi.reshape(shape), mid=mid.reshape(shape), rad=rad.reshape(shape))
    else:
        res = float(out[0]) if shape == () else out.reshape(shape)
    return (res, route) if return_route else res


def _float_masses(n, rho, windows):
    if rho == 0.0:
        return windows / n
    res = _solve_or_recur(n, rho, 1e-13, 20_000)
    log_prior = res.log_prior if isinstance(res, OTPrior) else res[0]
    y = log_prior[::-1]  # log v_k - log Phi_n, k = 1..n
    L = _log_cumsum_exp(y)  # log(Phi_k / Phi_n)
    # m = 1 - Phi_{n-W} / Phi_n ; Phi_0 = 0
    idx = n - windows  # number of keys outside the window
    ratio_log = np.where(idx > 0, L[np.maximum(idx - 1, 0)] - L[-1], -np.inf)
    # below one half the mass is summed directly from the prior's own log values, m = Phi-sum of
    # v_n .. v_{n-W+1} over Phi_n: 1 - e^{ratio} lost the relative accuracy as m -> 0 (1/65536 at
    # rho = 1e-300 came out 8.7e-13 low, outside its own certified enclosure)
    Lf = _log_cumsum_exp(log_prior)  # log(v_n + ... + v_{n-k+1}) - log Phi_n, k = 1..n
    direct = np.exp(Lf[np.minimum(windows, n) - 1] - Lf[-1])
    return np.where(direct < 0.5, direct, -np.expm1(ratio_log))


def _certified_masses(n, rho, windows):
    """Enclosures of ``m = 1 - Phi_{n-W}/Phi_n`` (Theorem 2) from two Arb passes.

    The double route gives ``c`` to about ``1e-12`` relative; ``a = c (1 - d)`` and
    ``b = c (1 + d)`` are proved below and above the root by the sign test of Lemma 2.1
    (``d`` grows by ``2**10`` until both signs are proved), and ``N_k = Phi_k / c`` is
    increasing in ``c``, so ``1 - N_{n-W}(b) <= m <= 1 - N_{n-W}(a)``. Two passes of the
    recurrence instead of a bisection; the width is about ``d`` times ``Phi_n/Phi_{n-W}``.
    """
    import flint

    if rho == 0.0:
        out = []
        with arb_precision(128):
            for w in windows:
                out.append(enclosure_from_arb(flint.arb(int(w)) / int(n)))
        return out
    res = _solve_or_recur(n, rho, 1e-13, 20_000)
    if isinstance(res, OTPrior) and res.certified:
        return _masses_from_entries(res, windows)
    if isinstance(res, OTPrior):
        log_prior, log_c = res.log_prior, res.log_c
    else:
        log_prior, log_c = res[0], res[1]
    # only Phi_k, k >= n - W, enter: the digits lost down to there are log10(Phi_n / Phi_{n-W})
    bits = 96 + int(2 * math.log2(n + 1)) + int(3.33 * max(0.0, -float(log_prior[-1]) / math.log(10.0)))
    rho_a = arb_from_float(rho)
    work = _Work(n, rho, _MAX_MASS_WORK)
    for attempt in range(6):
        if bits > _MAX_BITS or n * bits > _MAX_WORK:
            break
        work.check(bits, 2)
        with arb_precision(bits):
            c = flint.arb(log_c).exp().mid()
            d = flint.arb(2) ** (-40 + 10 * attempt)
            a, b = (c * (1 - d)).mid(), (c * (1 + d)).mid()
            sa, phi_a, _, _ = _recurrence_arb(n, rho_a, a, full=True, work=work)
            sb, phi_b, _, _ = _recurrence_arb(n, rho_a, b, full=True, work=work)
            if sb == 0 or sa == 0:
                bits *= 2
                continue
            if sa > 0 or sb < 0:
                continue
            out = []
            for w in windows:
                k = n - int(w)
                if k == 0:  # the whole prefix: Phi_0 = 0 at the root, the mass is exactly one
                    out.append(enclosure_from_arb(flint.arb(1)))
                    continue
                lo = (1 - phi_b[k] / b).lower()
                pa = phi_a[k] if k >= 1 else flint.arb(0)
                hi = (1 - pa / a).upper() if (k == 0 or (pa is not None and pa > 0)) else flint.arb(1)
                out.append(enclosure_from_arb(flint.arb(lo).union(flint.arb(hi))))
            return out
    # fall back to the bisection route (narrower, slower)
    log10_condition = -float(log_prior[-1]) / math.log(10.0)
    _, ratios, _, bits = _certified_prior(n, rho, log_c, log10_condition, 17)
    with arb_precision(bits):
        return [enclosure_from_arb(1 - ratios[n - int(w)]) for w in windows]


def _masses_from_entries(res, windows):
    """Enclosures of ``m = sum_{d<W} pi(d)`` from a certified prior's proved ends ``lo <= pi(d) <= hi``.

    ``m`` lies in ``[sum_{d<W} lo, sum_{d<W} hi]`` and, as the entries sum to one, in
    ``[1 - sum_{d>=W} hi, 1 - sum_{d>=W} lo]``; each sum of doubles is ``math.fsum`` (correctly
    rounded), moved one ulp outward; the intersection is returned.
    """
    lo, hi = res.lo, res.hi
    out = []
    for w in windows:
        w = int(w)
        a = math.nextafter(math.fsum(lo[:w]), -math.inf)
        b = math.nextafter(math.fsum(hi[:w]), math.inf)
        a2 = math.nextafter(math.fsum([1.0, *(-hi[w:])]), -math.inf)
        b2 = math.nextafter(math.fsum([1.0, *(-lo[w:])]), math.inf)
        a, b = max(a, a2, 0.0), min(b, b2, 1.0)
        mid = 0.5 * a + 0.5 * b
        out.append(Enclosure(lo=a, hi=b, mid=mid, rad=math.nextafter(max(mid - a, b - mid), math.inf)))
    return out


def ot_window_law(window, n, rho):
    """Asymptotic window law :math:`H_W^{(\\rho)}\\,(Z_q/n)^{1-\\rho}` (Theorem 4).

    ``m_n(W; rho) = H_W^{(rho)} (Z_q / n)^{1 - rho} (1 + o(1))`` as ``n -> oo``, with
    ``q = 1 - rho`` and ``Z_q = q^{1/q - 1} Gamma(1/q)``. It is an asymptotic law,
    not a bound, and can exceed one for small ``n``. Broadcasts over ``window`` and ``n``.

    Examples
    --------
    >>> round(ot_window_law(10, 1024, 0.5), 4)
    0.1109
    """
    rho = check_rho(rho)
    w, nn = _broadcast_ints(window, n)
    q = 1.0 - rho
    out = np.empty(w.size)
    for k, (wk, nk) in enumerate(zip(w.ravel(), nn.ravel(), strict=True)):
        out[k] = power_sum(1, wk, rho) * math.exp(q * (log_normaliser(q) - math.log(nk)))
    return _scalar_or_array(out, w.shape)


def ot_window_mass_bound(window, n, rho):
    """Non-asymptotic upper bound :math:`m_n(W;\\rho)\\le H_W^{(\\rho)}\\,n^{-(1-\\rho)}` (Theorem 4(iii)).

    Holds at every ``n`` (``proofs/window_law.md``: the column sums of the constant-score
    plan add up to ``n`` and Jensen's inequality gives ``Phi_n >= n``), so every fixed
    window's share vanishes like ``n^{-(1-rho)}``. Evaluated in Arb and returned as the
    upper end of the ball (a proved bound); broadcasts over ``window`` and ``n``.

    Examples
    --------
    >>> b = ot_window_mass_bound(10, 1024, 0.5)
    >>> bool(ot_window_mass(10, 1024, 0.5) <= b)
    True
    """
    import flint

    rho = check_rho(rho)
    w, nn = _broadcast_ints(window, n)
    out = np.empty(w.size)
    with arb_precision(128):
        r = arb_from_float(rho)
        for k, (wk, nk) in enumerate(zip(w.ravel(), nn.ravel(), strict=True)):
            H = _power_sum_arb(wk, r)
            val = H * flint.arb(nk) ** (r - 1)
            out[k] = min(1.0, enclosure_from_arb(val).hi)
    return _scalar_or_array(out, w.shape)


def _power_sum_arb(W, r):
    """:math:`H_W^{(\\rho)} = \\sum_{k\\le W} k^{-\\rho}` as a ball: direct sum for ``W <= 256``,
    else the Hurwitz zeta difference :math:`\\zeta(\\rho, 1) - \\zeta(\\rho, W + 1)` (rigorous in Arb).

    The difference is formed with ``64 + log2(1 / (1 - rho))`` guard bits: near ``rho = 1`` both
    terms are about ``1 / (rho - 1)`` and cancel (at ``rho = 1 - 2^-52`` that lost 52 bits). At
    ``W = 4096`` it costs about 0.1 ms against 5 ms for the 4096 balls of the sum, and its ball
    is narrower (relative radius about ``2^-prec`` against ``W 2^-prec``).
    """
    import flint

    if W <= 256:
        s = flint.arb(0)
        for k in range(1, W + 1):
            s += flint.arb(k) ** (-r)
        return s
    if r == 1:
        return flint.arb(W + 1).digamma() - flint.arb(1).digamma()
    if r == 0:
        return flint.arb(W)
    q = float((1 - r).mid())
    guard = 64 + (int(-math.log2(q)) if 0.0 < q < 1.0 else 0)
    with arb_precision(flint.ctx.prec + guard):
        out = flint.arb.zeta(r, 1) - flint.arb.zeta(r, W + 1)
    return +out  # rounded to the caller's precision


@dataclass(frozen=True)
class DilutionBound:
    """A proved upper bound on the window mass under bounded scores (Theorem 5).

    Attributes
    ----------
    bound : float or ndarray
        The proved upper bound (the upper end of ``enclosure``).
    enclosure : Enclosure
        Ball of :math:`K m^0/(1+(K-1)m^0)` (``mid``, ``rad``, ``lo``, ``hi``).
    m0 : Enclosure
        The certified constant-score window mass.
    log_k : float or ndarray
        :math:`\\log K`.
    route : str or ndarray or None
        Which route gave ``m0`` (see :func:`ot_window_mass`): ``"exact"``,
        ``"exact-rho0"`` or ``"bounds"``.
    """

    bound: object
    enclosure: Enclosure
    m0: Enclosure
    log_k: object
    route: object = None

    def __float__(self):
        return float(self.bound)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.bound, dtype=dtype)

    def __format__(self, spec):
        return format(self.bound if isinstance(self.bound, np.ndarray) else float(self.bound), spec)

    def as_dict(self) -> dict:
        def plain(x):
            return x.tolist() if isinstance(x, np.ndarray) else x

        return {
            "bound": plain(self.bound),
            "enclosure": {k: plain(v) for k, v in self.enclosure.as_dict().items()},
            "m0": {k: plain(v) for k, v in self.m0.as_dict().items()},
            "log_k": plain(self.log_k),
            "route": plain(self.route),
        }


def ot_dilution_bound(window, n, rho, score_bound):
    """Proved upper bound on the window mass for every bounded score matrix (Theorem 5).

    For all scores with :math:`|s_{ij} - c| \\le B` on the prefix (any constant
    ``c``), the window mass of the operator's row ``n`` satisfies, at every ``n``,

    .. math::

        m_n(W) \\le \\frac{K m^0}{1 + (K - 1) m^0},\\qquad
        K = \\exp\\Bigl(\\frac{2B(1+\\rho)}{1-\\rho}\\Bigr),

    where :math:`m^0 = m_n(W;\\rho) \\le H_W^{(\\rho)} n^{-(1-\\rho)}` is the exact
    constant-score window mass (Theorem 4(iii)), so every fixed window receives a
    vanishing share.

    Parameters
    ----------
    window, n : int or array_like of int
        ``1 <= window <= n``; broadcast.
    rho : float
    score_bound : float
        ``B >= 0``.

    Returns
    -------
    DilutionBound
        ``bound`` is the proved upper bound (``float(result)`` gives it).

    Notes
    -----
    ``m0`` is the certified enclosure of :func:`ot_window_mass` (exact up to its
    crossover, the proved bounds of ``proofs/ot_asymptotics.md`` beyond: any ``n`` up to
    1e300 in bounded time); the expression is increasing in ``m0``, so its upper end
    bounds the mass whichever route gave ``m0``. It is evaluated in Arb on the ball, as
    ``1 / (1 + exp(-log K) (1 - m0) / m0)`` (no overflow for any ``B``).

    Examples
    --------
    >>> round(ot_dilution_bound(10, 1024, 0.5, 0.0).bound, 4)   # B = 0: the exact mass
    0.1111
    """
    rho = check_rho(rho)
    B = check_real(score_bound, "score_bound", low=0.0)
    m0, route = ot_window_mass(window, n, rho, certified=True, return_route=True)
    lo_m = np.atleast_1d(np.asarray(m0.lo, dtype=float)).ravel()
    hi_m = np.atleast_1d(np.asarray(m0.hi, dtype=float)).ravel()
    shape = np.shape(m0.lo)
    encl = []
    with arb_precision(128):
        r = arb_from_float(rho)
        b = arb_from_float(B)
        log_k = 2 * b * (1 + r) / (1 - r)

        def share(m):  # K m / (1 + (K - 1) m), increasing in m: evaluated at each end of m0
            ball = arb_from_float(m)
            if m == 0.0:
                return ball
            val = 1 / (1 + (-log_k).exp() * (1 - ball) / ball)  # Theorem 5 (checked in proofs/checks)
            return val

        for lo, hi in zip(lo_m, hi_m, strict=True):
            # the two ends separately: a hull ball of [lo, hi] can straddle 0 when lo << hi
            encl.append(enclosure_from_ends(share(max(lo, 0.0)), share(min(hi, 1.0))))
        lk = float(log_k.mid())
    fields_ = {k: np.array([getattr(e, k) for e in encl]) for k in ("lo", "hi", "mid", "rad")}
    if shape == ():
        enclosure = Enclosure(**{k: float(v[0]) for k, v in fields_.items()})
        bound = min(1.0, enclosure.hi)
    else:
        enclosure = Enclosure(**{k: v.reshape(shape) for k, v in fields_.items()})
        bound = np.minimum(1.0, enclosure.hi)
    return DilutionBound(bound=bound, enclosure=enclosure, m0=m0, log_k=lk, route=route)
