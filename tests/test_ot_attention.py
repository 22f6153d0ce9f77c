"""The trainable OT attention against the numpy operator, finite differences and causal softmax."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import otprior  # noqa: E402
from otprior import ConvergenceError, DomainError  # noqa: E402
from otprior.torch.ot_attention import causal_ot_attention  # noqa: E402


@pytest.mark.parametrize("rho, chunk", [(0.0, 5), (0.3, 1), (0.9, 8), (0.9, 128)])
def test_equals_the_numpy_operator_in_float64(rho, chunk):
    g = torch.Generator().manual_seed(int(10 * rho) + chunk)
    S = 2.0 * torch.randn(2, 23, 23, generator=g, dtype=torch.float64)
    A = causal_ot_attention(S, rho, chunk=chunk)
    ref = otprior.causal_ot_attention(S.numpy(), rho)
    np.testing.assert_allclose(A.numpy(), ref, atol=1e-10, rtol=0)


def test_rho_zero_is_causal_softmax():
    S = torch.randn(3, 17, 17, dtype=torch.float64)
    mask = torch.ones(17, 17, dtype=torch.bool).tril()
    ref = torch.softmax(S.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(causal_ot_attention(S, 0.0), ref, atol=1e-14, rtol=0)


@pytest.mark.parametrize("rho", [0.5, pytest.param(0.9, marks=pytest.mark.slow)])
def test_implicit_gradient_passes_gradcheck(rho):
    S = torch.randn(1, 7, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: causal_ot_attention(s, rho, chunk=4), (S,), eps=1e-6, atol=1e-6)


def _unrolled(S, rho, sweeps, normalise=False):
    # an independent route: plain log-domain sweeps on every prefix, differentiated by autograd
    T = S.shape[-1]
    rows = []
    for t in range(T):
        s = S[: t + 1, : t + 1].masked_fill(~torch.ones(t + 1, t + 1, dtype=torch.bool).tril(), float("-inf"))
        gcol = torch.zeros(t + 1, dtype=torch.float64)
        for _ in range(sweeps):
            f = -torch.logsumexp(s + gcol[None, :], dim=1)
            gcol = -rho * torch.logsumexp(s + f[:, None], dim=0)
            if normalise:  # the attention does not depend on a constant added to g
                gcol = gcol - gcol[-1]
        f = -torch.logsumexp(s + gcol[None, :], dim=1)
        rows.append(torch.cat([torch.exp(f[t] + s[t] + gcol), torch.zeros(T - t - 1, dtype=torch.float64)]))
    return torch.stack(rows)


def test_gradient_equals_unrolled_iteration():
    T, rho = 8, 0.6
    S = torch.randn(T, T, dtype=torch.float64, requires_grad=True)
    W = torch.randn(T, T, dtype=torch.float64)
    (_unrolled(S, rho, 100) * W).sum().backward()
    ref = S.grad.clone()
    S.grad = None
    (causal_ot_attention(S, rho) * W).sum().backward()
    torch.testing.assert_close(S.grad, ref, atol=1e-9, rtol=0)


def test_large_spread_values_and_gradients():
    # spread ~ 2000, beyond the float64 kernel: the log-domain path, against numpy and the
    # unrolled iteration
    T, rho = 7, 0.6
    g = torch.Generator().manual_seed(3)
    S = (400.0 * torch.randn(T, T, generator=g, dtype=torch.float64)).requires_grad_()
    W = torch.randn(T, T, generator=g, dtype=torch.float64)
    A = causal_ot_attention(S, rho)
    np.testing.assert_allclose(A.detach().numpy(), otprior.causal_ot_attention(S.detach().numpy(), rho), atol=1e-9)
    (A * W).sum().backward()
    got = S.grad.clone()
    S.grad = None
    (_unrolled(S, rho, 200, normalise=True) * W).sum().backward()
    torch.testing.assert_close(got, S.grad, atol=1e-7 * max(1.0, float(S.grad.abs().max())), rtol=0)


@pytest.mark.slow
def test_adjoint_near_rho_one_matches_a_central_difference():
    # the adjoint on the quotient by constants: no constant mode amplified by 1 / (1 - rho)
    # (one directional derivative against a central difference)
    g = torch.Generator().manual_seed(2)
    S = torch.randn(5, 5, dtype=torch.float64, generator=g, requires_grad=True)
    W, D = torch.randn(5, 5, dtype=torch.float64, generator=g), torch.randn(5, 5, dtype=torch.float64, generator=g)
    (causal_ot_attention(S, 0.999) * W).sum().backward()
    h = 1e-5
    with torch.no_grad():
        fd = ((causal_ot_attention(S + h * D, 0.999) - causal_ot_attention(S - h * D, 0.999)) * W).sum() / (2 * h)
    assert abs(float((S.grad * D).sum()) - float(fd)) <= 1e-6 * max(1.0, abs(float(fd)))


@pytest.mark.slow
def test_float32_duals_beyond_exp_range_move_to_float64():
    # at rho = 0.999 these duals span more than float32's exp range: the kernel reruns in
    # float64 instead of failing
    from otprior.torch import ot_attention as mod

    S = torch.randn(1, 64, 64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    A = causal_ot_attention(S, 0.999)
    np.testing.assert_allclose(A.detach().double().numpy(), otprior.causal_ot_attention(S.detach().double().numpy(), 0.999),
                               atol=1e-5, rtol=0)
    A.sum().backward()
    assert torch.isfinite(S.grad).all() and mod._FLOAT32_SPREAD > 0


def test_prefix_consistent_values_and_gradients():
    S = torch.randn(1, 12, 12, dtype=torch.float64, requires_grad=True)
    A = causal_ot_attention(S, 0.7)
    S2 = S.detach().clone()
    S2[0, 9:, :] += torch.randn(3, 12, dtype=torch.float64)
    torch.testing.assert_close(causal_ot_attention(S2, 0.7)[0, :9], A[0, :9].detach(), atol=1e-13, rtol=0)
    A[0, 5].sum().backward()  # row 5 depends on s_ij, i, j <= 5 only
    assert torch.all(S.grad[0, 6:] == 0) and torch.all(S.grad[0, :, 6:] == 0)


def test_float32_and_bf16_forward_with_a_float32_fixed_point():
    S = torch.randn(2, 40, 40, generator=torch.Generator().manual_seed(40))
    ref = otprior.causal_ot_attention(S.double().numpy(), 0.8)
    A = causal_ot_attention(S, 0.8)
    assert A.dtype == torch.float32
    # the certificate: a dual residual of at most 256 eps = 3.1e-5 (times max(1, |g|)), so duals within 1.5e-4 in
    # oscillation and softmax entries within about that relatively; measured over 40 seeds: at most 1.8e-5 (the
    # accelerated route, the default at rho = 0.8), 1.5e-5 (the plain iteration)
    np.testing.assert_allclose(A.double().numpy(), ref, atol=5e-5, rtol=0)
    Sb = S.bfloat16().requires_grad_()
    Ab = causal_ot_attention(Sb, 0.8)
    assert Ab.dtype == torch.bfloat16
    # the fixed point runs in float32 on the rounded scores; only the output is rounded to bf16
    ref_b = otprior.causal_ot_attention(Sb.detach().double().numpy(), 0.8)
    np.testing.assert_allclose(Ab.detach().double().numpy(), ref_b, atol=8e-3, rtol=0)
    Ab.float().sum().backward()
    assert Sb.grad.dtype == torch.bfloat16 and torch.isfinite(Sb.grad.float()).all()


def test_wide_score_spread_still_matches():
    # spread beyond the float32 kernel's range: the fixed point moves to float64
    S = torch.randn(1, 30, 30) * 30.0
    A = causal_ot_attention(S, 0.5)
    ref = otprior.causal_ot_attention(S.double().numpy(), 0.5)
    np.testing.assert_allclose(A.double().numpy(), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"rho": 1.0}, "rho"),
        ({"rho": -0.1}, "rho"),
        ({"rho": 0.5, "tol": 0.0}, "tol"),
        ({"rho": 0.5, "chunk": 0}, "chunk"),
    ],
)
def test_bad_parameters_are_refused(kwargs, name):
    with pytest.raises(DomainError, match=name):
        causal_ot_attention(torch.zeros(4, 4), **kwargs)


def test_bad_scores_are_refused():
    with pytest.raises(DomainError, match="scores"):
        causal_ot_attention(torch.zeros(3, 4), 0.5)
    bad = torch.zeros(4, 4)
    bad[2, 1] = float("nan")
    with pytest.raises(DomainError, match="scores"):
        causal_ot_attention(bad, 0.5)
    assert issubclass(ConvergenceError, RuntimeError)


def test_model_with_ot_attention_trains_a_step():
    from otprior.torch.model import ModelConfig, ReferenceModel

    model = ReferenceModel(ModelConfig(scheme="causal-ot", d_model=16, n_layers=1, n_heads=2, d_ff=32, train_length=20))
    idx = torch.randint(0, 256, (2, 21))
    loss = model.loss(idx)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert torch.isfinite(loss) and grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("host_checks", [pytest.param(True, marks=pytest.mark.slow), False])
def test_anderson_and_device_checks_agree_with_the_numpy_operator(monkeypatch, host_checks):
    # rho = 0.95 uses Anderson mixing (memory 6); host_checks=False runs the accelerator
    # path on the CPU (selections by torch.where, the flag read every _CHECK_EVERY sweeps);
    # a tile of 8 exercises the products that skip the kernel's zero tiles
    from otprior.torch import ot_attention as mod

    monkeypatch.setattr(mod, "_HOST_CHECKS", host_checks)
    monkeypatch.setattr(mod, "_TILE", 8)
    g = torch.Generator().manual_seed(5)
    S = 3.0 * torch.randn(1, 20, 20, generator=g, dtype=torch.float64)
    A = causal_ot_attention(S, 0.95, chunk=12)
    np.testing.assert_allclose(A.numpy(), otprior.causal_ot_attention(S.numpy(), 0.95), atol=1e-10, rtol=0)


@pytest.mark.parametrize("rho", [pytest.param(0.7, marks=pytest.mark.slow), 0.95])
def test_gradcheck_with_anderson_mixing(monkeypatch, rho):
    from otprior.torch import ot_attention as mod

    monkeypatch.setattr(mod, "_TILE", 2)
    S = torch.randn(1, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(7), requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: causal_ot_attention(s, rho, chunk=3), (S,), eps=1e-6, atol=1e-6)
