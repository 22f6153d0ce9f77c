"""Double-precision routes for a periodic bias at any length (Theorems 15e and 15f, ``proofs/closed_form_tails.md``).

The certified routes (:func:`otprior.encodings._bias_tail.periodic_sum_arb`, :func:`mixed_sum_arb`) evaluate the
Jacobi–Anger expansion in Arb at ``126 + log2 n`` bits; these evaluate the same formulas in double precision and
stop being the ball's midpoint (2–35 ms) for 0.05–0.5 ms. What cannot be done in double is done exactly, once:

* every phase ``omega k + phi`` (``omega``, ``phi`` exact fractions ``q + q_pi pi`` as written, see ``_const``) is
  reduced modulo ``2 pi`` in integer fixed point with ``log2|omega k| + 80`` fractional bits (:func:`mod_2pi`):
  a few big-integer operations, about 2 µs at ``k = 1e300``; a phase ``m psi`` of the ``m``-th harmonic is then
  ``m`` times the reduced double (absolute error at most ``(2 pi m + 1) eps``);
* the quantities that do not depend on ``n`` (``I_m(beta)``, ``sin(m omega / 2)`` to full relative precision,
  the twisted coefficients ``a_j(z_m)``) are Arb balls rounded to doubles once per bias and cached.

Each sum comes with an a-posteriori bound of its error (rounding, phases, the Bessel tail, and for Theorem 15f the
twisted remainder's estimate and the error of the plain Euler–Maclaurin float of ``sum e^h``); a route answers only
when that bound is at most ``2^-38`` of the sum, else the caller takes the certified route's midpoint as before.
"""

from __future__ import annotations

import functools
import math

import flint
import numpy as np

from .._balls import arb_precision

__all__ = ["mod_2pi", "periodic_log_sum", "mixed_log_sum", "ACCEPT"]

EPS = 2.0**-53  # unit roundoff
ACCEPT = 2.0**-38  # a float sum answers when its error bound is at most this fraction of it (3.6e-12: the
# conditioning (|b| + |x b'| ln n) eps of e^b in double at n = 1e300 is about 1e-12)
_PI_BITS = 4400
_SMALL = 64  # ranges of at most this many terms beyond the head are summed term by term


