"""Computer checks of the algebraic steps in proofs/ (run by tests/test_proof_checks.py).

Each ``check_*`` function verifies one step with sympy and returns the checked
expressions; it raises ``AssertionError`` when the algebra does not hold. The proof file
that uses a step names its check.
"""

import sympy as sp


def tol(x):
    """A tolerance or stopping rule (left alone by the mutation test, like intervals.tol)."""
    return x


def case(x):
    """An instance a check is run at (left alone by the mutation test, like intervals.case)."""
    return x


def _zero(expr):
    expr = sp.simplify(sp.powsimp(sp.expand_power_exp(sp.expand_log(expr, force=True)), force=True))
    return expr == 0


def check_lse_translation():
    """Theorem 1: LSE(x + k) = LSE(x) + k (so the constant mode contracts at exactly rho)."""
    x1, x2, x3, k = sp.symbols("x1 x2 x3 k", real=True)
    lhs = sp.log(sp.exp(x1 + k) + sp.exp(x2 + k) + sp.exp(x3 + k))
    rhs = sp.log(sp.exp(x1) + sp.exp(x2) + sp.exp(x3)) + k
    assert _zero(sp.expand_log(sp.logcombine(lhs - rhs, force=True), force=True))
    return lhs, rhs


def _recurrence_from(c, t, rho, v_of_psi):
    """Theorem 2's backward recurrence from Phi_t = c: (Phi_0, v) or (None, None) if some Phi_k <= 0, k >= 1."""
    phi, psi, v = c, 0, {}
    for k in range(t, 0, -1):
        psi = psi + 1 / phi
        v[k] = v_of_psi(psi, rho)
        phi = phi - v[k]
        if k > 1 and phi <= 0:
            return None, None
    return phi, v


