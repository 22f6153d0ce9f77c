"""The torch OT attention's accelerated route never fails where the plain iteration succeeds: a block whose
Anderson iteration (forward or adjoint) fails is solved again by the plain iteration; the plain iteration's
own failure at its sweep cap names the condition; and the paths the committed training runs use keep their
bits against the release before these changes (main at 01e0032), values and gradients."""

import pytest

torch = pytest.importorskip("torch")

from _git_module import assert_same_bits, module_at, values_and_grads  # noqa: E402

from otprior import ConvergenceError  # noqa: E402
from otprior.torch import ot_attention as mod  # noqa: E402
from otprior.torch.ot_attention import causal_ot_attention  # noqa: E402

_BEFORE = "01e0032"


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread for these small problems (thread start-up dominates them on a shared machine), restored
    after each test."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def before():
    """``otprior/torch/ot_attention.py`` before the fallback, loaded from git into this process."""
    return module_at(_BEFORE, "otprior/torch/ot_attention.py", "otprior.torch._ot_attention_01e0032", "otprior.torch")


def _same_bits(before, S, rho, **kw):
    W = torch.randn(S.shape, generator=torch.Generator().manual_seed(S.shape[-1] + 7), dtype=S.dtype)
    assert_same_bits(before.causal_ot_attention, causal_ot_attention, S, W, rho, **kw)


def test_plain_and_the_default_below_rho_0_6_keep_their_bits(before):
    # solver="plain" at rho = 0.9, the default at rho = 0.5 (T <= 512: the committed runs' route), both dtypes,
    # several blocks
    g = torch.Generator().manual_seed(31)
    for dtype in (torch.float32, torch.float64):
        S = 2.0 * torch.randn(2, 10, 10, generator=g, dtype=dtype)
        _same_bits(before, S, 0.5, chunk=4)
        _same_bits(before, S, 0.9, solver="plain", chunk=4)


@pytest.mark.slow
def test_plain_and_the_default_below_rho_0_6_keep_their_bits_widely(before, monkeypatch):
    g = torch.Generator().manual_seed(32)
    for dtype in (torch.float32, torch.float64):
        for rho in (0.0, 0.3, 0.5, 0.5999):
            _same_bits(before, 3.0 * torch.randn(1, 2, 40, 40, generator=g, dtype=dtype), rho, chunk=16)
        for rho in (0.5, 0.9, 0.99):
            _same_bits(before, 2.0 * torch.randn(2, 33, 33, generator=g, dtype=dtype), rho, solver="plain", chunk=16)
    _same_bits(before, torch.randn(1, 2, 512, 512, generator=g), 0.5)
    _same_bits(before, torch.randn(1, 300, 300, generator=g), 0.9, solver="plain")
    _same_bits(before, 30.0 * torch.randn(1, 40, 40, generator=g), 0.95, solver="plain", chunk=16)  # float64 fixed point
    _same_bits(before, 400.0 * torch.randn(1, 10, 10, generator=g, dtype=torch.float64), 0.5)  # log domain
    # accelerators read the convergence flag every _CHECK_EVERY sweeps: emulated on the CPU in both modules
    monkeypatch.setattr(mod, "_HOST_CHECKS", False)
    monkeypatch.setattr(before, "_HOST_CHECKS", False)
    _same_bits(before, torch.randn(1, 2, 40, 40, generator=g), 0.5, chunk=16)
    _same_bits(before, torch.randn(2, 30, 30, generator=g, dtype=torch.float64), 0.9, solver="plain", chunk=16)


def _hobbled(monkeypatch, which, host):
    """The Anderson iteration of ``which`` blocks (``"prefixes"`` or ``"adjoint"``) given two sweeps: it fails
    there (as it would on an input where mixing cannot reach the threshold within the cap). ``host``: the CPU's
    loop (:func:`_anderson_host`), else the accelerators' (the general loop of ``_iterate``)."""
    name = "_anderson_host" if host else "_iterate"
    iterate = getattr(mod, name)
    calls = []

    def hobbled(step, x, thr, **kw):
        if kw["memory"] > 0 and kw["what"].startswith(which):
            calls.append(kw["what"])
            kw = dict(kw, max_iter=2)
        return iterate(step, x, thr, **kw)

    monkeypatch.setattr(mod, name, hobbled)
    return calls