@functools.lru_cache(maxsize=1)
def _pi_fixed():
    """``floor(pi 2^4400)`` as a Python int (mpmath, private context)."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.prec = _PI_BITS + 64
    return int(ctx.floor(ctx.pi * ctx.mpf(2) ** _PI_BITS))


def _fixed_point(a, b, extra):
    """``(X, pi_F, F)``: ``X = floor(a 2^F) + floor((b mod 2) pi_F)``, ``pi_F`` = pi truncated to ``F`` fractional
    bits, ``F = max(0, log2|a|) + extra`` (``a + b pi`` within ``(|a|/pi + 4) 2^-F`` of ``X 2^-F`` modulo
    ``2 pi``), or ``None`` beyond 4400 bits."""
    an, ad = int(a.p), int(a.q)
    bn, bd = int(b.p), int(b.q)
    F = max(0, an.bit_length() - ad.bit_length() + 1) + extra
    if F + 4 > _PI_BITS:
        return None
    pi_f = _pi_fixed() >> (_PI_BITS - F)
    return (an << F) // ad + ((bn % (2 * bd)) * pi_f) // bd, pi_f, F


def mod_2pi(a, b, extra=80):
    """``(a + b pi) mod 2 pi`` in ``[-pi, pi)`` as a double, for exact fractions ``a``, ``b`` (``fmpq``).

    Fixed point with ``F = max(0, log2|a|) + extra`` fractional bits: ``floor(a 2^F)`` exact, ``b mod 2`` exact,
    ``pi`` truncated to ``F`` bits (error below ``2^-F``), so the remainder is within ``(|a|/pi + 4) 2^-F``, i.e.
    ``2^-(extra - 2)`` absolute, before the final rounding to double. ``None`` beyond 4400 bits."""
    fixed = _fixed_point(a, b, extra)
    if fixed is None:
        return None
    X, pi_f, F = fixed
    r = X % (2 * pi_f)
    if r >= pi_f:
        r -= 2 * pi_f
    return r / (1 << F)  # int / int: correctly rounded


def reduce_pi(a, b, extra=200):
    """``(x, odd)`` with ``a + b pi = j pi + x``, ``|x| <= pi/2``, ``odd = j mod 2``, for exact fractions ``a``, ``b``:
    :func:`mod_2pi`'s fixed point reduced modulo ``pi`` itself, so a small ``x`` keeps full relative precision
    (``omega/2 - pi = 1.8e-15`` for ``omega = 6.28318530717959``). ``None`` beyond 4400 bits."""
    fixed = _fixed_point(a, b, extra)
    if fixed is None:
        return None
    X, pi_f, F = fixed
    j = (2 * X + pi_f) // (2 * pi_f)  # nearest multiple of pi
    return (X - j * pi_f) / (1 << F), bool(j % 2)


def _bessel_plan(beta, bits=60):
    """``(M, ive, tail)``: ``e^{-|beta|} I_m(beta)`` for ``m <= M`` as doubles (Arb's ``bessel_i`` at 128 bits,
    relative error at most ``eps`` after rounding) and ``tail >= 2 e^{-|beta|} sum_{m>M} I_m(|beta|)`` with
    ``tail <= 2^-bits e^{-2|beta|}`` (Theorem 15e's bound; the sum is at least ``e^{-|beta|}`` per term)."""
    from ._bias_tail import _JA_TERMS, _bessel_tail

    with arb_precision(128):
        bb = flint.arb(beta)
        if not (abs(bb) < 150):
            return None
        floor = (-2 * abs(bb)).exp()
        M = max(4, int(float(abs(bb).upper())) + 4)
        while True:
            tail = _bessel_tail(beta, M)
            if tail is not None and 2 * tail * (-abs(bb)).exp() <= floor * flint.arb(2) ** -bits:
                break
            M += max(4, M // 4)
            if M > _JA_TERMS:
                return None
        scale = (-abs(bb)).exp()
        ive = np.array([float((bb.bessel_i(m) * scale).mid()) for m in range(M + 1)])
        tail_f = float((2 * tail * scale).upper())
    return M, ive, tail_f


def _fq(x):
    return flint.fmpq(x)


@functools.lru_cache(maxsize=64)
def _ja_plan(tree):
    """What Theorem 15e's float needs of ``b = beta cos(omega d + phi')`` whatever ``n`` (``None``: not that form,
    or an amplitude at or above 150)."""
    from ._bias_tail import periodic_form

    form = periodic_form(tree)
    if form is None:
        return None
    return _plan_of_form(form)


def _plan_of_form(form):
    beta, kind, omega, phi = form
    bes = _bessel_plan(beta)
    if bes is None:
        return None
    M, ive, tail = bes
    q0, q1 = _fq(omega[0]), _fq(omega[1])
    p0, p1 = _fq(phi[0]), _fq(phi[1]) - (flint.fmpq(1, 2) if kind == "sin" else 0)
    ms = np.arange(1, M + 1)
    whole = np.zeros(M, dtype=bool)
    x = np.zeros(M)
    jodd = np.zeros(M, dtype=bool)
    cos_mphi = np.zeros(M)
    for i, m in enumerate(range(1, M + 1)):
        cos_mphi[i] = math.cos(mod_2pi(m * p0, m * p1))
        if q0 == 0 and (q1 * m / 2).q == 1:  # m omega in 2 pi Z, exactly
            whole[i] = True
            continue
        # m omega / 2 = j pi + x, |x| <= pi/2, x to full relative precision (200 spare bits: a resonance
        # sin(6.28318530717959 d) has x = 1.8e-15)
        x[i], jodd[i] = reduce_pi(m * q0 / 2, m * q1 / 2)
    den = np.where(jodd, -1.0, 1.0) * np.sin(x)
    return dict(beta=beta, M=M, ive=ive, tail=tail, q0=q0, q1=q1, p0=p0, p1=p1, ms=ms, whole=whole, x=x, jodd=jodd,
                den=den, cos_mphi=cos_mphi, absbeta=abs(float(beta)), beta_f=float(beta), omega_red=mod_2pi(q0, q1))


def periodic_log_sum(plan, a, c):
    """``(L, V, rel)``, ``S = V e^L``, with ``S = sum_{k=a}^{c} e^{beta cos(omega k + phi')}`` (Theorem 15e in double precision) and
    ``rel`` a bound of the relative error of ``S`` (rounding, phases, the Bessel tail); ``None`` if not positive.

    ``S = N e^{|beta|} (ive_0 + 2 sum_m ive_m C_m/N)``; ``C_m/N`` from ``sin(m omega N/2) / (N sin(m omega/2))`` times
    ``cos(m psi_s)``, ``psi_s = (omega (a + c)/2 + phi') mod 2 pi``. The numerator is ``(-1)^{N j_m} sin(N x_m)``
    (absolute error ``3 eps N|x_m| + eps``) or ``sin(m psi_N)``, ``psi_N = omega N/2 mod 2 pi`` (error
    ``(2 pi m + 2) eps``), whichever bound is smaller."""
    N = c - a + 1
    if N <= 16:  # a few terms (W = 1, W = n - 1): one by one, each phase reduced exactly (error 2 eps |beta| per term)
        psi = [mod_2pi(k * plan["q0"] + plan["p0"], k * plan["q1"] + plan["p1"]) for k in range(a, c + 1)]
        if None in psi:
            return None
        # the series' cancellation (e^{10 cos} = e^{-10} from terms of size 1) is avoided
        v = plan["beta_f"] * np.cos(np.array(psi))
        top = float(np.max(v))
        return top, float(np.sum(np.exp(v - top))), (plan["absbeta"] * 4 + N + 4) * 2 * EPS
    M, ive, ms, whole, x, jodd, den = (plan[k] for k in ("M", "ive", "ms", "whole", "x", "jodd", "den"))
    q0, q1, p0, p1 = plan["q0"], plan["q1"], plan["p0"], plan["p1"]
    Nf = float(N)
    psi_s = mod_2pi((a + c) * q0 / 2 + p0, (a + c) * q1 / 2 + p1)
    if psi_s is None:
        return None
    # sin(N x) of a double product N x (relative error 2 eps): absolute error 2 eps N|x| + eps |sin(N x)| <= 3 eps N|x|
    err_a = (3 * EPS) * Nf * np.abs(x)
    err_b = (2 * math.pi * ms + 2) * EPS
    use_a = (err_a <= err_b) & (N < 2**53)
    num = np.empty(M)
    if np.any(use_a):
        sign = np.where(jodd & (N % 2 == 1), -1.0, 1.0)
        num_a = sign * np.sin(Nf * x)
        num[use_a] = num_a[use_a]
    if not np.all(use_a):
        psi_n = mod_2pi(N * q0 / 2, N * q1 / 2)
        if psi_n is None:
            return None
        num_b = np.sin(ms * psi_n)
        num[~use_a] = num_b[~use_a]
    err_num = np.where(use_a, err_a, err_b)
    cosf = np.cos(ms * psi_s)
    err_cos = err_b
    with np.errstate(all="ignore"):
        ratio = np.where(whole, 0.0, num / den) / Nf  # sin(m omega N/2) / (N sin(m omega/2)), at most 1 in size
        ratio = np.clip(ratio, -1.0, 1.0)
        cn = np.where(whole, plan["cos_mphi"], ratio * cosf)
        err_c = np.where(whole, 2 * EPS, err_num / (np.abs(den) * Nf) + np.abs(ratio) * (err_cos + 4 * EPS))
    terms = 2 * ive[1:] * cn
    s = ive[0] + float(np.sum(terms))
    absum = ive[0] + float(np.sum(np.abs(terms)))
    err = float(np.sum(2 * ive[1:] * err_c)) + (M + 4) * EPS * absum + plan["tail"]
    if not (s > 0) or not math.isfinite(err):
        return None
    return plan["absbeta"], s * Nf, err / s


# -- Theorem 15f in double precision ---------------------------------------------------------
TWIST_P = 10  # terms of the twisted summation formula in the float route
HEAD = 1 << 12  # direct terms before the twisted sums
_COMB = [[math.comb(j, i) for i in range(j + 1)] for j in range(TWIST_P)]


_DIFF_OPS = 400  # largest derivative of h (operations, sympy's count_ops) the twisted float route builds


@functools.lru_cache(maxsize=32)
def _mixed_plan(b, d, tree):
    """What Theorem 15f's float needs of ``b = h + beta cos(omega d + phi')`` whatever ``n``: the Bessel plan, the
    twisted coefficients ``a_j(z_m)`` (Arb, rounded), ``h`` and its first ``TWIST_P + 1`` derivatives as numpy
    functions, and the head ``b(0..4095)`` with exact phases. ``None`` when not that form."""
    from .._balls import arb_precision as ap
    from ..expression import import_sympy
    from ._bias_tail import Unsupported, _twist_coefficients, compile_bias, periodic_form, periodic_split

    split = periodic_split(tree)
    if split is None:
        return None
    form = split[1]
    idx = [i for i, t in enumerate(tree[1]) if periodic_form(t) is not None]
    if len(idx) != 1 or not b.is_Add or len(b.args) != len(tree[1]):
        return None
    sp = import_sympy()
    h = sp.Add(*[a for i, a in enumerate(b.args) if i != idx[0]])
    plan = _plan_of_form(form)
    if plan is None:
        return None
    p = TWIST_P
    exprs = [h]
    for _ in range(p + 1):
        exprs.append(sp.diff(exprs[-1], d))
        # bounded work for any expression: derivatives of a long product swell (11 of them took minutes and a
        # gigabyte); beyond the cap this route declines and the others answer
        if sp.count_ops(exprs[-1]) > _DIFF_OPS:
            return None
    fns = tuple(lambdify_far(e, d) for e in exprs)
    try:  # h''' as trees (with h) for Theorem 15h's bounds on a range short against its start
        d3 = (compile_bias(h, d), compile_bias(exprs[3], d))
        d1 = (d3[0], compile_bias(exprs[1], d))  # h and h' for _negligible's proof that h decreases
    except Unsupported:
        d3 = d1 = None
    all_fns = lambdify_far(exprs, d)  # h, h', ..., h^(p+1) in one call
    all_math = lambdify_far(exprs, d, "math")  # the same on one float (a tenth of numpy's overhead)
    coefs = np.zeros((plan["M"], p), dtype=complex)
    K = np.zeros(plan["M"])
    with ap(128):
        for i, m in enumerate(range(1, plan["M"] + 1)):
            if plan["whole"][i]:
                continue
            x, odd = reduce_pi(m * plan["q0"] / 2, m * plan["q1"] / 2)  # m omega = 2 j pi + 2 x: z = e^{2 i x}
            z = flint.acb(0, 2 * flint.arb(x)).exp()
            if (z - 1).contains(0):
                return None
            a = _twist_coefficients(z, p)
            coefs[i] = [complex(float(c.real.mid()), float(c.imag.mid())) for c in a]
            K[i] = sum(abs(coefs[i, j]) / math.factorial(p - j) for j in range(p))
    phases = np.array([mod_2pi(k * plan["q0"] + plan["p0"], k * plan["q1"] + plan["p1"]) for k in range(HEAD)])
    with np.errstate(all="ignore"):
        hh = np.asarray(fns[0](np.arange(HEAD, dtype=float)), dtype=float) * np.ones(HEAD)
    head = hh + float(form[0]) * np.cos(phases)
    if not np.all(np.isfinite(head)):
        return None
    head.flags.writeable = False
    top = float(np.max(head))
    head_all = (top, float(np.sum(np.exp(head - top))),
                (4 * float(np.max(np.abs(hh))) + abs(float(form[0])) * 8 + 2 * 12 + 16) * EPS)  # all 4096 terms, once
    # (numpy's pairwise summation: about log2(count) eps, doubled)
    deriv = functools.lru_cache(maxsize=4)(functools.partial(_derivatives, all_math, all_fns))
    plan = dict(plan, fns=fns, d3=d3, d1=d1, all_fns=all_fns, deriv=deriv, coefs=coefs, abscoefs=np.abs(coefs), K=K, head_all=head_all, ive1=plan["ive"][1:].copy(),
                err_m=(2 * math.pi * plan["ms"] + 2 * p + 4) * EPS, any_whole=bool(np.any(plan["whole"])), head=head, hmax=float(np.max(np.abs(hh))))
    return plan


def _direct(plan, a, c):
    """``(L, V, rel)`` (the sum is ``V e^L``) of ``e^{b(k)}``, ``a <= k <= c`` (at most 64 terms beyond the head), the phases from one exact
    reduction at ``a`` plus multiples of ``omega mod 2 pi``; ``h`` at ``float(k)``."""
    L = c - a + 1
    psi = mod_2pi(a * plan["q0"] + plan["p0"], a * plan["q1"] + plan["p1"])
    if psi is None:
        return None
    j = np.arange(L, dtype=float)
    ks = float(a) + j
    with np.errstate(all="ignore"):
        hv = np.asarray(plan["fns"][0](ks), dtype=float) * np.ones(L)
        h1 = np.asarray(plan["fns"][1](ks), dtype=float) * np.ones(L)
    v = hv + plan["beta_f"] * np.cos(psi + j * plan["omega_red"])
    if not np.isfinite(v).all():
        return None
    # phase error (2 pi L + 2) eps times |beta|; h's argument float(k) (relative eps) times |h'| k; h itself |h| eps
    # (ndarray methods: the same reductions as np.max and np.sum)
    rel = (abs(plan["beta_f"]) * (2 * math.pi * L + 4) + float((np.abs(h1) * ks + np.abs(hv)).max()) + L + 4) * 2 * EPS
    top = float(v.max())
    return top, float(np.exp(v - top).sum()), rel


def _derivatives(all_math, all_fns, x):
    """``(h(x), h'(x), ..., h^(11)(x))`` as floats (sympy's derivatives lambdified for the ``math`` module, one call; numpy
    where ``math`` raises, e.g. an overflow), ``None`` if one is not finite. Cached per bias for the last four points (the
    window's end ``W`` is the end of one sum and the start of the other)."""
    xf = float(x)
    try:
        out = tuple(float(v) for v in all_math(xf))
    except (OverflowError, ValueError, ZeroDivisionError, TypeError):
        with np.errstate(all="ignore"):
            out = tuple(float(np.asarray(v, dtype=float).ravel()[0]) for v in all_fns(np.array([xf])))
    return out if all(math.isfinite(v) for v in out) else None


def _twisted(plan, a, c):
    """``(L, V, rel)`` (the sum is ``V e^L``) of ``e^{b(k)}``, ``a <= k <= c`` (``a >= 4096``), by Theorem 15f(i)-(ii) in double
    precision: ``sum g`` by the Euler–Maclaurin float (:func:`float_tail_log`), each twisted sum as
    ``Re(e^{i m psi_{c+1}} q_m(c+1)) - Re(e^{i m psi_a} q_m(a))``, ``q_m = sum_{j<10} a_j(z_m) g^{(j)}``, with the
    remainder estimated as ``K_m (|g^(10)(a)| + |g^(9)(a)| + |g^(9)(c+1)|)`` (the bound of Theorem 15f(ii) when
    ``g^(10)`` keeps one sign on the range)."""
    from ._bias_tail import float_tail_log, short_range, taylor_pieces_log

    fns, p = plan["fns"], TWIST_P
    # Theorem 15h on a range short against its start: Taylor pieces of h with a proved bound of h''' and its own error
    # bound; else (or where it declines) Theorem 15's float
    out = taylor_pieces_log(fns[:4], plan["d3"], a, c) if short_range(a, c) else None
    ls0, rel_t = out if out is not None else (float_tail_log(fns[:4], a, c, third=plan["d3"], taylor=False), None)
    if ls0 is None or not math.isfinite(ls0):
        return _negligible(plan, a, c)
    columns = [plan["deriv"](x) for x in (a, c + 1)]
    if None in columns:
        return None
    h0 = [columns[0][0], columns[1][0]]  # h at a and c + 1
    # G_j = g^(j)/e^{ls0} at the two ends: Y_0 = 1, Y_{j+1} = sum_i C(j, i) h^(i+1) Y_{j-i} (Y_j = g^(j)/g)
    cols = []
    for h in columns:
        Y = [1.0]
        for j in range(p):  # i = 0..j: C(j, i) h^(i+1) Y_{j-i}, summed in that order from 0 (as sum() does)
            comb, acc = _COMB[j], 0
            for i in range(j + 1):
                acc = acc + comb[i] * h[i + 1] * Y[j - i]
            Y.append(acc)
        cols.append(Y)
    with np.errstate(all="ignore"):
        G = np.exp(np.array(h0) - ls0)[None, :] * np.array(cols).T  # (p + 1, 2)
    if not np.isfinite(G).all():
        return None
    Q = plan["coefs"] @ G[:p]  # (M, 2)
    psi = [mod_2pi(k * plan["q0"] + plan["p0"], k * plan["q1"] + plan["p1"]) for k in (a, c + 1)]
    if None in psi:
        return None
    rot = np.exp(1j * (plan["ms"][:, None] * np.array(psi)))  # (M, 2): np.outer's own product
    tw = (rot[:, 1] * Q[:, 1]).real - (rot[:, 0] * Q[:, 0]).real
    qabs = plan["abscoefs"] @ np.abs(G[:p])  # sum_j |a_j| |G_j| at each end
    (g0a, g0c), (gp1a, gp1c), (gpa, _) = G[0].tolist(), G[p - 1].tolist(), G[p].tolist()
    err_tw = plan["K"] * (4 * (abs(gpa) + abs(gp1a) + abs(gp1c))) + (qabs[:, 0] + qabs[:, 1]) * plan["err_m"]
    if plan["any_whole"]:  # m omega in 2 pi Z: the plain sum, cos(m phi') times sum g (= 1 here)
        tw[plan["whole"]] = plan["cos_mphi"][plan["whole"]]
        err_tw[plan["whole"]] = 2 * EPS
    ive, ive1 = plan["ive"], plan["ive1"]
    s = ive[0] + 2 * float(ive1 @ tw)
    absum = ive[0] + 2 * float(ive1 @ np.abs(tw))
    # sum g from the Euler-Maclaurin float, about (|h| + |x h'(x)| ln c) eps at its nodes, weighted by g: for a monotone h
    # the g-weighted mean of |x h'| is at most 1 + (a g(a) + c g(c))/sum g (by parts), and |h| at an end whose weight is
    # below e^-240 of the sum is replaced by 240 beside the other end's (doubled, plus 64); the two ends as Python floats
    # (the same doubles and operations as numpy's on the two-element rows)
    floor = math.exp(-240)
    alive = [abs(hv) for hv, g in zip(h0, (g0a, g0c), strict=True) if g > floor]
    habs = max(alive) if alive else 0.0
    xh1 = 1 + (float(a) * g0a + float(c + 1) * g0c)
    rel0 = 2 * (habs + 240 * (len(alive) < 2) + xh1 * math.log(c + 1) + 64) * EPS if rel_t is None else rel_t
    err = ive[0] * rel0 + 2 * float(ive1 @ err_tw) + (2 * rel0 + (plan["M"] + 4) * EPS) * absum
    err += plan["tail"]
    if not (s > 0) or not math.isfinite(err):
        return None
    return ls0 + plan["absbeta"], s, err / s


def _negligible(plan, a, c):
    """Where the float of ``sum g`` declines (a decay too steep for its pieces: ``-0.01 sqrt(d)`` at ``d = 1e17``), the
    bound of Theorem 15d(ii) for a decreasing ``h``: the sum lies in ``[0, (c - a + 1) e^{h(a) + |beta|}]``, returned as
    half of it with relative error 1 (enough for :func:`_float_masses`'s ``e^800`` rule, nothing more). ``h' <= 0`` is
    read at the piece ends of ``_sides`` (a cheap filter), then proved on ``[a, c]`` by one interval bound of ``h'``
    (Theorem 15d(v), :func:`monotone_on`: a narrow bump in ``h`` read only at points gave ``D = 0`` for 1); ``None``
    otherwise."""
    from ._bias_tail import _sides, monotone_on

    pts = np.array([float(x) for x in _sides(a, c)[:-1]] + [float(c)])
    with np.errstate(all="ignore"):
        slope = np.asarray(plan["fns"][1](pts), dtype=float) * np.ones(pts.size)
        ha = float(np.asarray(plan["fns"][0](np.array([float(a)])), dtype=float).ravel()[0])
    if not (np.all(slope <= 0) and math.isfinite(ha)) or not monotone_on(plan["d1"], a, c, -1):
        return None
    return ha + plan["absbeta"] + math.log(c - a + 1), 0.5, 1.0


def mixed_log_sum(plan, a, c):
    """``(L, V, rel)``, ``S = V e^L``, ``S = sum_{k=a}^{c} e^{h(k) + beta cos(omega k + phi')}`` in double precision (Theorem 15f):
    the head ``k < 4096`` term by term (exact phases, ``h`` in double), at most 64 further terms likewise, else
    :func:`_twisted`; ``None`` where a piece fails its checks."""
    parts = []
    if a < HEAD:
        hi = min(c, HEAD - 1)
        if a == 0 and hi == HEAD - 1:
            parts.append(plan["head_all"])
        else:
            v = plan["head"][a:hi + 1]
            top = float(np.max(v))
            parts.append((top, float(np.sum(np.exp(v - top))), (4 * plan["hmax"] + abs(plan["beta_f"]) * 8 + 2 * math.log2(hi - a + 1) + 16) * EPS))
    start = max(a, HEAD)
    if c >= start:
        out = _direct(plan, start, c) if c - start < _SMALL else _twisted(plan, start, c)
        if out is None:
            return None
        parts.append(out)
    return combine(parts)


def combine(parts):
    """``(L, V, rel)`` of a sum of positive parts ``(L_i, V_i, rel_i)`` (each ``V_i e^{L_i}``)."""
    if len(parts) == 1:
        return parts[0]
    top = max(L for L, _, _ in parts)
    w = [V * math.exp(L - top) for L, V, _ in parts]
    total = sum(w)
    rel = sum(wi * (r + abs(L - top) * EPS) for wi, (L, _, r) in zip(w, parts, strict=True)) / total + 2 * EPS
    return top, total, rel


_U = 2.0**-53  # the unit roundoff of a double


def running_error(expr, d, ks):
    """``(v, e)``: the bias ``expr`` at the integers ``ks`` (a float array, exact below ``2^53``) in numpy, and a
    *first-order estimate* of the absolute error of that evaluation (a running error analysis of the expression tree,
    Theorem 15g(vii), ``proofs/closed_form_tails.md``), or ``None`` for a node it does not know.

    Per node (``u = 2^-53``): ``d`` exact; a constant its own rounding to double (a decimal: the decimal as written, as
    the certified routes read it); ``a_1 + ... + a_m``:
    ``sum e_i + (m - 1) u sum |a_i|``; ``a_1 ... a_m``: ``sum_i |prod_{j != i} a_j| e_i + (m - 1) u |r|``; ``f(a)``:
    ``|f'(a)| e_a + 2 u |f(a)|`` (``exp``, ``log``, ``sin``, ``cos``, ``a**p`` with a constant ``p``; ``|sin'| <= 1``);
    ``a**c`` with a non-constant ``c`` as ``exp(c log a)``; ``abs``, ``min``, ``max`` carry their arguments' errors;
    ``log1p(a)``: ``e_a/|1 + a| + 2 u |log1p(a)|``. Where :func:`_far_form` rewrites the expression, its values and
    errors at ``k >= X`` are those of the far form (what :func:`lambdify_far`'s functions evaluate).

    The tree is walked once per expression (:func:`_running_error_program`, cached): each call runs only the numpy
    operations, the same ones in the same order (the walk's sympy tests cost 20-90 us a call, more than the
    arithmetic on a few hundred points)."""
    program = _running_error_program(expr, d)
    if program is None:
        return None
    far = _far_form(expr, d)
    far_program = None if far is None else _running_error_program(far[0], d)
    if far is not None and far_program is None:
        return None
    with np.errstate(all="ignore"):
        # the values lambdify_far's functions give: the far form at d >= its threshold X
        if far_program is None or np.all(ks < far[1]):
            got = program(ks)
        elif np.all(ks >= far[1]):
            got = far_program(ks)
        else:
            got = tuple(np.where(ks >= far[1], f, g) for f, g in zip(far_program(ks), program(ks), strict=True))
    # arrays of ks's shape (a constant bias, or an exact one, has scalars here)
    return tuple(np.broadcast_to(np.asarray(x, dtype=float), np.shape(ks)).copy() for x in got)


@functools.lru_cache(maxsize=256)
def _running_error_program(expr, d):
    """:func:`running_error`'s tree walk done once: a function ``ks -> (v, e)`` (numpy's error state held by the caller),
    or ``None`` for a node it does not know."""
    from fractions import Fraction

    from sympy.codegen.cfunctions import log1p

    from ..expression import import_sympy

    sp = import_sympy()

    def build(node):
        # constants and d's error are scalars, broadcast by numpy (arrays of len(ks) per constant made a 2e6-term
        # check three times dearer); a constant exponent stays a scalar (numpy's fast square and square root)
        if node == d:
            return lambda ks: (ks, 0.0)
        if node.is_Number or node.is_NumberSymbol:
            v = float(node)
            if node.is_Rational or node.is_Float:
                # a Float is the decimal as written (what the certified routes enclose: the shortest repr of its double,
                # or every digit of a longer literal), so its rounding to double counts here (1.1: 0.8 eps)
                r = node if node.is_Rational else sp.Rational(str(node))
                exact = Fraction(int(r.p), int(r.q))
                err = abs(float(exact - Fraction(v))) if math.isfinite(v) else math.inf
            else:
                err = abs(v) * _U
            const = (np.float64(v), err)
            return lambda ks: const
        subs = [build(a) for a in node.args]
        if any(f is None for f in subs):
            return None
        m = len(subs)
        if node.is_Add:
            def add(ks):
                args = [f(ks) for f in subs]
                v = functools.reduce(np.add, [a[0] for a in args])
                e = sum(a[1] for a in args) + (m - 1) * _U * functools.reduce(np.add, [np.abs(a[0]) for a in args])
                return v, e
            return add
        if node.is_Mul:
            def mul(ks):
                args = [f(ks) for f in subs]
                vals = [a[0] for a in args]
                v = functools.reduce(np.multiply, vals)
                e = (m - 1) * _U * np.abs(v)
                for i, (_, ei) in enumerate(args):
                    if np.ndim(ei) == 0 and ei == 0:
                        continue  # an exact factor (d, an integer) adds nothing
                    others = functools.reduce(np.multiply, [np.abs(x) for j, x in enumerate(vals) if j != i], 1.0)
                    e = e + others * ei
                return v, e
            return mul
        if node.is_Pow:
            fa, fc = subs
            half = node.exp == sp.S.Half
            if node.exp.is_Number:
                def pow_const(ks):
                    (a, ea), (c, ec) = fa(ks), fc(ks)
                    v = np.sqrt(a) if half else np.power(a, c)  # as sympy's lambdify writes it
                    # an exact argument adds nothing (sqrt(d) at d = 0: no 0 * inf); the exponent's own rounding
                    # (200/3 as a double) moves a^p by |a^p log a| e_p
                    ep = float(ec)
                    grow_p = np.abs(v * np.log(np.abs(a))) * ep if ep > 0 else 0.0
                    if np.ndim(ea) == 0 and ea == 0:
                        return v, grow_p + 2 * _U * np.abs(v)
                    return v, np.where(ea > 0, np.abs(c * np.power(a, c - 1)) * ea, 0.0) + grow_p + 2 * _U * np.abs(v)
                return pow_const

            def pow_var(ks):
                (a, ea), (c, ec) = fa(ks), fc(ks)
                v = np.sqrt(a) if half else np.power(a, c)
                grow = np.where(ec > 0, np.abs(np.log(np.abs(a))) * ec, 0.0) + np.where(ea > 0, np.abs(c / a) * ea, 0.0)
                # an exact base 0 with a positive exponent is 0 for any nearby exponent (d**(d**d) at d = 0: no 0 * inf)
                exact_zero = (a == 0) & (ea == 0) & (c - ec > 0)
                return v, np.where(exact_zero, 0.0, np.abs(v) * grow + 4 * _U * np.abs(v))
            return pow_var
        if m == 1:
            (fa,) = subs
            if isinstance(node, sp.exp):
                def exp_(ks):
                    a, ea = fa(ks)
                    v = np.exp(a)
                    return v, np.abs(v) * ea + 2 * _U * np.abs(v)
                return exp_
            if isinstance(node, sp.log):
                def log_(ks):
                    a, ea = fa(ks)
                    v = np.log(a)
                    return v, ea / np.abs(a) + 2 * _U * np.abs(v)
                return log_
            if isinstance(node, log1p):  # log1p(a): e_a/|1 + a| + 2 u |log1p(a)|
                def log1p_(ks):
                    a, ea = fa(ks)
                    v = np.log1p(a)
                    return v, ea / np.abs(1 + a) + 2 * _U * np.abs(v)
                return log1p_
            if isinstance(node, (sp.sin, sp.cos)):
                trig = np.sin if isinstance(node, sp.sin) else np.cos

                def trig_(ks):
                    a, ea = fa(ks)
                    v = trig(a)
                    return v, ea + 2 * _U * np.abs(v)
                return trig_
            if isinstance(node, sp.Abs):
                def abs_(ks):
                    a, ea = fa(ks)
                    return np.abs(a), ea
                return abs_
        if isinstance(node, (sp.Min, sp.Max)):
            pick = np.minimum if isinstance(node, sp.Min) else np.maximum

            def minmax(ks):
                args = [f(ks) for f in subs]
                v = functools.reduce(pick, [a[0] for a in args])
                return v, functools.reduce(np.maximum, [a[1] for a in args])
            return minmax
        return None

    return build(expr)


def _overflows_negligible(expr, d, v, e):
    """Whether the values ``-inf`` of ``b`` in double reached with an infinite or undefined error estimate (an
    intermediate overflow) are proved negligible weights: one interval evaluation of ``b`` in Arb over the hull of
    their ``k`` (Theorem 15g(vii)) must lie ``e^800`` below the largest finite value. ``-d**d**d`` is ``-inf`` from
    ``d = 4`` with ``b(4) = -4^256`` (a zero weight indeed); ``-(d/10000)**80`` (written ``-d**80/1e320``) is ``-inf``
    from ``d ~ 7100`` where ``b ~ -1e-8`` (not negligible: ``False``)."""
    bad = (v == -np.inf) & ~np.isfinite(e)
    if not np.any(bad):
        return True
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        return False
    from ._bias_tail import Unsupported, _interval, compile_bias

    idx = np.flatnonzero(bad)
    try:
        _, upper = _interval(compile_bias(expr, d), int(idx[0]), int(idx[-1]))
        top = float(upper.upper()) if upper is not None else math.inf
    except (Unsupported, ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return False
    return top < float(np.max(finite)) - 800.0


def _weights_and_errors(expr, d, n):
    """``(w, e)`` for ``k = 0..n-1``: the weights ``e^(b(k) - max b)`` and :func:`running_error`'s estimate of each
    ``b(k)``'s error (0 where the weight is 0); ``None`` where a node is unknown, a value is NaN or ``+inf``, or a
    ``-inf`` came through an overflow that is not proved negligible (``-d**80/1e320`` at ``d = 8000``, true value
    ``-1.7e-8``, is no zero weight)."""
    ks = np.arange(n, dtype=float)
    got = running_error(expr, d, ks)
    if got is None:
        return None
    v, e = (np.asarray(x, dtype=float) * np.ones_like(ks) for x in got)
    if np.any(np.isnan(v)) or np.any(v == np.inf) or not _overflows_negligible(expr, d, v, e):
        return None
    with np.errstate(all="ignore"):
        w = np.exp(v - np.max(v))  # -inf weights with a finite error estimate are 0 (their errors do not count)
        return w, np.where(w > 0, e, 0.0)


@functools.lru_cache(maxsize=256)
def weights_error_ok(expr, d, n, window):
    """Whether the double log-weights ``b(0), ..., b(n - 1)`` are good enough for masses within ``2^-38`` (Theorem
    15g(vii), a first-order estimate): errors ``e_k`` in the ``b(k)`` move ``log S_W`` by at most the ``e^b``-weighted
    mean ``e_S`` of ``e_k`` over ``k < W``, and ``log T`` by ``e_T`` over ``k >= W``; ``m = 1/(1 + T/S_W)`` then moves by
    at most ``(e_S + e_T) (1 - m)`` relative and ``D`` by ``(e_S + e_T) m``. ``False`` where ``e_S + e_T`` exceeds
    ``2^-39`` (the rest is left to the log-sum-exp), or where :func:`running_error` does not know a node. Cached (the
    bias does not depend on ``n``: a repeated mass pays it once)."""
    row = _weights_and_errors(expr, d, n)
    if row is None:
        return False
    w, e = row
    if not np.all(np.isfinite(e)):
        return False
    with np.errstate(all="ignore"):
        rel = sum(float(np.dot(w[s], e[s]) / np.sum(w[s])) for s in (slice(0, window), slice(window, n)) if np.sum(w[s]) > 0)
    return math.isfinite(rel) and rel <= 2.0**-39


def weights_error_ok_lengths(expr, d, lengths, window):
    """:func:`weights_error_ok` for every length of ``lengths`` (sorted, distinct, each above ``window``) at once: one
    :func:`running_error` over the longest, the ``e^b``-weighted means of each ``[W, n)`` from prefix sums. ``False``
    where one length fails, or where a side's weight relative to the longest row's largest falls below ``2^-900`` (its
    mean could not be formed: those lengths are then taken one by one)."""
    if len(lengths) == 0:  # every length at most W: m = 1, nothing read
        return True
    row = _weights_and_errors(expr, d, int(lengths[-1]))
    if row is None:
        return False
    w, e = row
    with np.errstate(all="ignore"):
        if not np.all(np.isfinite(e)):
            return False
        sw, swe = float(np.sum(w[:window])), float(np.dot(w[:window], e[:window]))
        if window > 0 and not sw > 2.0**-900:
            return False
        head = swe / sw if window > 0 else 0.0  # W = 0: m = 0 whatever the weights
        cw = np.cumsum(w[window:])
        cwe = np.cumsum(w[window:] * e[window:])
        idx = np.asarray(lengths, dtype=np.int64) - window - 1
        tw, twe = cw[idx], cwe[idx]
        if not np.all(tw > 2.0**-900):
            return False
        rel = head + twe / tw
    return bool(np.all(np.isfinite(rel)) and np.all(rel <= 2.0**-39))


def far_threshold(cs):
    """``X`` with ``tau(x) = sum_{j<k} |c_j/c_k| x^(j-k) <= 1/2`` for every ``x >= X`` (``cs = (c_k, ..., c_0)``, highest
    first): ``max_j (2k |c_j/c_k|)^(1/(k-j))``, each term then at most ``1/(2k)``, and at least 1."""
    k = len(cs) - 1
    out = 1.0
    for i, c in enumerate(cs[1:], start=1):  # c = c_(k - i): the ratio's power of x is -i
        if c != 0:
            out = max(out, math.exp((math.log(2 * k) + math.log(abs(float(c / cs[0])))) / i))
    return out


@functools.lru_cache(maxsize=256)
def _far_form(e, d):
    """``(far, X)``: ``e`` with each ``log P(d)`` and each power ``P(d)^c`` (``c`` not an integer) of a polynomial ``P``
    written as a sum of monomials, of degree ``k >= 2`` with rational coefficients, ``c_k > 0`` and ratios ``c_j/c_k`` in
    ``[1e-300, 1e300]``, written for ``d > 0`` as ``log c_k + k log d + log1p(sum_{j<k} (c_j/c_k) d^(j-k))`` (and
    ``exp(c`` times it``)``), the same function there, and the least ``X`` beyond which every such ``P`` has
    ``|sum_{j<k} (c_j/c_k) d^(j-k)| <= 1/2`` (:func:`far_threshold`: there the form is well conditioned); ``None`` when
    ``e`` has no such node. In double ``d**2`` overflows beyond ``1.3e154`` and ``log(d**2 + 1)`` became ``inf``
    (``-0.5*log(d**2 + 1)`` read as ``-inf`` at ``d = 1e200``, a weight of 0 for ``1e-200``). A factored polynomial
    (``(d - 1e8)**2 + 1``) keeps its form: expanded, it cancels near its root."""
    from sympy.codegen.cfunctions import log1p

    from ..expression import import_sympy

    sp = import_sympy()

    def poly_of(P):
        def monomial(a):  # c, d, d**j, c*d**j as written (no product or power of a sum: it is not expanded)
            if a.is_Number or a == d:
                return True
            if a.is_Pow:
                return a.base == d and a.exp.is_Integer and 0 <= a.exp <= 64
            return a.is_Mul and len(a.args) == 2 and a.args[0].is_Number and monomial(a.args[1]) and not a.args[1].is_Number

        if not P.is_Add or not all(monomial(a) for a in P.args):  # a sum of monomials as written
            return None
        try:
            poly = sp.Poly(P, d)
        except sp.PolynomialError:
            return None
        cs = poly.all_coeffs()
        if poly.degree() < 2 or not all(c.is_Rational for c in cs) or not cs[0] > 0:
            return None
        # the constants become 30-digit decimals (a Python int of 2^64 or more under numpy's log raised TypeError, a
        # ratio beyond 1.8e308 OverflowError); a polynomial with a ratio c_j/c_k outside [1e-300, 1e300] keeps its form
        if any(c != 0 and not (sp.Rational(1, 10**300) <= abs(c / cs[0]) <= 10**300) for c in cs[1:]):
            return None
        return cs

    found = []

    def far_log(cs):
        found.append(far_threshold(cs))
        k = len(cs) - 1
        rest = sp.Add(*[sp.Float(c / cs[0], 30) * d ** (j - k)
                        for j, c in zip(range(k, -1, -1), cs, strict=True) if j < k and c != 0])
        return sp.log(cs[0]).evalf(30) + k * sp.log(d) + log1p(rest)

    def is_log(x):
        return isinstance(x, sp.log) and poly_of(x.args[0]) is not None

    def is_pow(x):
        # not an integer power: 1/P(d) is real where P < 0, e^(-log P) is not (1/(2*d**2 - 9) gave nan); in double an
        # overflowed P gives 1/P = 0, the limit
        return x.is_Pow and not x.exp.is_Integer and poly_of(x.base) is not None

    out = e.replace(is_log, lambda x: far_log(poly_of(x.args[0])))
    out = out.replace(is_pow, lambda x: sp.exp(x.exp * far_log(poly_of(x.base))))
    return (out, max(found)) if found else None


def _no_overflow(fn, width):
    """``fn`` (of ``width`` outputs, 0 for one) with an ``OverflowError`` (a constant of the lambdified text beyond a
    double, ``2.4e600`` in a derivative of ``log(1e300*d**2 + 1)``) read as ``nan`` values, which every float route
    declines."""
    def safe(x):
        try:
            return fn(x)
        except OverflowError:
            out = np.full(np.shape(x), np.nan) if np.ndim(x) else math.nan
            return out if width == 0 else [out] * width

    return safe


def lambdify_far(exprs, d, module="numpy"):
    """``sympy.lambdify(d, exprs, module)``, except that where :func:`_far_form` rewrites an expression the function
    evaluates that form at ``d >= X``, its threshold (``numpy.where``; the expression as written below), and, for numpy,
    an ``OverflowError`` of the lambdified text gives ``nan``."""
    from ..expression import import_sympy

    sp = import_sympy()
    single = not isinstance(exprs, (list, tuple))
    width = 0 if single else len(exprs)
    # numpy's functions only: the math module's OverflowError is the caller's signal to read numpy instead
    guard = (lambda f: f) if module == "math" else (lambda f: _no_overflow(f, width))
    near = guard(sp.lambdify(d, exprs, module))
    forms = [_far_form(x, d) for x in ([exprs] if single else exprs)]
    if all(x is None for x in forms):
        return near
    X = max(f[1] for f in forms if f is not None)
    far_exprs = [x if f is None else f[0] for x, f in zip([exprs] if single else exprs, forms, strict=True)]
    far = guard(sp.lambdify(d, far_exprs[0] if single else far_exprs, module))
    if module == "math":
        return lambda x: far(x) if x >= X else near(x)

    def both(x):
        x = np.asarray(x, dtype=float)
        with np.errstate(all="ignore"):
            if np.all(x < X):
                return near(x)
            if np.all(x >= X):
                return far(x)
            lo, hi = near(x), far(x)
        if single:
            return np.where(x >= X, hi, lo)
        return [np.where(x >= X, f, g) for f, g in zip(hi, lo, strict=True)]

    return both
