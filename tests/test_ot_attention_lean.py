"""The accelerated route of the torch OT attention (``solver="anderson"``; the default from rho = 0.6 on,
and on the CPU beyond T = 512): its start (the image of g = 0 in closed form), the finished problems it
drops from its batch, and what it must leave alone: ``solver="plain"`` everywhere and the default below
rho = 0.6 reproduce the release before the accelerated route's rewrite bit for bit, values and gradients."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _git_module import assert_same_bits, module_at, values_and_grads  # noqa: E402

import otprior  # noqa: E402
from otprior.torch import ot_attention as mod  # noqa: E402
from otprior.torch.ot_attention import causal_ot_attention  # noqa: E402

# the operator before the accelerated route was rewritten (start, batch, Gram matrix, sweeps)
_PREVIOUS_COMMIT = "2a78b9b87e68f7c4f810533c06663762c44483ad"


@pytest.fixture(scope="module")
def previous():
    """``otprior/torch/ot_attention.py`` of the previous release, loaded from git into this process."""
    return module_at(_PREVIOUS_COMMIT, "otprior/torch/ot_attention.py", "otprior.torch._ot_attention_previous", "otprior.torch")


def _assert_same_bits(previous, S, rho, **kw):
    W = torch.randn(S.shape, generator=torch.Generator().manual_seed(S.shape[-1]), dtype=S.dtype)
    assert_same_bits(previous.causal_ot_attention, causal_ot_attention, S, W, rho, **kw)


def test_plain_and_the_default_below_rho_0_6_keep_their_bits(previous):
    # several blocks (chunk 16), both dtypes; "plain" at every rho, the default where it is the committed rule
    g = torch.Generator().manual_seed(21)
    S = 2.0 * torch.randn(2, 32, 32, generator=g)
    _assert_same_bits(previous, S, 0.9, solver="plain", chunk=16)
    _assert_same_bits(previous, S, 0.5, chunk=16)
    S = 2.0 * torch.randn(2, 24, 24, generator=g, dtype=torch.float64)
    _assert_same_bits(previous, S, 0.3, solver="plain", chunk=16)
    _assert_same_bits(previous, S, 0.0, chunk=16)
    _assert_same_bits(previous, S, 0.5999, chunk=16, tol=1e-6)


@pytest.mark.slow
def test_plain_keeps_its_bits_on_wide_blocks(previous):
    # more rho and both dtypes; blocks wider than 512 and the default chunk; a float32 input whose spread takes the float64 fixed point
    g = torch.Generator().manual_seed(22)
    for dtype in (torch.float32, torch.float64):
        S = 2.0 * torch.randn(2, 40, 40, generator=g, dtype=dtype)
        for rho in (0.3, 0.9):
            _assert_same_bits(previous, S, rho, solver="plain", chunk=16)
        for rho in (0.0, 0.5, 0.5999):
            _assert_same_bits(previous, S, rho, chunk=16)
    _assert_same_bits(previous, torch.randn(1, 600, 600, generator=g), 0.9, solver="plain")
    _assert_same_bits(previous, torch.randn(1, 1, 300, 300, generator=g), 0.5)
    _assert_same_bits(previous, 30.0 * torch.randn(1, 60, 60, generator=g), 0.95, solver="plain", chunk=16)
    _assert_same_bits(previous, torch.randn(2, 40, 40, generator=g, dtype=torch.float64), 0.99, solver="plain", chunk=16)


def test_the_start_is_the_image_of_zero():
    # Lemma 1 (proofs/operator_fast_paths.md) against the map itself: one sweep of the products at g = 0
    g = torch.Generator().manual_seed(23)
    S = 3.0 * torch.randn(2, 50, 50, generator=g, dtype=torch.float64)
    K = mod._kernel(S)
    colsum = torch.zeros(2, 1, 0, dtype=S.dtype)
    ar = torch.arange(50)
    for p0, p1 in [(0, 16), (16, 32), (32, 48), (48, 50)]:
        x, colsum = mod._first_image(K, p0, p1, colsum, 0.9)
        P = ar[p0:p1]
        maskf = (ar[:p1][None, :] <= P[:, None]).to(S.dtype)
        image = mod._sweep(torch.zeros(2, p1 - p0, p1, dtype=S.dtype), K[:, :p1, :p1], maskf, 1 - maskf, 0.9, P)[0]
        torch.testing.assert_close(x, image, atol=1e-12, rtol=0)


def test_finished_problems_leave_the_batch_without_changing_the_answer(monkeypatch):
    g = torch.Generator().manual_seed(24)
    S = 2.0 * torch.randn(2, 30, 30, generator=g, dtype=torch.float64)
    W = torch.randn(S.shape, generator=g, dtype=S.dtype)
    widths, narrowed = [], []
    sweep, take = mod._sweep_lean, mod._take
    monkeypatch.setattr(mod, "_sweep_lean", lambda x, *a: widths.append(x.shape[1]) or sweep(x, *a))
    monkeypatch.setattr(mod, "_take", lambda t, sel: narrowed.append(sel.shape[1]) or take(t, sel))
    A1, G1 = values_and_grads(causal_ot_attention, S, W, 0.9, solver="anderson", chunk=15)
    assert min(widths) < 15 and narrowed  # the forward and the adjoint both dropped finished problems
    monkeypatch.setattr(mod, "_KEEP", 0.0)  # never drop
    widths.clear()
    A0, G0 = values_and_grads(causal_ot_attention, S, W, 0.9, solver="anderson", chunk=15)
    assert min(widths) == 15
    ref = otprior.causal_ot_attention(S.numpy(), 0.9)
    np.testing.assert_allclose(A1.numpy(), ref, atol=1e-10, rtol=0)
    np.testing.assert_allclose(A0.numpy(), ref, atol=1e-10, rtol=0)
    _, Gp = values_and_grads(causal_ot_attention, S, W, 0.9, solver="plain", chunk=15)
    torch.testing.assert_close(G1, Gp, atol=1e-8, rtol=0)
    torch.testing.assert_close(G0, Gp, atol=1e-8, rtol=0)


@pytest.mark.parametrize("n, chunk", [(4, 2), pytest.param(7, 3, marks=pytest.mark.slow)])
def test_accelerated_gradients_pass_gradcheck_over_several_blocks(n, chunk):
    S = torch.randn(1, n, n, dtype=torch.float64, generator=torch.Generator().manual_seed(25), requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s: causal_ot_attention(s, 0.9, chunk=chunk, solver="anderson"), (S,), eps=1e-6, atol=1e-6
    )


def test_float32_route_against_the_float64_plain_route():
    # the default at rho = 0.9 (accelerated, float32 fixed point) on two blocks of the default chunk, against the
    # plain iteration in float64: values within the float32 certificate (dual residual 256 eps, so duals within
    # 256 eps / (1 - rho) = 3e-4 in oscillation, and attention within about that relative error; the plain
    # float32 route is 3.5e-5 off here, the accelerated one 5.9e-5), gradients to a relative 1e-3
    g = torch.Generator().manual_seed(26)
    S = torch.randn(1, 2, 136, 136, generator=g)
    W = torch.randn(S.shape, generator=g)
    A, G = values_and_grads(causal_ot_attention, S, W, 0.9)
    A64, G64 = values_and_grads(causal_ot_attention, S.double(), W.double(), 0.9, solver="plain")
    assert float((A.double() - A64).abs().max()) < 3e-4
    assert float((G.double() - G64).abs().max()) < 1e-3 * float(G64.abs().max())