@pytest.mark.parametrize(
    "which, host",
    [("prefixes", True), ("adjoint", True), pytest.param("prefixes", False, marks=pytest.mark.slow),
     pytest.param("adjoint", False, marks=pytest.mark.slow)],
)
def test_a_failing_accelerated_block_falls_back_to_the_plain_iteration(monkeypatch, which, host):
    # forward and adjoint, the CPU's host loop and the accelerators' loop: the answer is the plain iteration's
    monkeypatch.setattr(mod, "_HOST_CHECKS", host)
    g = torch.Generator().manual_seed(33)
    S = 2.0 * torch.randn(2, 8, 8, generator=g, dtype=torch.float64)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    A0, G0 = values_and_grads(causal_ot_attention, S, W, 0.7, solver="plain", chunk=4)
    calls = _hobbled(monkeypatch, which, host)
    A1, G1 = values_and_grads(causal_ot_attention, S, W, 0.7, solver="anderson", chunk=4)
    assert len(calls) == 2  # every block's accelerated iteration failed
    torch.testing.assert_close(A1, A0, atol=1e-10, rtol=0)
    torch.testing.assert_close(G1, G0, atol=1e-9, rtol=0)


def test_a_non_finite_forward_step_falls_back_to_the_plain_iteration_in_the_same_precision(monkeypatch):
    # a non-finite plain step inside the forward's accelerated loop hands the block to the plain iteration in the
    # same precision (float32 here), which moves the input to float64 only if it meets one too, as the plain route
    # does (before: the accelerated route moved the input to float64 at once)
    S = torch.randn(1, 9, 9, generator=torch.Generator().manual_seed(38))
    A0 = causal_ot_attention(S, 0.9, solver="plain", chunk=4)
    iterate, solve, dtypes = mod._anderson_host, mod._solve, []

    def poisoned(step, x, thr, **kw):
        if kw["what"].startswith("prefixes"):
            return iterate(lambda y: step(y) * float("inf"), x, thr, **kw)
        return iterate(step, x, thr, **kw)

    monkeypatch.setattr(mod, "_anderson_host", poisoned)
    monkeypatch.setattr(mod, "_solve", lambda s, *a, **k: dtypes.append(s.dtype) or solve(s, *a, **k))
    with torch.no_grad():
        A1 = causal_ot_attention(S, 0.9, solver="anderson", chunk=4)
    assert dtypes == [torch.float32]
    # both certify the float32 floor: dual residuals 256 eps, duals within 256 eps / (1 - rho) (Theorem 1)
    torch.testing.assert_close(A1, A0, atol=4 * 256 * torch.finfo(torch.float32).eps / (1 - 0.9), rtol=0)


def test_a_non_finite_adjoint_step_falls_back_to_the_plain_iteration(monkeypatch):
    # no wider range exists for the adjoint: a non-finite plain step inside its accelerated loop hands the block to
    # the plain iteration
    g = torch.Generator().manual_seed(34)
    S = 2.0 * torch.randn(1, 9, 9, generator=g, dtype=torch.float64)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    _, G0 = values_and_grads(causal_ot_attention, S, W, 0.9, solver="plain", chunk=4)
    iterate = mod._anderson_host

    def poisoned(step, x, thr, **kw):
        if kw["what"].startswith("adjoint"):
            def bad(y):
                img, extra = step(y)  # the accelerated adjoint's step also returns its products
                return img * float("inf"), extra

            return iterate(bad, x, thr, **kw)
        return iterate(step, x, thr, **kw)

    monkeypatch.setattr(mod, "_anderson_host", poisoned)
    _, G1 = values_and_grads(causal_ot_attention, S, W, 0.9, solver="anderson", chunk=4)
    torch.testing.assert_close(G1, G0, atol=1e-9, rtol=0)


def test_both_failing_raise_the_plain_iterations_error(monkeypatch):
    monkeypatch.setattr(mod, "_MAX_SWEEPS", 3)
    S = torch.randn(1, 6, 6, generator=torch.Generator().manual_seed(35), dtype=torch.float64)
    with pytest.raises(ConvergenceError, match="did not reach the tolerance after max_iter=3") as info:
        causal_ot_attention(S, 0.9, solver="anderson")
    assert isinstance(info.value.__cause__, ConvergenceError)  # the accelerated iteration's failure, chained


