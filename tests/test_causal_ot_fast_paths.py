"""The fast paths of the operator's kernel sweeps (``proofs/operator_fast_paths.md``).

The first sweep in closed form, the float32 warm-up sweeps, and the float32 memory of the
mixing only choose where the float64 map is evaluated; the references are the float64
kernel map itself and the plain iteration (``accelerate=False``), which uses none of them.
"""

import numpy as np
import pytest

import otprior
import otprior.causal_ot as co
from otprior._anderson import anderson_solve


def _shifted(S):
    n = S.shape[0]
    tri = np.tril(np.ones((n, n), dtype=bool))
    sm = np.where(tri, S - np.max(np.where(tri, S, -np.inf), axis=1)[:, None], -np.inf)
    return sm, np.exp(sm)


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.99])
def test_first_sweep_equals_the_kernel_map_at_zero(rho):
    # Lemma 1: the closed form equals the two products of the float64 map at g = 0
    S = np.random.default_rng(5).normal(scale=2.0, size=(70, 70))
    _, K = _shifted(S)
    first = np.cumsum(K / K.sum(axis=1)[:, None], axis=0)
    for P in (np.arange(0, 10), np.arange(30, 70)):
        w = int(P[-1]) + 1
        mask = np.arange(w)[None, :] <= P[:, None]
        G = co._kernel_map(K[:w, :w], np.ascontiguousarray(K[:w, :w].T), mask, P, rho)
        np.testing.assert_allclose(co._first_sweep(first, P, mask, rho), G(np.zeros((P.size, w)), np.arange(P.size)),
                                   rtol=0, atol=1e-13)


@pytest.mark.parametrize("rho", [0.5, 0.9, 0.99])
def test_float32_warm_up_agrees_with_the_plain_iteration(monkeypatch, rho):
    # the warm-up (forced on a small width) changes nothing beyond the certified accuracy
    monkeypatch.setattr(co, "_F32_WIDTH", 1)
    calls = []
    original = co._warm_map

    refined = []

    def spy(G64, G32, threshold, Ginc=None, stop=None):
        def G32_counted(x, rows):
            calls.append(x.shape)
            return G32(x, rows)

        def Ginc_counted(*args):
            refined.append(args[0].shape)
            return Ginc(*args)

        Ginc_counted.rho = Ginc.rho
        return original(G64, G32_counted, threshold, Ginc_counted, stop)

    monkeypatch.setattr(co, "_warm_map", spy)
    # two blocks: the one of prefixes 128..149 has the float32 and refinement sweeps (in the one holding the
    # prefix of length 1, the closed-form first image certifies that prefix at once, and the G64 image it takes
    # ends the float32 sweeps of its block)
    # (at rho >= 0.9 the plain route takes seconds there: one block of 48)
    n = 150 if rho == 0.5 else 48
    S = np.random.default_rng(11).normal(size=(n, n))
    fast = otprior.causal_ot_attention(S, rho, dual_tol=1e-12)
    plain = otprior.causal_ot_attention(S, rho, dual_tol=1e-12, accelerate=False)
    assert calls, "the float32 sweeps ran"
    assert n < 150 or any(refined), "the refinement sweeps ran"
    np.testing.assert_allclose(fast, plain, rtol=0, atol=1e-11)


