"""An independent reference for the OT prior: the root of Theorem 2 bisected in mpmath (a private context).

``pi_n(d)``, ``d = 0 .. n-1``, from the backward recurrence ``psi += 1/phi``, ``v = psi^-rho``, ``phi -= v`` started at
``phi = c``: the root ``c_n`` is the least ``c`` at which every ``phi`` stays positive (``c_n >= n``, Theorem 4(iii)).
No otprior code is used.
"""

import mpmath


def reference_prior(n, rho, dps, steps=None):
    """``(prior, ctx, c)``: the prior as mpmath numbers at ``dps`` digits, the private context and the root ``c``
    (``steps`` bisection steps, ``3.33 dps + 8`` by default)."""
    ctx = mpmath.MPContext()
    ctx.dps = dps
    r = ctx.mpf(rho)

    def run(c):
        phi, psi, vs = c, ctx.mpf(0), []
        for k in range(n, 0, -1):
            psi += 1 / phi
            v = psi ** (-r)
            vs.append(v)
            phi -= v
            if k > 1 and phi <= 0:
                return False, vs
        return phi > 0, vs

    lo, hi = ctx.mpf(n), ctx.mpf(n)
    while not run(hi)[0]:
        hi *= 2
    for _ in range(int(3.33 * dps) + 8 if steps is None else steps):
        mid = (lo + hi) / 2
        if run(mid)[0]:
            hi = mid
        else:
            lo = mid
    _, vs = run(hi)
    return [v / hi for v in vs], ctx, hi


def reference_masses_mx(n, rho, windows, dps=40):
    """``{W: m_n(W)}`` (mpmath numbers) and ``a = m_n(1)``, from Theorem 2's recurrence written in ``M = Phi Psi`` and
    ``L = log(Psi c)`` (a private context at ``dps`` digits): ``M_1 = 1 - a``, ``L += log1p(1/M)``,
    ``M -= expm1(log a + (1 - rho) L)``, where ``a = c^{-(1-rho)}``; the root is the ``a`` with ``M_n = 0`` and
    ``M_1 .. M_{n-1} > 0`` (``M_i = Phi_{n-i} Psi_{n-i+1}``, positive exactly where ``Phi_{n-i}`` is: Lemma 2.1's sign
    test), found by regula falsi (Illinois) on ``log a`` with bisection as a safeguard. ``1 - m_n(W) = M_W e^{-L_W}``.
    Nothing cancels near ``rho = 1``, where the form in ``phi`` loses ``log10(Phi_n / Phi_1)`` digits (thousands at
    ``n = 8192``, ``1 - rho = 1e-6``). No otprior code is used."""
    ctx = mpmath.MPContext()
    ctx.dps = dps
    q = 1 - ctx.mpf(rho)
    keep = set(windows)

    def run(la, logs=None):
        M, L = -ctx.expm1(la), ctx.mpf(0)
        if logs is not None and 1 in keep:
            logs[1] = ctx.log(M)
        for i in range(1, n):
            L += ctx.log1p(1 / M)
            M -= ctx.expm1(la + q * L)
            if M <= 0 and i < n - 1:
                return ctx.mpf(i - n)  # died at step i + 1 < n: a is too large; a value below 0 that says how far
            if logs is not None and i + 1 in keep:
                logs[i + 1] = ctx.log(M) - L
        return M

    lo = -ctx.log(1 + ctx.expm1(q * ctx.log(n)) / q) * (1 + ctx.mpf(10) ** (5 - dps))  # Lemma 4.1: M_n > 0 there
    hi = -q * ctx.log(n)  # c = n: M_n <= 0 (Theorem 4(iii))
    f_lo, f_hi = run(lo), run(hi)
    assert f_lo > 0 >= f_hi
    side = 0
    for it in range(400):
        if it % 4 == 3:
            mid = (lo + hi) / 2
        else:
            mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            if not lo < mid < hi:
                mid = (lo + hi) / 2
        fm = run(mid)
        if fm > 0:
            lo, f_lo = mid, fm
            if side == 1:
                f_hi /= 2
            side = 1
        else:
            hi, f_hi = mid, fm
            if side == -1:
                f_lo /= 2
            side = -1
        if hi - lo <= abs(hi) * ctx.mpf(10) ** (8 - dps):
            break
    logs = {}
    run(lo, logs)
    return {W: -ctx.expm1(logs[W]) for W in windows}, ctx.exp(lo)