def test_the_plain_iterations_cap_names_its_condition(monkeypatch):
    # rho = 0.999 and a wide score spread: the plain iteration contracts at nearly rho per sweep (the plan
    # concentrates, so the column chain's second eigenvalue tends to one): 19,361 sweeps here, nearly the cap of
    # 20,000 (a cap of 2,000 in this test; at a spread of 300 even 20,000 sweeps do not suffice); the error says
    # so and by how much
    monkeypatch.setattr(mod, "_MAX_SWEEPS", 2000)
    S = 30.0 * torch.randn(1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with pytest.raises(ConvergenceError, match=r"contracts by 0\.99\d+ per sweep here and needs about \d+ more"):
        causal_ot_attention(S, 0.999, solver="plain")


@pytest.mark.slow
def test_a_spread_the_plain_iteration_cannot_reach_in_20000_sweeps():
    S = 300.0 * torch.randn(1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with pytest.raises(ConvergenceError, match=r"contracts by 0\.99\d+ per sweep here and needs about \d+ more"):
        causal_ot_attention(S, 0.999, solver="plain")
    A = causal_ot_attention(S, 0.999)  # the default mixes from rho = 0.6 on
    torch.testing.assert_close(A.sum(-1), torch.ones(1, 8, dtype=S.dtype), atol=1e-12, rtol=0)


def _outcome(S, W, rho, solver):
    try:
        return values_and_grads(causal_ot_attention, S, W, rho, solver=solver, chunk=4)
    except ConvergenceError:
        return None


@pytest.mark.parametrize(
    "n_seeds, spreads, rhos, dtypes",
    [
        (1, (30.0,), (0.9,), (torch.float64,)),
        (1, (1.0,), (0.9,), (torch.float32,)),
        pytest.param(4, (1.0, 10.0, 30.0, 100.0, 1000.0), (0.6, 0.9, 0.99, 0.995, 0.999),
                     (torch.float64, torch.float32), marks=pytest.mark.slow),
    ],
)
def test_accelerated_values_and_gradients_succeed_wherever_the_plain_ones_do(monkeypatch, n_seeds, spreads, rhos,
                                                                             dtypes):
    # a seeded sweep, forward and backward: wherever the plain iteration succeeds the accelerated one does and
    # agrees within the certificate of the dtype: dual residuals max(tol (1 - rho), 256 eps) give duals within
    # that over 1 - rho in oscillation (Theorem 1, proofs/contraction.md), and both routes are that close to the
    # fixed point; attention moves by at most about the duals' error
    monkeypatch.setattr(mod, "_MIX_WIDTH", 0)
    for dtype in dtypes:
        eps = torch.finfo(dtype).eps
        for seed in range(n_seeds):
            for spread in spreads:
                for rho in rhos:
                    g = torch.Generator().manual_seed(seed)
                    S = spread * torch.randn(1, 7, 7, generator=g, dtype=dtype)
                    W = torch.randn(S.shape, generator=g, dtype=dtype)
                    plain = _outcome(S, W, rho, "plain")
                    if plain is None:
                        continue
                    acc = _outcome(S, W, rho, "anderson")
                    assert acc is not None, (dtype, seed, spread, rho)
                    low = S[0][torch.ones(7, 7, dtype=torch.bool).tril()]
                    wide = float(low.max() - low.min()) > mod._FLOAT32_SPREAD  # a float64 fixed point
                    work = torch.float64 if dtype == torch.float64 or wide else dtype
                    floor = max(mod.default_tol(dtype) * (1 - rho), 256 * torch.finfo(work).eps)
                    bound = 4 * floor / (1 - rho) + 4 * eps
                    torch.testing.assert_close(acc[0], plain[0], atol=bound, rtol=0)
                    scale = float(plain[1].abs().max())
                    torch.testing.assert_close(acc[1], plain[1], atol=40 * bound * scale, rtol=0)


def _adjoint_sweeps(monkeypatch, S, W, rho, **kw):
    """Sweeps of every adjoint block (and the gradient) of ``sum(causal_ot_attention(S) * W)``."""
    iterate, counts = mod._iterate, []

    def counting(step, x, thr, **k):
        out = iterate(step, x, thr, **k)
        if k["what"].startswith("adjoint"):
            counts.append(out[1])
        return out

    monkeypatch.setattr(mod, "_iterate", counting)
    _, G = values_and_grads(causal_ot_attention, S, W, rho, **kw)
    monkeypatch.setattr(mod, "_iterate", iterate)
    return counts, G


@pytest.mark.parametrize("n, chunk, tol, plain", [(16, 8, 1e-6, False),
                                                  pytest.param(64, 16, None, True, marks=pytest.mark.slow)])
def test_the_adjoint_keeps_the_forward_pairs_in_float64(monkeypatch, n, chunk, tol, plain):
    # float64, rho = 0.9: the adjoint's Anderson iteration with the forward's last pairs (_adjoint_pairs) needs
    # fewer sweeps per block than without them, and the gradients agree within the tolerance (and with the plain
    # iteration's)
    g = torch.Generator().manual_seed(36)
    S = torch.randn(1, n, n, generator=g, dtype=torch.float64)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    with_pairs, G1 = _adjoint_sweeps(monkeypatch, S, W, 0.9, solver="anderson", chunk=chunk, tol=tol)
    monkeypatch.setattr(mod, "_PIN_RHO", 0.0)
    without, G0 = _adjoint_sweeps(monkeypatch, S, W, 0.9, solver="anderson", chunk=chunk, tol=tol)
    assert sum(with_pairs) < sum(without), (with_pairs, without)
    scale = float(G0.abs().max())
    # both certify the adjoint to a relative tol (module docstring), 1e-12 by default
    torch.testing.assert_close(G1, G0, atol=10 * (tol or 1e-12) * scale, rtol=0)
    if plain:
        _, Gp = values_and_grads(causal_ot_attention, S, W, 0.9, solver="plain", chunk=chunk)
        torch.testing.assert_close(G1, Gp, atol=1e-10 * scale, rtol=0)


def test_adjoint_pairs_against_autograd():
    # the identity behind _adjoint_pairs, by an independent route: for a forward pair (dx, dI = J~ dx, J~ the
    # normalised update's Jacobian by forward-mode autograd), the adjoint map moves by J^T P^T du = dF (reverse-mode
    # autograd of the unnormalised update G = -rho log C, and P^T of the normalisation)
    g = torch.Generator().manual_seed(37)
    N, w, rho = 1, 9, 0.9
    K = mod._kernel(torch.randn(N, w, w, generator=g, dtype=torch.float64))
    P = torch.arange(5, w)
    maskf = (torch.arange(w)[None, :] <= P[:, None]).to(K.dtype)
    offf, nrmask, idx = 1 - maskf, -rho * maskf, P.expand(N, -1)[..., None]
    x = (0.3 * torch.randn(N, len(P), w, generator=g, dtype=K.dtype) * maskf).scatter(-1, idx, 0.0)

    def unnormalised(y):  # the dual update from its definition (module docstring), out of place
        V = torch.exp(y) * maskf
        U = maskf / (V @ K[0].T + offf)
        return -rho * torch.log(U @ K[0] + offf) * maskf

    def normalised(y):
        G = unnormalised(y)
        return (G - G.gather(-1, idx)) * maskf

    _, (V, _, Cp) = mod._sweep_lean(x, K, maskf, offf, nrmask, idx)
    m = 3
    dx = (torch.randn(N, len(P), m, w, generator=g, dtype=K.dtype) * maskf[:, None, :])
    dx = dx.scatter(-1, idx[..., None].expand(N, len(P), m, 1), 0.0)
    jvp = torch.autograd.functional.jvp
    dI = torch.stack([jvp(normalised, (x,), (dx[:, :, i],))[1] for i in range(m)], dim=2)
    dR = dI - dx
    dRa, dFa = mod._adjoint_pairs(dR, dI, V, Cp, maskf)
    du = dFa - dRa
    for i in range(m):
        u = du[:, :, i]
        torch.testing.assert_close(u.sum(-1), torch.zeros_like(u.sum(-1)), atol=1e-12, rtol=0)  # P^T u = u
        JTu = torch.autograd.functional.vjp(unnormalised, x, mod._project(u, P))[1]
        torch.testing.assert_close(JTu * maskf, dFa[:, :, i], atol=1e-12, rtol=0)


def test_both_failing_do_not_advise_the_solver_that_just_failed(monkeypatch):
    # the plain iteration's sweep-cap error advises solver='anderson'; after the accelerated solver failed on the
    # block that advice is wrong, and the message says both failed instead
    monkeypatch.setattr(mod, "_MAX_SWEEPS", 3)
    S = torch.randn(1, 6, 6, generator=torch.Generator().manual_seed(6), dtype=torch.float64) * 150
    with pytest.raises(ConvergenceError, match="^the accelerated solver failed on this block and so did the plain") as info:
        causal_ot_attention(S, 0.9999, solver="anderson")
    assert "solver='anderson'" not in str(info.value) and "contracts by" in str(info.value)


@pytest.mark.parametrize("rho, solver", [(0.9, "plain"), (0.5, "auto"), (0.9, "auto")])
def test_a_second_derivative_is_refused_not_wrong(rho, solver):
    # the backward pass solves the adjoint system without recording a graph: differentiating the gradient again gave
    # silently wrong values (plain, auto at 0.5) or an internal error (auto at 0.9); it is refused by name
    S = torch.randn(1, 6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64, requires_grad=True)
    A = causal_ot_attention(S, rho, solver=solver)
    (g,) = torch.autograd.grad((A * A).sum(), S, create_graph=True)
    (g0,) = torch.autograd.grad((causal_ot_attention(S, rho, solver=solver) ** 2).sum(), S)
    assert torch.equal(g.detach(), g0)  # the first derivative is the same with create_graph
    with pytest.raises(RuntimeError, match="supports first derivatives only"):
        torch.autograd.grad(g[0, 3, 1], S)