def test_every_certificate_comes_from_a_float64_sweep(monkeypatch):
    # Lemma 2: each returned dual is an image of the float64 map, even with the float32 sweeps
    # run as long as they may (no switch level; they stall at float32's rounding, and the
    # problems near their solution get float64 images meanwhile), or a certified increment (Lemma 9),
    # which is then the float64 image at its point to within its proved rounding
    monkeypatch.setattr(co, "_F32_WIDTH", 1)
    monkeypatch.setattr(co, "_F32_SWITCH", 0.0)
    monkeypatch.setattr(co, "_F32_SWEEPS", 40)
    blocks = []
    original_warm, original_solve = co._warm_map, co._solve

    def warm(G64, G32, threshold, Ginc=None, stop=None):
        images, float32 = {}, []
        increments = {}
        images["increments"] = increments
        images["G64"] = G64

        def G64_recorded(x, rows, **kw):
            img = G64(x, rows, **kw)
            for r, row in zip(rows, img, strict=True):
                images.setdefault(int(r), []).append(row.copy())
            return img

        def G32_counted(x, rows):
            float32.append(x.shape[0])
            return G32(x, rows)

        def Ginc_counted(x, rows, keep, sel):
            float32.append(-1)  # a refinement sweep or a certified increment (float32 products)
            img = Ginc(x, rows, keep, sel)
            for r, xr, row in zip(rows, x, img, strict=True):
                increments.setdefault(int(r), []).append((xr.copy(), row.copy()))
            return img

        Ginc_counted.rho = Ginc.rho
        blocks.append((images, float32))
        return original_warm(G64_recorded, G32_counted, threshold, Ginc_counted, stop)

    def solve(*args, **kwargs):
        x, info = original_solve(*args, **kwargs)
        if blocks and "result" not in blocks[-1][0]:
            blocks[-1][0]["result"] = x
        return x, info

    monkeypatch.setattr(co, "_warm_map", warm)
    monkeypatch.setattr(co, "_solve", solve)
    S = np.random.default_rng(3).normal(size=(150, 150))
    otprior.causal_ot_attention(S, 0.5, dual_tol=1e-12, max_iter=300)
    assert len(blocks) == 2 and all(float32 for _, float32 in blocks)
    assert any(-1 in float32 for _, float32 in blocks), "the refinement sweeps ran"
    for images, _ in blocks:
        G64 = images["G64"]
        for p, row in enumerate(images["result"]):
            if any(np.array_equal(row, img) for img in images.get(p, [])):
                continue
            # a certified increment: the float64 image at its point is within the bound (here far below 1e-13)
            x = next(xr for xr, img in images["increments"].get(p, []) if np.array_equal(row, img))
            exact = G64(x[None, :], np.array([p]))[0]
            assert np.max(np.abs(exact - row)) <= 1e-13, p


def test_warm_up_is_skipped_beyond_float32_range(monkeypatch):
    # a spread above _F32_SPREAD keeps every sweep in float64 (no float32 kernel is formed)
    monkeypatch.setattr(co, "_F32_WIDTH", 1)
    seen = []
    original = co._kernel_map
    monkeypatch.setattr(co, "_kernel_map", lambda K, *a: seen.append(K.dtype) or original(K, *a))
    S = np.random.default_rng(2).normal(size=(20, 20)) * 30.0  # spread about 150
    A = otprior.causal_ot_attention(S, 0.5)
    assert seen and all(dt == np.float64 for dt in seen)
    np.testing.assert_allclose(A, otprior.causal_ot_attention(S, 0.5, accelerate=False), rtol=0, atol=1e-10)


def _contraction(rho, width, seed):
    # a rho-contraction in the sup norm: x -> rho * tanh(A x) + b with ||A||_inf <= 1
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, size=(width, width))
    A /= np.abs(A).sum(axis=1, keepdims=True)
    b = rng.normal(size=width)
    return lambda x, rows: rho * np.tanh(x @ A.T) + b


@pytest.mark.parametrize("images_last, history32", [(True, False), (False, True), (True, True)])
def test_mixing_layouts_reach_the_same_certified_point(images_last, history32):
    G = _contraction(0.8, 50, 0)
    x0 = np.zeros((3, 50))
    ref, _ = anderson_solve(G, x0, 1e-13 * 0.2, max_iter=500, memory=6)
    x, info = anderson_solve(G, x0, 1e-13 * 0.2, max_iter=500, memory=6, images_last=images_last,
                             history32=history32)
    np.testing.assert_allclose(x, ref, rtol=0, atol=2e-13)
    assert np.all(info["residual"] <= 1e-13 * 0.2)


