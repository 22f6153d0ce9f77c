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
