"""The torch OT attention's solvers: the default reproduces the committed operator bit for bit
below rho = 0.6, and the accelerated route agrees with the numpy operator and with the plain
iteration wherever the plain iteration succeeds."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _git_module import assert_same_bits, module_at, values_and_grads  # noqa: E402

import otprior  # noqa: E402
from otprior import ConvergenceError, DomainError  # noqa: E402
from otprior.torch import ot_attention as mod  # noqa: E402
from otprior.torch.ot_attention import causal_ot_attention  # noqa: E402

# the operator the committed training study was trained with (last change to the file before
# the solvers were added); its plain route must be reproduced bit for bit
_REFERENCE_COMMIT = "0fa620d7b3f7564419b1afcf96ac1f28f0704fcd"


def _reference_module():
    """The committed ``otprior/torch/ot_attention.py``, loaded from git into this process."""
    return module_at(_REFERENCE_COMMIT, "otprior/torch/ot_attention.py", "otprior.torch._ot_attention_reference", "otprior.torch")


@pytest.fixture(scope="module")
def reference():
    return _reference_module()


def _assert_bit_identical(reference, S, rho, **kw):
    g = torch.Generator().manual_seed(S.shape[-1] + int(1000 * rho))
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    assert_same_bits(reference.causal_ot_attention, causal_ot_attention, S, W, rho, **kw)


def test_default_is_bit_identical_to_the_committed_operator_below_rho_0_6(reference):
    # calls as the model makes them: causal_ot_attention(scores, rho, tol=tol)
    g = torch.Generator().manual_seed(11)
    for dtype in (torch.float32, torch.float64):
        for shape, rho, tol in [((1, 1), 0.5, None), ((2, 2), 0.3, None), ((1, 2, 8, 8), 0.5, None),
                                ((3, 6, 6), 0.5999, 1e-3), ((2, 5, 5), 1e-9, None)]:
            _assert_bit_identical(reference, 3.0 * torch.randn(shape, generator=g, dtype=dtype), rho, tol=tol)
        # non-contiguous scores
        _assert_bit_identical(reference, torch.randn(2, 6, 6, generator=g, dtype=dtype).transpose(-1, -2), 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_default_is_bit_identical_over_more_small_shapes(reference, dtype):
    g = torch.Generator().manual_seed(13)
    cases = [
        ((3, 5, 5), 0.0, None), ((2, 2, 17, 17), 0.5, None), ((1, 3, 21, 21), 0.5999, None),
        ((3, 12, 12), 0.1, 1e-3), ((4, 9, 9), 1e-9, None), ((1, 4, 33, 33), 0.59, 1e-7),
    ]
    for shape, rho, tol in cases:
        _assert_bit_identical(reference, 3.0 * torch.randn(shape, generator=g, dtype=dtype), rho, tol=tol)
    # a wide score spread (a float64 fixed point for float32 input; the log domain beyond 600)
    _assert_bit_identical(reference, 40.0 * torch.randn(1, 16, 16, generator=g, dtype=dtype), 0.4, tol=None)
    _assert_bit_identical(reference, 400.0 * torch.randn(1, 8, 8, generator=g, dtype=dtype), 0.4, tol=None)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_default_is_bit_identical_over_many_shapes_and_wide_blocks(reference, dtype):
    # T up to 512 (the committed runs' widths), chunks, batches, spreads
    g = torch.Generator().manual_seed(12)
    for shape, rho, scale in [
        ((1, 512, 512), 0.5, 1.0), ((1, 1, 500, 500), 0.3, 2.0), ((2, 2, 130, 130), 0.55, 1.0),
        ((1, 257, 257), 0.2, 5.0), ((3, 64, 64), 0.58, 0.1), ((1, 100, 100), 0.5, 1e-6),
    ]:
        S = scale * torch.randn(shape, generator=g, dtype=dtype)
        _assert_bit_identical(reference, S, rho, tol=None)
    # blocks wider than 512 (the committed rule mixes there, memory 3): kept off the CPU only; on the CPU the
    # default takes the accelerated route there
    for shape, rho, scale in [((1, 600, 600), 0.5, 1.0), ((1, 1, 530, 530), 0.3, 2.0)]:
        S = scale * torch.randn(shape, generator=g, dtype=dtype)
        W = torch.randn(S.shape, generator=g, dtype=dtype)
        A0, G0 = values_and_grads(causal_ot_attention, S, W, rho, solver="anderson")
        A1, G1 = values_and_grads(causal_ot_attention, S, W, rho)
        assert torch.equal(A0, A1) and torch.equal(G0, G1)
    for rho in np.linspace(0.0, 0.599, 7):
        S = torch.randn(3, 2, 40, 40, generator=g, dtype=dtype)
        _assert_bit_identical(reference, S, float(rho), tol=1e-3 if rho > 0.3 else 1e-7)
        S = torch.randn(2, 2, 50, 50, generator=g, dtype=dtype)
        _assert_bit_identical(reference, S, float(rho), tol=None)


def test_default_takes_the_accelerated_route_beyond_512_on_the_cpu():
    # wider than the committed runs: the default is the accelerated route, values and gradients alike (before, it
    # kept the committed rule, which differs from it in rounding)
    g = torch.Generator().manual_seed(5)
    S = torch.randn(1, 520, 520, generator=g)
    W = torch.randn(S.shape, generator=g)
    A0, G0 = values_and_grads(causal_ot_attention, S, W, 0.5, solver="anderson")
    A1, G1 = values_and_grads(causal_ot_attention, S, W, 0.5)
    assert torch.equal(A0, A1) and torch.equal(G0, G1)
    A2, _ = values_and_grads(causal_ot_attention, S, W, 0.5, solver="plain")
    assert not torch.equal(A1, A2)  # the check can tell the routes apart
    assert float((A1 - A2).abs().max()) < 1e-4


def test_plain_is_the_default_below_rho_0_6_and_never_mixes(monkeypatch):
    g = torch.Generator().manual_seed(3)
    S = torch.randn(1, 2, 9, 9, generator=g, dtype=torch.float64)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    for rho in (0.2, 0.55):
        a = values_and_grads(causal_ot_attention, S, W, rho)
        b = values_and_grads(causal_ot_attention, S, W, rho, solver="plain")
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert mod._memory(0.9, 1024, "plain") == 0 and mod._memory(0.5, 2048, "plain", adjoint=True) == 0


@pytest.mark.parametrize(
    "rho", [0.59, pytest.param(0.3, marks=pytest.mark.slow), pytest.param(0.7, marks=pytest.mark.slow)]
)
def test_anderson_agrees_with_the_numpy_operator_in_float64(monkeypatch, rho):
    monkeypatch.setattr(mod, "_MIX_WIDTH", 0)  # mix on the small blocks of this test too
    monkeypatch.setattr(mod, "_TILE", 8)
    g = torch.Generator().manual_seed(int(100 * rho))
    S = 2.0 * torch.randn(2, 10, 10, generator=g, dtype=torch.float64)
    A = causal_ot_attention(S, rho, solver="anderson", chunk=4)
    np.testing.assert_allclose(A.numpy(), otprior.causal_ot_attention(S.numpy(), rho), atol=1e-10, rtol=0)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    _, G1 = values_and_grads(causal_ot_attention, S, W, rho, solver="anderson", chunk=4)
    _, G0 = values_and_grads(causal_ot_attention, S, W, rho, solver="plain", chunk=4)
    torch.testing.assert_close(G1, G0, atol=1e-9, rtol=0)


@pytest.mark.parametrize("rho, n", [(0.5, 3), pytest.param(0.5, 5, marks=pytest.mark.slow),
                                    pytest.param(0.95, 5, marks=pytest.mark.slow)])
def test_anderson_gradcheck(monkeypatch, rho, n):
    monkeypatch.setattr(mod, "_MIX_WIDTH", 0)
    monkeypatch.setattr(mod, "_TILE", 2)
    S = torch.randn(1, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(8), requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s: causal_ot_attention(s, rho, chunk=3, solver="anderson"), (S,), eps=1e-6, atol=1e-6
    )


@pytest.mark.slow
def test_anderson_with_device_style_checks(monkeypatch):
    # the accelerator route: selections by torch.where, the flag read every _CHECK_EVERY sweeps,
    # and the certifying sweep's products carried to the backward pass through that loop
    monkeypatch.setattr(mod, "_HOST_CHECKS", False)
    monkeypatch.setattr(mod, "_MIX_WIDTH", 0)
    g = torch.Generator().manual_seed(4)
    S = 2.0 * torch.randn(1, 21, 21, generator=g, dtype=torch.float64)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    for rho in (0.5, 0.9):
        A, G = values_and_grads(causal_ot_attention, S, W, rho, solver="anderson", chunk=8)
        np.testing.assert_allclose(A.numpy(), otprior.causal_ot_attention(S.numpy(), rho), atol=1e-10, rtol=0)
        monkeypatch.setattr(mod, "_HOST_CHECKS", True)
        _, G0 = values_and_grads(causal_ot_attention, S, W, rho, solver="plain", chunk=8)
        monkeypatch.setattr(mod, "_HOST_CHECKS", False)
        torch.testing.assert_close(G, G0, atol=1e-9, rtol=0)


def _outcome(S, rho, solver):
    try:
        return causal_ot_attention(S, rho, solver=solver, chunk=4)
    except ConvergenceError:
        return None


@pytest.mark.parametrize(
    "n_seeds, spreads, rhos",
    [(1, (1.0, 100.0), (0.9,)), pytest.param(6, (1.0, 10.0, 100.0, 1000.0), (0.3, 0.9, 0.99, 0.999), marks=pytest.mark.slow)],
)
def test_anderson_succeeds_wherever_the_plain_iteration_does(monkeypatch, n_seeds, spreads, rhos):
    # a seeded sweep over score spreads x1 .. x1e3 and rho up to 0.999 (spreads beyond 600 take the
    # log-domain path); the two routes agree to 1e-10 wherever the plain one converges
    monkeypatch.setattr(mod, "_MIX_WIDTH", 0)
    for seed in range(n_seeds):
        for spread in spreads:
            for rho in rhos:
                S = spread * torch.randn(1, 7, 7, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
                plain = _outcome(S, rho, "plain")
                if plain is None:
                    continue
                acc = _outcome(S, rho, "anderson")
                assert acc is not None, (seed, spread, rho)
                torch.testing.assert_close(acc, plain, atol=1e-10, rtol=0)


def test_one_and_two_tokens():
    for solver in ("auto", "plain", "anderson"):
        assert torch.equal(causal_ot_attention(torch.zeros(1, 1), 0.5, solver=solver), torch.ones(1, 1))
        S = torch.tensor([[0.0, 0.0], [3.0, -1.0]], dtype=torch.float64)
        for rho in (0.0, 0.5, 0.9):
            np.testing.assert_allclose(causal_ot_attention(S, rho, solver=solver).numpy(),
                                       otprior.causal_ot_attention(S.numpy(), rho), atol=1e-12, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["auto", "plain", "anderson"])
def test_edges_of_every_solver(solver):
    # T = 1 and 2, rho at 0 and next to 1, tiny and huge scores, float32 and bfloat16, no grad
    assert torch.equal(causal_ot_attention(torch.zeros(1, 1), 0.5, solver=solver), torch.ones(1, 1))
    S = torch.tensor([[0.0, 0.0], [3.0, -1.0]], dtype=torch.float64)
    if solver == "plain":  # the plain iteration's rate tends to one with rho: it may run out of sweeps
        with pytest.raises(ConvergenceError):
            causal_ot_attention(S, 1 - 1e-9, solver=solver)
    else:
        A = causal_ot_attention(S, 1 - 1e-9, solver=solver)
        np.testing.assert_allclose(A.numpy(), otprior.causal_ot_attention(S.numpy(), 1 - 1e-9), atol=1e-8, rtol=0)
    g = torch.Generator().manual_seed(2)
    for scale in (1e-300, 1e-8, 1e3):
        S = scale * torch.randn(2, 6, 6, generator=g, dtype=torch.float64)
        np.testing.assert_allclose(
            causal_ot_attention(S, 0.7, solver=solver).numpy(), otprior.causal_ot_attention(S.numpy(), 0.7),
            atol=1e-10, rtol=0,
        )
    S = torch.randn(3, 2, 12, 12, generator=g)
    for dtype in (torch.float32, torch.bfloat16):
        A = causal_ot_attention(S.to(dtype), 0.5, solver=solver)
        assert A.dtype == dtype and torch.isfinite(A).all()
        ref = otprior.causal_ot_attention(S.to(dtype).double().numpy(), 0.5)
        np.testing.assert_allclose(A.double().numpy(), ref, atol=1e-4 if dtype == torch.float32 else 1e-2, rtol=0)


def test_bad_solver_is_refused():
    for bad in ("Anderson", "", None, 1):
        with pytest.raises(DomainError, match="solver"):
            causal_ot_attention(torch.zeros(2, 2), 0.5, solver=bad)


def test_values_do_not_depend_on_requires_grad(monkeypatch):
    # without a backward pass nothing is kept for it; the values are the same bits
    monkeypatch.setattr(mod, "_MIX_WIDTH", 0)
    S = torch.randn(2, 12, 12, generator=torch.Generator().manual_seed(6))
    for rho, solver in ((0.5, "anderson"), (0.9, "auto")):
        a = causal_ot_attention(S, rho, solver=solver, chunk=5)
        b = causal_ot_attention(S.clone().requires_grad_(), rho, solver=solver, chunk=5)
        assert torch.equal(a, b.detach())


def test_the_memory_cap_counts_the_arrays_the_accelerated_backward_keeps():
    """The accelerated route keeps three more T x T arrays for its backward: a cap between 4 and 7 arrays refuses
    it with a gradient wanted and admits the plain route and the accelerated forward alone."""
    from otprior import limits

    s = torch.randn(16, 16, dtype=torch.float64, requires_grad=True)
    with limits.caps(max_bytes=5 * s.numel() * 8):
        with pytest.raises(limits.ResourceError, match="scores"):
            causal_ot_attention(s, 0.9, solver="anderson")
        causal_ot_attention(s, 0.9, solver="plain")
        causal_ot_attention(s.detach(), 0.9, solver="anderson")
        with torch.no_grad():
            causal_ot_attention(s, 0.9)
        causal_ot_attention(s, 0.5)  # the default below 0.6: the plain route, unchanged