def test_a_first_image_given_by_the_caller_never_certifies():
    # G is constant: its first image is the fixed point, but the certificate must come from G
    b = np.arange(6.0)[None, :]
    evaluations = []

    def G(x, rows):
        evaluations.append(x.copy())
        return np.broadcast_to(b, x.shape).copy()

    x, info = anderson_solve(G, np.zeros((1, 6)), 1e-12, max_iter=10, first_image=b.copy())
    np.testing.assert_array_equal(x, b)
    assert len(evaluations) == 1 and info["iterations"][0] == 2
    np.testing.assert_array_equal(evaluations[0], b)


def test_a_problem_never_stops_on_an_image_called_inexact():
    # certified(rn) says which images may stop a problem: none, for the first 5 evaluations here
    G = _contraction(0.5, 20, 4)
    x0 = np.zeros((3, 20))
    ref, info_ref = anderson_solve(G, x0, 1e-10, max_iter=200, memory=6)
    seen = []

    def certified(rn):
        seen.append(rn.copy())
        return None if len(seen) > 5 else False

    x, info = anderson_solve(G, x0, 1e-10, max_iter=200, memory=6, certified=certified)
    assert np.all(info["iterations"] >= 6) and np.all(info["residual"] <= 1e-10)
    # the residuals passed are those of each evaluation's images, one per problem
    assert all(r.shape == (3,) for r in seen[:5])
    # "None" (every image exact) is the solver without the argument, bit for bit
    y, info_none = anderson_solve(G, x0, 1e-10, max_iter=200, memory=6, certified=lambda rn: None)
    assert np.array_equal(y, ref) and np.array_equal(info_none["iterations"], info_ref["iterations"])
    # never exact: no problem ever stops, and the failure says the tolerance was not reached
    with pytest.raises(otprior.ConvergenceError, match="did not reach the tolerance"):
        anderson_solve(G, x0, 1e-10, max_iter=50, memory=6, certified=lambda rn: False)


def test_refinement_sweep_is_the_float64_image_at_the_reference_and_close_near_it(rho=0.9):
    # Lemma 7: the sums at x are the reference's plus the increments; at x = x0 the increments are zero and the
    # image is the float64 map's, bit for bit; near x0 it differs by the increments' float32 rounding only
    rng = np.random.default_rng(8)
    S = rng.normal(size=(300, 300))
    _, K = _shifted(S)
    K32 = K.astype(np.float32)
    for P in (np.arange(172, 300), np.arange(0, 40)):
        w = int(P[-1]) + 1
        mask = np.arange(w)[None, :] <= P[:, None]
        rows = np.arange(P.size)
        G64 = co._kernel_map(K[:w, :w], K[:w, :w].T, mask, P, rho)
        Ginc = co._increment_map(K32[:w, :w], K32[:w, :w].T, mask, P, rho)
        x0 = np.where(mask, 0.3 * rng.normal(size=(P.size, w)), 0.0)
        keep = {}
        img0 = G64(x0, rows, keep=keep)
        assert np.array_equal(img0, G64(x0, rows))  # keeping the products changes nothing
        assert np.array_equal(Ginc(x0, rows, keep, None), img0)
        for step in (1e-4, 1e-2):
            x = x0 + np.where(mask, step * rng.normal(size=x0.shape), 0.0)
            img = Ginc(x, rows, keep, None)
            exact = G64(x, rows)
            # float32 rounding of increments of relative size about the distance (not of the sums themselves)
            dist = np.max(np.abs(x - x0))
            assert np.max(np.abs(img - exact)) <= 2e-5 * dist, (w, step)
            assert np.max(np.abs(img - exact)) > 0  # they are computed in float32 indeed
        # a subset of the problems (the reference's rows selected)
        sel = np.arange(0, P.size, 3)
        img = Ginc(x[sel], rows[sel], keep, sel)
        np.testing.assert_allclose(img, G64(x[sel], rows[sel]), rtol=0, atol=2e-5 * dist)