def check_backward_recurrence(t=5, rhos=("0.25", "0.5", "0.75"), dps=50, v_of_psi=None):
    """Theorem 2: the prior from the backward recurrence (root c of Phi_0(c) = 0 by bisection)
    equals the fixed point of Definition 1 for constant scores found by another route: the
    plain iteration g <- G(g) of Theorem 1 in the log domain, stopped by its certificate
    ||g - g*|| <= ||G(g) - g|| / (1 - rho) < 10^-(dps - 5). Both run in a private mpmath
    context at ``dps`` digits; they must agree to 10^-(dps - 10). ``v_of_psi`` replaces the
    recurrence's column update ``v = Psi^-rho`` (a wrong one must fail the check)."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = tol(dps + 10)
    v_of_psi = v_of_psi or (lambda psi, rho: psi ** (-rho))
    for rho_text in rhos:
        rho = ctx.mpf(rho_text)
        # route 1: bisection on c (Phi_0 < 0 or some Phi_k <= 0 below the root, Phi_0 > 0 above)
        lo, hi = case(ctx.mpf(1)), case(ctx.mpf(2))  # a bracket of the root, widened below
        while True:
            phi0, _ = _recurrence_from(hi, t, rho, v_of_psi)
            if phi0 is not None and phi0 > 0:
                break
            lo, hi = hi, case(2 * hi)
        for _ in range(int(3.4 * ctx.dps) + 10):
            mid = (lo + hi) / 2
            phi0, _ = _recurrence_from(mid, t, rho, v_of_psi)
            lo, hi = (lo, mid) if (phi0 is not None and phi0 > 0) else (mid, hi)
        c = (lo + hi) / 2
        _, v = _recurrence_from(c, t, rho, v_of_psi)
        prior_recurrence = [v[t - d] / c for d in range(t)]

        # route 2: the map G of Theorem 1 with s = 0, iterated from g = 0
        def lse(xs):
            top = max(xs)
            return top + ctx.log(ctx.fsum(ctx.exp(x - top) for x in xs))

        g = [ctx.zero] * t
        for _ in range(100000):
            f = [-lse(g[: i + 1]) for i in range(t)]
            g_new = [-rho * lse(f[j:]) for j in range(t)]
            residual = max(abs(a - b) for a, b in zip(g_new, g, strict=True))
            g = g_new
            if tol(residual / (1 - rho) < ctx.mpf(10) ** -(dps - 5)):
                break
        f = [-lse(g[: i + 1]) for i in range(t)]
        prior_iteration = [ctx.exp(f[t - 1] + g[t - 1 - d]) for d in range(t)]
        for a, b in zip(prior_recurrence, prior_iteration, strict=True):
            assert abs(a - b) <= tol(ctx.mpf(10) ** -(dps - 10)), (rho_text, a, b)
    return prior_recurrence


def _recurrence_arb(c, rho, t):
    """Theorem 2's recurrence from ``Phi_t = c`` in Arb balls: ``{k: Phi_k}`` and ``{k: v_k}``, run while
    every ``Phi_k`` (k >= 1) is certainly positive; a ball that holds 0 stops it (returned as is)."""
    phi, psi, Phi, v = c, 0, {t: c}, {}
    for k in range(t, 0, -1):
        psi = psi + 1 / phi
        v[k] = psi ** (-rho)
        phi = phi - v[k]
        Phi[k - 1] = phi
        if not phi > 0:
            break
    return Phi, v


def check_lemma_2_1_counterexample():
    """Lemma 2.1: N_0 is not monotone on P_1 (rho = 1/4, t = 3): c = 2.1 < c' = 2.23, both with
    Phi_1, Phi_2, Phi_3 > 0, give N_0(c) = -0.1291 > N_0(c') = -0.1985 (Arb balls): the lemma's part (b)
    needs Phi_0(c) >= 0."""
    import flint

    from otprior._balls import arb_precision

    with arb_precision(128):
        rho = case(flint.arb(1) / 4)
        out = []
        for text in ("2.1", "2.23"):
            c = flint.arb(text)
            Phi, _ = _recurrence_arb(c, rho, 3)
            assert all(Phi[k] > 0 for k in range(1, 4)), text  # c in P_1
            out.append(Phi[0] / c)
        assert out[0] > out[1], out
        # the figures: both below the root, N_0(2.1) = -0.1291, N_0(2.23) = -0.1985
        assert abs(out[0] + case(0.12909)) < tol(1e-5) and abs(out[1] + case(0.19852)) < tol(1e-5), out
    return out


def check_lemma_2_1_positive_region(t_max=6, rhos=(1, 2, 3, 4, 5, 6, 7), grid=16):
    """Lemma 2.1 (a), (b) in Arb balls on a grid: for rho = k/8, 2 <= t <= t_max and every pair
    c < c' of the points c = t (1 + 6 i / grid), i = 0..grid, with c in P_k (Phi_j(c) > 0, j >= k >= 1):
    c' in P_k, N_j(c') > N_j(c) for k <= j < t, v_j(c') >= (c'/c)^rho v_j(c) for j >= k, and, when
    Phi_{k-1}(c) >= 0, N_{k-1}(c') > N_{k-1}(c). Pairs whose balls do not decide are counted, not passed
    silently: the check fails if more than a tenth of the comparisons are undecided. The hypotheses are
    reached, not only met: some examined c has some Phi_j (j >= k) within 2^-5 of 0 (the edge of P_k), some
    examined c has Phi_{k-1}(c) within 2^-5 of 0 (the edge of (b)'s hypothesis), and (b) is examined at every
    level k - 1 = 0..t_max-1 (a stronger hypothesis, which examines fewer pairs, fails here)."""
    import flint

    from otprior._balls import arb_precision

    decided = undecided = 0
    edge_a, edge_b, levels_b = [], [], set()  # how close the examined points come to the hypotheses' edges
    with arb_precision(192):
        for k8 in rhos:
            rho = flint.arb(k8) / case(8)
            for t in range(2, t_max + 1):
                points = [flint.arb(t) * case(1 + flint.arb(6 * i) / grid) for i in range(grid + 1)]
                runs = [_recurrence_arb(c, rho, t) for c in points]
                for i, c in enumerate(points):
                    Phi, v = runs[i]
                    for i2 in range(i + 1, len(points)):
                        c2 = points[i2]
                        Phi2, v2 = runs[i2]
                        factor = (c2 / c) ** rho  # lambda^rho, one expression for the bound and its equality
                        for k in range(t, 0, -1):
                            if not all(j in Phi and Phi[j] > 0 for j in range(k, t + 1)):
                                break
                            assert all(Phi2[j] > 0 for j in range(k, t + 1)), (k8, t, i, i2, k)
                            edge_a.append(min(float(Phi[j].upper()) for j in range(k, t + 1)))
                            for j in range(k, t):
                                assert not (Phi2[j] / c2 <= Phi[j] / c), (k8, t, i, i2, j)
                                decided += 1
                            for j in range(k, t + 1):
                                assert not (v2[j] < factor * v[j]), (k8, t, i, i2, j)
                            # equality at j = t (v_t = c^rho): the factor lambda^rho is sharp
                            assert v2[t].overlaps(factor * v[t]), (k8, t, i, i2)
                            if k - 1 in Phi and Phi[k - 1] >= 0:
                                edge_b.append(float(Phi[k - 1].upper()))
                                levels_b.add(k - 1)
                                if Phi2[k - 1] / c2 > Phi[k - 1] / c:
                                    decided += 1
                                elif Phi2[k - 1] / c2 <= Phi[k - 1] / c:
                                    raise AssertionError((k8, t, i, i2, k - 1))
                                else:
                                    undecided += 1
    assert tol(decided > 500 and undecided * 10 <= decided), (decided, undecided)
    assert tol(min(edge_a) < 2.0**-5 and min(edge_b) < 2.0**-5), (min(edge_a), min(edge_b))
    assert levels_b == set(range(t_max)), levels_b
    return decided


def check_window_bound_algebra():
    """Theorem 4(i): sum_{d<W} ((d+1)/c)^(-rho) / c = H_W c^(rho-1)."""
    c, rho = sp.symbols("c rho", positive=True)
    W = case(6)
    lhs = sum(((d + 1) / c) ** (-rho) / c for d in range(W))
    rhs = sum(sp.Integer(d + 1) ** (-rho) for d in range(W)) * c ** (rho - 1)
    assert _zero(lhs - rhs)
    return lhs


def check_bounded_score_constant():
    """Theorem 5: osc <= rho (4B + osc) gives osc <= 4 rho B / (1 - rho), and 2B + that = 2B(1+rho)/(1-rho);
    the window bound K m / (1 + (K - 1) m) increases in m and in K."""
    B, rho, x, m, K = sp.symbols("B rho x m K", positive=True)
    sol = sp.solve(sp.Eq(x, rho * (4 * B + x)), x)[0]
    assert sp.simplify(sol - 4 * rho * B / (1 - rho)) == 0
    assert sp.simplify(2 * B + sol - 2 * B * (1 + rho) / (1 - rho)) == 0
    bound = K * m / (1 + (K - 1) * m)
    assert sp.simplify(sp.diff(bound, m) - K / (1 + (K - 1) * m) ** 2) == 0
    assert sp.simplify(sp.diff(bound, K) - m * (1 - m) / (1 + (K - 1) * m) ** 2) == 0
    return sol


def check_pole_free_integral():
    """Theorem 7: int_a^b (x+s)^-alpha dx = (a+s)^(1-alpha) L (e^u - 1)/u, u = (1-alpha) L."""
    a, b, s, alpha, x = sp.symbols("a b s alpha x", positive=True)
    L = sp.log((b + s) / (a + s))
    u = (1 - alpha) * L
    form = (a + s) ** (1 - alpha) * L * (sp.exp(u) - 1) / u
    standard = ((b + s) ** (1 - alpha) - (a + s) ** (1 - alpha)) / (1 - alpha)
    assert _zero(sp.expand_power_exp(sp.powsimp(form - standard, force=True)))
    integral = sp.integrate((x + s) ** (-sp.Rational(3, 2)), (x, a, b))
    assert sp.simplify(integral - standard.subs(alpha, sp.Rational(3, 2))) == 0
    # no pole: the limit alpha -> 1 is the logarithm
    assert sp.simplify(sp.limit(form, alpha, 1) - L) == 0
    return form


def check_euler_maclaurin_ingredients():
    """Theorem 8: f^(m)(x) = (-1)^m (alpha)_m (x+s)^(-alpha-m) (even ones positive), and both Bernoulli
    tables of otprior._power_sums (floats and exact fractions, the latter also used by inequalities.py)
    equal B_2j / (2j)!."""
    from otprior._power_sums import _B2J_FRACTIONS, _B2J_OVER_FACT

    x, s, alpha = sp.symbols("x s alpha", positive=True)
    f = (x + s) ** (-alpha)
    for m in range(1, 9):
        assert sp.simplify(sp.diff(f, x, m) - (-1) ** m * sp.rf(alpha, m) * (x + s) ** (-alpha - m)) == 0
    for j, value in enumerate(_B2J_OVER_FACT, start=1):
        exact = sp.bernoulli(2 * j) / sp.factorial(2 * j)
        assert abs(float(exact) - value) <= tol(1e-16) * abs(value)
    assert len(_B2J_FRACTIONS) == len(_B2J_OVER_FACT)
    for j, (num, den) in enumerate(_B2J_FRACTIONS, start=1):  # the ball route's table, exactly
        assert sp.Rational(num, den) == sp.bernoulli(2 * j) / sp.factorial(2 * j), j
    return f


def check_lipschitz_identities():
    """Lemma 9a: d log D / d alpha = -(1 - D)(E_T - E_H) on explicit sums, and
    x(1-x) - y(1-y) = (x - y)(1 - x - y)."""
    # weights w_k = (k + s)^-alpha with dw_k/dalpha = -w_k l_k, l_k = log(k + s): the
    # identity is rational in the w_k and l_k, for any sizes of window and tail
    w = sp.symbols("w1:6", positive=True)
    logs = sp.symbols("l1:6", real=True)
    head, tail = case([0, 1]), case([2, 3, 4])
    H = sum(w[i] for i in head)
    T = sum(w[i] for i in tail)
    D = T / (T + H)

    def d_alpha(expr):
        return sum(sp.diff(expr, w[i]) * (-w[i] * logs[i]) for i in range(5))

    E_H = sum(w[i] * logs[i] for i in head) / H
    E_T = sum(w[i] * logs[i] for i in tail) / T
    assert sp.simplify(d_alpha(sp.log(D)) + (1 - D) * (E_T - E_H)) == 0
    assert sp.simplify(d_alpha(D) + D * (1 - D) * (E_T - E_H)) == 0
    X, Y = sp.symbols("X Y")
    assert sp.expand(X * (1 - X) - Y * (1 - Y) - (X - Y) * (1 - X - Y)) == 0
    return D


def check_content_bound_extremes():
    """Theorem 10: e^-B T / (e^-B T + e^B H) = T / (T + e^(2B) H)."""
    T, H, B = sp.symbols("T H B", positive=True)
    assert sp.simplify(sp.exp(-B) * T / (sp.exp(-B) * T + sp.exp(B) * H) - T / (T + sp.exp(2 * B) * H)) == 0
    assert sp.simplify(sp.exp(B) * T / (sp.exp(B) * T + sp.exp(-B) * H) - T / (T + sp.exp(-2 * B) * H)) == 0
    return True


def check_kerple_reduction():
    """Lemma 11a: (1 + r2 d)^(-r1) = r2^(-r1) (d + 1/r2)^(-r1)."""
    r1, r2, d = sp.symbols("r1 r2 d", positive=True)
    assert _zero(sp.powsimp(sp.expand_power_base((1 + r2 * d) ** (-r1) - r2 ** (-r1) * (d + 1 / r2) ** (-r1), force=True), force=True))
    return True


def check_cable_constant_increments():
    """Lemma 11b: with constant increments eps, D_oo(W) = e^(-eps W)."""
    eps = sp.Symbol("epsilon", positive=True)
    r = sp.exp(-eps)  # the common ratio, in (0, 1)
    q = sp.Symbol("q", positive=True)
    d = sp.Symbol("d", integer=True, nonnegative=True)
    W = sp.Symbol("W", integer=True, positive=True)

    def geometric(lower):
        total = sp.summation(q**d, (d, lower, sp.oo))
        if isinstance(total, sp.Piecewise):  # the branch |q| < 1, which holds for q = e^-eps
            total = next(piece.expr for piece in total.args if piece.cond.has(sp.Abs) or piece.cond == (q < 1))
        return total.subs(q, r)

    ratio = geometric(W) / geometric(0)
    assert sp.simplify(ratio - sp.exp(-eps * W)) == 0
    return ratio


def _bf16_reference(x):
    """Round positive floats to 8 significant bits, ties to even, by another route than the library's bit
    arithmetic: ``x = f 2^e`` with ``f`` in [1/2, 1), ``f 2^8`` rounded half to even (exact for inputs with at
    most 24 significant bits, as float32 holds them, so no double rounding)."""
    import numpy as np

    f, e = np.frexp(np.asarray(x, dtype=float))
    return np.ldexp(np.round(np.ldexp(f, 8)), e - 8)


def check_falcon_bins(k_max=14, heads=12, windows=(1, 4)):  # heads: the 12-head model of the issue
    """Theorem 11c (b), (c), (d), exhaustively on every n - 1 in [2^8, 2^(k_max+1)) for the slopes of a
    ``heads``-head model, on the library's rows q(j) = bf16(bf16(m) bf16(j)); (a) on the library's window
    masses at the extreme edges of the octaves 2^9 and 2^10. Returns the number of non-dyadic position-bin
    edges inside a larger product bin, per octave and slope (22 of 128 for a 12-head model)."""
    import math

    import numpy as np

    from otprior.encodings import ALiBi, alibi, alibi_slopes

    bf16_round = alibi.bf16_round  # looked up in its module at call time (so that a corrupted one is seen)

    top = case(2 ** (k_max + 1))
    j = np.arange(case(top + 2), dtype=float)
    pos = bf16_round(j)
    assert np.array_equal(pos, _bf16_reference(j))  # the library's rounding is bfloat16's (ties to even)
    pos_edge = np.concatenate([[True], pos[1:] != pos[:-1]])
    inside = {}
    gap, keep = 2.0**-8, 1 - 2.0**-8  # (c): the spacing below v is >= gap v; a rounding keeps >= keep x
    gap_attained, worst_keep = False, tol(1.0)  # a running minimum starts at 1
    for m in alibi_slopes(heads):
        mh = float(bf16_round(m))
        q = bf16_round(mh * pos)
        assert np.array_equal(q, _bf16_reference(mh * pos)), m  # products of two 8-bit numbers: exact inputs
        assert np.all(np.diff(q) >= 0)  # q is non-decreasing
        new = np.concatenate([[True], q[1:] != q[:-1]])
        first = np.maximum.accumulate(np.where(new, np.arange(j.size), case(0)))
        G = np.arange(j.size) - first + 1  # G_n at n - 1 = index
        dyadic = math.frexp(mh)[0] == 0.5
        for k in range(8, k_max + 1):
            idx = np.arange(2**k, 2 ** (k + 1))
            g = pos[idx]
            upper = idx[idx >= g]  # (b): the upper half of a position bin
            inner = pos[upper] > 2**k
            assert np.any(inner) and np.any(~inner), (m, k)  # both cases occur in every octave
            for branch, count in ((inner, 2 ** (k - 8)), (~inner, 2 ** (k - 9))):  # g > 2^k, g = 2^k
                if np.any(branch):
                    assert np.all(G[upper][branch] >= count), (m, k)
                    assert np.min(G[upper][branch]) <= count + tol(1), (m, k)  # attained (to within a tie): sharp
            edges = idx[new[idx]]  # (c): lowest keys of product bins
            assert np.all(G[edges] == 1), (m, k)
            v, below = q[edges], q[edges - 1]
            assert np.all(v - below >= v * gap), (m, k)
            gap_attained |= bool(np.any(v - below == v * gap))  # at v = 2^e
            # each rounding keeps at least the factor `keep` (nearly attained); at the lowest key of a product bin
            # the position rounds up (it is the lowest key of its position bin), so v >= keep mh (n - 1)
            assert np.all(pos[idx] >= keep * idx) and np.all(q[idx] >= keep * mh * pos[idx]), (m, k)
            worst_keep = min(worst_keep, float(np.min(pos[idx] / idx)), float(np.min(q[idx] / (mh * pos[idx]))))
            assert np.all(pos[edges] > pos[edges - 1]) and np.all(pos[edges] >= edges), (m, k)  # the proof's two steps
            assert np.all(v >= keep * mh * edges), (m, k)
            pe = idx[pos_edge[idx]]  # (d): position-bin lower edges
            assert tol(127 <= pe.size <= 129), (k, pe.size)
            if dyadic:
                assert np.all(new[pe]), (m, k)
            else:
                inside[(m, k)] = int(np.sum(~new[pe]))
    assert gap_attained and worst_keep <= keep + tol(2.0**-15)  # both constants are sharp
    assert {v for (m, k), v in inside.items() if k >= case(9)} == {case(22)}, inside  # the measured count (12 heads)
    # (a) and (c)'s inequality on the library's rows in the octave 2^17: at the lowest key of a product bin and
    # at the top of a position bin's upper half
    k = case(17)
    j = np.arange(case(2 ** (k + 1)), dtype=float)
    for m in case((0.5, alibi_slopes(12)[8])):
        enc = ALiBi(m, variant="falcon", head_dim=case(64))
        mh = float(bf16_round(m))
        q = bf16_round(mh * bf16_round(j))
        edge = 2**k + int(np.argmax(q[2**k :] != q[2**k - 1]))  # the lowest key of the first product bin above 2^k
        g = 2**k + case(2 ** (k - 7))  # a position grid point; g + 2^(k-8) - 1 is the top of its upper half
        top = g + 2 ** (k - 8)
        assert top == int(np.argmax(bf16_round(j) > g)), (m, top)  # the first key past g's bin
        for n in case((edge + 1, top)):
            Gn = ALiBi.tied_keys(n, m)
            for W in windows:
                assert enc.window_mass(W, n) <= W / Gn * tol(1 + 1e-12), (m, n, W)
        bound = edge * math.exp(-gap * keep * mh * edge / math.sqrt(enc.head_dim))
        assert bound < tol(1e-6) and 1 - enc.window_mass(case(1), edge + 1) <= bound, (m, edge)
    return inside


def _inequalities():
    """proofs/checks/inequalities.py, loaded once (it loads intervals.py)."""
    import importlib.util
    import sys
    from pathlib import Path

    if "proof_inequalities" not in sys.modules:
        spec = importlib.util.spec_from_file_location("proof_inequalities", Path(__file__).resolve().parent / "inequalities.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["proof_inequalities"] = module
        spec.loader.exec_module(module)
    return sys.modules["proof_inequalities"]


def check_margin_code_is_lemma_9(cases=((1, 2, 4), (3, 5, 12))):
    """Lemmas 9a, 9b: margin.py's own code (``_Growth.__init__``, ``_record``, ``decreasing_upper``), run on
    sympy symbols, computes exactly the lemma's expressions: ``lipschitz = 2 log((L1-1+o)/o)``,
    ``G = H P/((T1+H/k)(T0+kH))`` (absolute) or ``H P/(T0 (T1+H/k))`` (relative), which equal
    ``D+_{L1} - D-_{L0}`` and ``D+_{L1}/D-_{L0} - 1`` with Theorem 10's extremes, ``up = H/(T1+H/k)``,
    ``down = P/T0 (T0/(T0+kH))``, and ``U = k rho`` resp. ``(1 + (L1-L0)((W+o)/(L0+o))^alpha)(k rho + k^2) - 1`` (evaluated as
    ``s (k rho + k^2) + k rho + expm1(4B)``, the same expression)
    with ``rho = ((W+o)/o)^-alpha (1 + (W+o)/(alpha-1))``; at ``B = 0`` (the code's shortcut) and at ``B > 0``."""
    ineq = _inequalities()
    iv = ineq.iv
    H, T0, E, o, alpha, B = sp.symbols("H T0 E o alpha B", positive=True)

    for W, L0, L1 in cases:
        parts = {(0, W - 1): H, (W, L0 - 1): T0, (L0, L1 - 1): E}  # the three sums of _record, as symbols

        def sums(d0, d1, a, off, parts=parts):
            return iv.SymArb(parts[(d0, d1)])

        for relative in (False, True):
            for b in case((0.0, 1.0, B)):  # the code's B = 0 shortcut, a float B, a symbolic B
                self, record, upper = ineq.margin_growth(W, L0, L1, relative, b, iv.SymArb(o), kind="sym", sums=sums)
                assert _zero(self.lipschitz.e - 2 * sp.log((L1 - 1 + o) / o)), (W, L0, L1)
                k = sp.exp(2 * b)
                T1 = T0 + E
                P = T0 * (k - 1 / k) + k * E
                d_minus, d_plus = T0 / (T0 + k * H), T1 / (T1 + H / k)  # Theorem 10 at L0 and L1
                rec = record(iv.SymArb(alpha))
                if relative:
                    G, definition, down = H * P / (T0 * (T1 + H / k)), d_plus / d_minus - 1, P / T0
                else:
                    G, definition, down = H * P / ((T1 + H / k) * (T0 + k * H)), d_plus - d_minus, P / T0 * (T0 / (T0 + k * H))
                assert sp.simplify(rec.growth.e - G) == 0 and sp.simplify(G - definition) == 0, (W, L0, L1, relative, b)
                assert sp.simplify(sp.exp(rec.log_up.e) - H / (T1 + H / k)) == 0
                assert sp.simplify(sp.exp(rec.log_down.e) - down) == 0
                # Lemma 9a(iii): the second split G = F1 F2 that interval_bound uses
                F1 = H / T0 if relative else H / (T0 + k * H)
                assert sp.simplify(sp.exp(rec.log_up2.e) - F1) == 0, (W, L0, L1, relative, b)
                assert sp.simplify(sp.exp(rec.log_down2.e) - P / (T1 + H / k)) == 0, (W, L0, L1, relative, b)
                assert sp.simplify(F1 * P / (T1 + H / k) - G) == 0, (W, L0, L1, relative, b)
                assert sp.simplify(sp.exp(rec.phi.e) - G) == 0
                x = (W + o) / o
                rho = x ** (-alpha) * (1 + (W + o) / (alpha - 1))
                s = (L1 - L0) * ((W + o) / (L0 + o)) ** alpha
                # relative: the code evaluates (1 + s)(k rho + k^2) - 1 as the sum of non-negative terms
                # s (k rho + k^2) + k rho + expm1(4B) (no cancellation as tol -> 0); the two are one
                # expression because k^2 - 1 = e^(4B) - 1 (checked for a symbolic B just below)
                claimed = s * (k * rho + k**2) + k * rho + (sp.exp(4 * b) - 1) if relative else k * rho
                assert _zero(upper(iv.SymArb(alpha)).e - claimed), (W, L0, L1, relative, b)
                if relative and isinstance(b, sp.Symbol):
                    assert sp.simplify(sp.expand(claimed - ((1 + s) * (k * rho + k**2) - 1))) == 0
    return True


def check_interval_bound_is_lemma_9a():
    """Lemma 9a's bound on [a, b] as ``_Growth.interval_bound`` evaluates it, on records whose values make each
    candidate the smallest in turn: the result is ``min((phi(a) + phi(b))/2 + Lambda (b - a),
    log A(b) + log(G/A)(a), log F1(b) + log F2(a))`` with ``lipschitz = 2 Lambda``, each increasing factor
    taken at ``b`` and each decreasing one at ``a`` (a record whose ends are swapped gives another value)."""
    from types import SimpleNamespace

    import flint

    from otprior.margin import _Growth

    def record(phi, up, down, up2, down2):
        return SimpleNamespace(phi=flint.arb(phi), log_up=flint.arb(up), log_down=flint.arb(down), log_up2=flint.arb(up2),
                               log_down2=flint.arb(down2), prec=case(128))

    self = SimpleNamespace(lipschitz=flint.arb(case(3)))  # 2 Lambda = 3
    a, b = case(1.5), case(2.5)
    # (phi, up, down, up2, down2) at a and at b: the ends' values differ, so a swapped end changes the result
    cases = [
        (case((0, 50, 7, 50, 60)), case((1, 9, 40, 70, 30)), (0 + 1) / 2 + 3 / 2 * (b - a)),  # Lipschitz: 2
        (case((0, 50, -5, 50, 60)), case((9, 4, 40, 70, 30)), 4 + -5),  # log A(b) + log(G/A)(a) = -1
        (case((0, 50, 7, 50, -6)), case((9, 9, 40, 3, 30)), 3 + -6),  # log F1(b) + log F2(a) = -3
    ]
    for ra, rb, expected in cases:
        got = _Growth.interval_bound(self, a, b, record(*ra), record(*rb))
        assert got.contains(flint.arb(expected)) and float(got.rad()) < tol(1e-30), (ra, rb, got, expected)
    return True


def check_normaliser_shift_and_jacobian():
    """Lemma N0: softmax of scaled logits and 1.5-entmax (closed form of inequalities.py, any scale ``lam`` and
    total ``r``) do not change when a constant is added to every logit; Theorem N2's reduction
    ``softmax(a (b + c + e)) = softmax(a b + a c + a e)``; and the entmax Jacobian on the support (the window key's row) is
    ``lam (2 u_j delta_ij - 2 u_i u_j / sum u)`` with ``u = lam z - tau``, i.e. ``diag(s) - s s^T/sum s``
    (``s_j = p_j^(2 - alpha) = u_j``) up to the positive factor ``2 lam``, whose off-diagonal entries are <= 0."""
    z = sp.symbols("z0:3", real=True)
    b = sp.symbols("b0:3", real=True)
    e = sp.symbols("e0:3", real=True)
    c = sp.Symbol("c", real=True)
    a = sp.Symbol("a", positive=True)

    def softmax(xs):
        w = [sp.exp(x) for x in xs]
        return [x / sum(w) for x in w]

    for p, q in zip(softmax([a * (x + c) for x in z]), softmax([a * x for x in z]), strict=True):
        assert sp.simplify(p - q) == 0
    for p, q in zip(softmax([a * (bd + c + ed) for bd, ed in zip(b, e, strict=True)]),
                    softmax([a * bd + a * c + a * ed for bd, ed in zip(b, e, strict=True)]), strict=True):
        assert sp.simplify(p - q) == 0
    f = _inequalities()._entmax_closed_forms()
    lam, tau = f["lam"], f["tau3"]
    shifted = tau.subs({zd: zd + c for zd in f["z"]}, simultaneous=True)
    assert sp.simplify(shifted - tau - lam * c) == 0  # tau absorbs lam c: every u = lam z - tau is unchanged
    u = [lam * zd - tau for zd in f["z"]]
    total = sum(u)
    j = case(0)  # the window key's row of the Jacobian
    for i in range(3):
        jacobian = sp.diff(u[j] ** 2, f["z"][i])
        claimed = lam * (2 * u[j] * (1 if i == j else 0) - 2 * u[i] * u[j] / total)
        assert sp.simplify(jacobian - claimed) == 0, (i, j)
    return True


def check_entmax_closed_forms_match_the_library(rows=((0.05, -0.03, 0.01), (0.1, 0.0, -0.1)), flat=((10, 0.3), (1000, 0.05))):
    """The closed forms of ``tau`` used by the entmax box claims (inequalities.py) give the library's
    ``otprior.normalisers.entmax`` weights: 1.5-entmax on three keys (``lam = alpha - 1``, total 1) and on flat
    rows (one key at ``(alpha - 1) Delta``, ``n - 1`` at 0) for ``alpha = 3/2`` and ``alpha = 2``, to 1e-12."""
    import numpy as np

    from otprior.normalisers import entmax

    f = _inequalities()._entmax_closed_forms()
    for z in rows:
        env = {f["lam"]: sp.Rational(1, 2), f["r"]: 1, **{zd: sp.Float(x, tol(30)) for zd, x in zip(f["z"], z, strict=True)}}
        tau = float(f["tau3"].subs(env))
        ours = [(0.5 * x - tau) ** 2 for x in z]
        assert np.allclose(ours, entmax(np.array(z), 1.5), rtol=0, atol=tol(1e-12)), (z, ours)
    for n, delta in flat:
        row = np.zeros(case(n))
        row[0] = delta
        for alpha, key, power in ((1.5, "flat15", 2), (2.0, "flat2", 1)):
            x0 = (alpha - 1) * delta
            tau = float(f[key].subs({f["nu"]: sp.Rational(1, n), f["x0"]: sp.Float(x0, tol(30))}))
            ours = [(x0 - tau) ** power] + [(-tau) ** power] * (n - 1)
            assert np.allclose(ours, entmax(row, alpha), rtol=0, atol=tol(1e-12)), (n, delta, alpha)
    return True


def check_term_sums_match_the_library(points=((0, 0, "1.5", "1"), (1, 3, "2.25", "0.5"), (4, 11, "1", "3"), (2, 7, "4", "1"))):
    """inequalities.py's ``_sum_terms`` (which stands for ``otprior._power_sums.arb_sum`` when margin's code
    runs on a box) encloses the same sums: its interval meets the library's Arb ball at exact points."""
    import flint

    from otprior._balls import arb_precision
    from otprior._power_sums import arb_sum

    ineq = _inequalities()
    iv = ineq.iv
    with arb_precision(128):
        for d0, d1, alpha, o in points:
            ours = ineq._sum_terms(d0, d1, iv._exact(sp.Rational(alpha)), iv._exact(sp.Rational(o)))
            ball = arb_sum(d0, d1, float(sp.Rational(alpha)), float(sp.Rational(o)))
            assert ours.hi >= ball.lower() and ball.upper() >= ours.lo, (d0, d1, alpha, o)
            assert ours.width() < tol(1e-30) and float(ball.rad()) < tol(1e-30)
            assert isinstance(ball, flint.arb)
    return True


ALL_CHECKS = [value for name, value in sorted(globals().items()) if name.startswith("check_")]