def test_one_sweep_suffices_wherever_it_does_for_the_plain_iteration():
    # the closed-form first image certified nothing, so rho = 0 (or a loose tolerance) with max_iter = 1 failed
    # with "residual reached 0.000e+00" where the plain iteration answers
    rng = np.random.default_rng(0)
    S = rng.normal(size=(64, 64))
    S *= 20.0 / np.ptp(S)
    cases = [(np.zeros((4, 4)), 0.0, 1e-12), (S, 0.0, 1e-12), (S, 0.3, 10.0), (S, 0.1, 10.0),
             (rng.normal(size=(300, 300)), 0.0, 1e-12)]
    for scores, rho, tol in cases:
        plain = otprior.causal_ot_attention(scores, rho, dual_tol=tol, max_iter=1, accelerate=False)
        fast = otprior.causal_ot_attention(scores, rho, dual_tol=tol, max_iter=1)
        np.testing.assert_allclose(fast, plain, rtol=0, atol=1e-15)


def test_the_memory_cap_applies_before_any_array_is_allocated():
    # the kernel path (spread <= 200) allocated past the cap, and a broadcast view of 30000 x 30000 zeros (no memory
    # itself) asked for about 40 GB and ended in numpy's MemoryError
    from otprior.limits import ResourceError, caps

    with caps(max_bytes=1 << 16):
        with pytest.raises(ResourceError, match="scores"):
            otprior.causal_ot_attention(np.random.default_rng(0).normal(size=(512, 512)), 0.5, dual_tol=1e-6)
        with pytest.raises(ResourceError, match="scores"):
            otprior.causal_ot_fixed_point(np.zeros((512, 512)), 0.5)
    with pytest.raises(ResourceError, match="scores"):
        otprior.causal_ot_attention(np.broadcast_to(0.0, (30000, 30000)), 0.5)
    # before the float64 copy of an integer or float32 view (6.7 GiB) is made
    for zero in (np.int64(0), np.float32(0)):
        with caps(max_bytes=1 << 20):
            with pytest.raises(ResourceError, match="scores"):
                otprior.causal_ot_attention(np.broadcast_to(zero, (30000, 30000)), 0.5)
            with pytest.raises(ResourceError, match="scores"):
                otprior.causal_ot_fixed_point(np.broadcast_to(zero, (30000, 30000)), 0.5)


def _gamma_masked(gram, rhs, nstored):
    """The scaled, regularised normal equations of ``_gamma`` with every slot's mask applied
    (written out here from its docstring, as the reference for the unmasked fast path)."""
    b, m, _ = gram.shape
    diag = np.diagonal(gram, axis1=1, axis2=2)
    valid = (np.arange(m)[None, :] < nstored[:, None]) & (diag > 0) & np.isfinite(diag)
    inv = np.where(valid, 1.0 / np.sqrt(np.where(valid, diag, 1.0)), 0.0)
    both = valid[:, :, None] & valid[:, None, :]
    A = np.where(both, gram * inv[:, :, None] * inv[:, None, :], 0.0)
    A += np.where(valid, 1e-10, 1.0)[:, :, None] * np.eye(m)[None]
    return np.linalg.solve(A, np.where(valid, rhs * inv, 0.0)[..., None])[..., 0] * inv


def test_gamma_without_masks_is_bit_identical_where_every_slot_is_valid():
    from otprior._anderson import _gamma

    rng = np.random.default_rng(5)
    for trial in range(40):
        b, m = int(rng.integers(1, 40)), int(rng.choice([3, 6, 10]))
        D = rng.normal(size=(b, m, 30)) * np.exp(3 * rng.normal(size=(b, m, 1)))
        if trial % 2:
            D = D[:, :1, :] + 1e-9 * D  # nearly collinear differences: ill-conditioned
        gram, rhs = D @ D.transpose(0, 2, 1), rng.normal(size=(b, m))
        full = np.full(b, m)
        assert np.array_equal(_gamma(gram, rhs, full), _gamma_masked(gram, rhs, full))
        part = rng.integers(0, m + 1, size=b)  # the masked path itself where some slot is unused
        assert np.array_equal(_gamma(gram, rhs, part), _gamma_masked(gram, rhs, part))
    # the fast path's answer is the least-squares coefficient (well-conditioned case)
    D = rng.normal(size=(4, 6, 30))
    r = rng.normal(size=(4, 30))
    g = _gamma(D @ D.transpose(0, 2, 1), np.einsum("bmw,bw->bm", D, r), np.full(4, 6))
    ls = np.stack([np.linalg.lstsq(D[k].T, r[k], rcond=None)[0] for k in range(4)])
    np.testing.assert_allclose(g, ls, rtol=1e-7, atol=1e-9)


def test_mixing_memory_reused_without_clearing_gives_the_fresh_answer():
    # a workspace left by an earlier solve (other width, other problems) must give exactly the
    # answer of a fresh one: its stale slots are finite and enter with gamma = 0; after a solve
    # that may have stored non-finite float32 differences (no bound) the buffer is cleared
    from otprior._anderson import _REUSE

    width, batch, m = 400, 120, 6
    assert batch * m * width >= _REUSE  # the workspace route is taken
    G = _contraction(0.8, width, 1)
    x0 = np.zeros((batch, width))
    fresh, _ = anderson_solve(G, x0, 1e-11, max_iter=300, memory=m, bound=600.0, workspace={}, history32=True)
    ws = {}
    anderson_solve(_contraction(0.7, width + 37, 2), np.zeros((batch, width + 37)), 1e-11, max_iter=300, memory=m,
                   bound=600.0, workspace=ws, history32=True)
    assert ws["anderson32_finite"]
    again, _ = anderson_solve(G, x0, 1e-11, max_iter=300, memory=m, bound=600.0, workspace=ws, history32=True)
    assert np.array_equal(again, fresh)

    # an unbounded solve may store differences beyond float32's range: it marks the buffer, and the
    # next solve clears it (here every stale slot is made non-finite, the case the clearing is for)
    anderson_solve(G, x0, 1e-11, max_iter=300, memory=m, workspace=ws, history32=True)
    assert not ws["anderson32_finite"]
    ws["anderson32"].fill(np.inf)
    again, _ = anderson_solve(G, x0, 1e-11, max_iter=300, memory=m, bound=600.0, workspace=ws, history32=True)
    assert np.array_equal(again, fresh)


def test_transposed_kernel_view_gives_the_contiguous_products():
    rng = np.random.default_rng(3)
    for w in (100, 700, 1500):
        K = np.tril(rng.random((w, w)))
        V = rng.random((5, w))
        np.testing.assert_allclose(co._times_kt(V, K.T), co._times_kt(V, np.ascontiguousarray(K.T)), rtol=1e-14)
        np.testing.assert_allclose(co._times_kt(V, K.T), np.einsum("bj,ij->bi", V, K), rtol=1e-13)


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.9])
def test_image_of_a_point_is_within_rho_times_its_certificate(rho):
    # Lemma 8: osc(G(x) - g*) <= rho osc(G(x) - x) / (1 - rho); the fixed point g* from the log-domain route
    # (causal_ot_fixed_point, an independent evaluation of the map)
    n = 60
    S = np.random.default_rng(8).normal(scale=2.0, size=(n, n))
    _, K = _shifted(S)
    P = np.array([n - 1])
    G = co._kernel_map(K, np.ascontiguousarray(K.T), np.ones((1, n), dtype=bool), P, rho)
    gstar = otprior.causal_ot_fixed_point(S, rho, dual_tol=1e-14).g
    rng = np.random.default_rng(9)
    worst = 0.0
    for scale in (1e-1, 1e-3, 1e-6, 1e-9):
        for _ in range(5):
            x = gstar + scale * rng.normal(size=n)
            y = G(x[None, :], np.arange(1))[0]
            r = np.ptp(y - x)
            err = np.ptp(y - gstar)
            assert err <= rho * r / (1 - rho) + 1e-14, (scale, err, r)
            worst = max(worst, err / (rho * r / (1 - rho)))
    assert worst > 0.05  # the bound is not vacuous on these points


@pytest.mark.parametrize("rho", [0.5, 0.99])
def test_certified_increment_is_within_its_proved_rounding_of_the_float64_image(rho):
    # Lemma 9: an increment sweep from a float64 reference, with float32 products, differs from the float64 image at
    # the same point by at most 4 rho l in the oscillation, l = _increment_rounding(...); the bound is not vacuous
    n = 300
    S = np.random.default_rng(21).normal(size=(n, n))
    _, K = _shifted(S)
    P = np.arange(n - 128, n)
    mask = np.arange(n)[None, :] <= P[:, None]
    K32 = K.astype(np.float32)
    G64 = co._kernel_map(K, K.T, mask, P, rho)
    Ginc = co._increment_map(K32, K32.T, mask, P, rho)
    rows = np.arange(P.size)
    rng = np.random.default_rng(22)
    x0 = 0.3 * rng.normal(size=(P.size, n)) * mask
    x0[rows, P] = 0.0
    keep = {}
    G64(x0, rows, keep=keep)
    low_r, low_c = keep["R"].min(axis=1), keep["C"].min(axis=1)
    for d in (1e-3, 1e-6, 1e-9, 1e-12):
        x = (x0 + d * rng.uniform(-1, 1, size=x0.shape)) * mask
        exact = G64(x, rows)
        approx = Ginc(x, rows, keep, None)
        bound = 4 * rho * co._increment_rounding(np.abs(x - x0).max(axis=1), n, low_r, low_c)
        err = np.ptp(approx - exact, axis=1)
        assert np.all(err <= bound + 1e-14), (d, float(np.max(err - bound)))
        assert np.all(bound <= 1e-3 * d + 1e-14), d  # of the order of eps32 sqrt-free times d (w = 300)


def test_certified_increment_bound_refuses_what_it_cannot_bound():
    # extreme reference sums (an underflow-sized row sum) or distances give l = inf: no certificate
    assert np.isinf(co._increment_rounding(np.array([1e-9]), 1000, np.array([1e-44]), np.array([1.0])))[0]
    assert co._increment_rounding(np.array([1e-9]), 1000, np.array([1e-40]), np.array([1.0]))[0] > 1e-3
    assert np.isinf(co._increment_rounding(np.array([50.0]), 1000, np.array([1.0]), np.array([1.0])))[0]
    assert co._increment_rounding(np.array([0.0]), 1000, np.array([1.0]), np.array([1.0]))[0] < 1e-14


def test_refined_blocks_stop_on_the_image_rule_and_certified_increments_within_the_documented_accuracy(monkeypatch):
    # Lemmas 8 and 9 in the operator: the blocks with refinement sweeps stop at dual_tol (1 - rho) / rho (the narrower
    # one as before), some problems on certified increments (whose bounds are counted here), and the rows carry at
    # most 2 dual_tol relative error per entry against the plain route at dual_tol = 1e-12 (no refinement there)
    thresholds, bounds = [], []
    solve, rounding = co._solve, co._increment_rounding

    def solve_spy(*args, **kwargs):
        thresholds.append(kwargs.get("threshold"))
        return solve(*args, **kwargs)

    def rounding_spy(*args):
        out = rounding(*args)
        bounds.append(out)
        return out

    monkeypatch.setattr(co, "_solve", solve_spy)
    monkeypatch.setattr(co, "_increment_rounding", rounding_spy)
    n, rho, tol = 260, 0.5, 1e-10
    S = np.random.default_rng(13).normal(size=(n, n))
    A = otprior.causal_ot_attention(S, rho, dual_tol=tol)
    monkeypatch.undo()
    assert tol * (1 - rho) / rho in thresholds  # the block 132..259 (at least 256 wide)
    assert None in thresholds  # the narrower block: the rule of Theorem 1, as before
    assert bounds and all(np.all(c < 1e-12) for c in bounds), "certified increments ran with a usable bound"
    ref = otprior.causal_ot_attention(S, rho, dual_tol=1e-12, accelerate=False)
    tri = np.tri(n, dtype=bool)
    assert np.all(np.abs(A - ref)[tri] <= 2 * tol * ref[tri] + 1e-15)
