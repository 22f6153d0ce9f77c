"""The reference model's positional code against the registry and against ``transformers``."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from otprior.encodings import KerpleLog  # noqa: E402
from otprior.torch.model import ModelConfig, ReferenceModel, rope_frequencies  # noqa: E402


def _llama_config(head_dim, theta, rope):
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim, max_position_embeddings=4096, rope_parameters={"rope_theta": theta, **rope})


@pytest.mark.parametrize("head_dim, base", [(16, 10000.0), (64, 10000.0), (32, 500000.0)])
@pytest.mark.parametrize("scale, original", [(2.0, 64), (4.0, 64), (8.0, 1024), (3.5, 256)])
def test_reference_yarn_matches_transformers(head_dim, base, scale, original):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = _llama_config(head_dim, base, {"rope_type": "yarn", "factor": scale, "original_max_position_embeddings": original})
    inv, factor = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    ours, our_factor = rope_frequencies(head_dim, base, yarn_scale=scale, original_length=original)
    assert ours.dtype == torch.float32 and ours.shape == inv.shape
    rel = ((ours.double() - inv.double()).abs() / inv.double()).max().item()
    assert rel < 2e-7  # both float32: at most about one float32 rounding apart
    assert our_factor == pytest.approx(float(factor), rel=1e-12)
    # the ramp bites: some frequencies are interpolated (divided by the scale), some kept
    plain, _ = rope_frequencies(head_dim, base)
    assert torch.any(ours < plain * 0.99) and torch.isclose(ours[0], plain[0])


def test_reference_plain_rope_matches_transformers_default():
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    for head_dim in (8, 16, 64):
        inv, factor = LlamaRotaryEmbedding.compute_default_rope_parameters(_llama_config(head_dim, 10000.0, {"rope_type": "default"}))
        ours, our_factor = rope_frequencies(head_dim, 10000.0)
        torch.testing.assert_close(ours, inv.float(), rtol=2e-7, atol=0.0)
        assert our_factor == 1.0 == float(factor)


def test_reference_kerple_bias_is_the_registry_encoding_from_stored_values():
    torch.manual_seed(3)
    model = ReferenceModel(ModelConfig(scheme="kerple-log", train_length=16, n_layers=1, n_heads=4, d_model=16, d_ff=32))
    pos = model.blocks[0].attn.pos
    with torch.no_grad():
        pos.bias_p[0] = -0.5  # below the clamp: the forward pass uses 0.01
        pos.bias_a[1] = 0.001
    x = torch.zeros(1, 30, 16)
    bias = pos(x)[0][:, -1, :].flip(-1).detach().double().numpy()  # (heads, distance 0..29)
    for h in range(4):
        enc = KerpleLog.from_stored(bias_p=pos.bias_p[h].item(), bias_a=pos.bias_a[h].item())
        np.testing.assert_allclose(bias[h], enc.bias(np.arange(30.0)), rtol=1e-6, atol=1e-6)
        assert pos.head_encoding(h) == enc
    assert pos.head_encoding(0).r1 == 0.01 and pos.head_encoding(1).r2 == 0.01


def test_checkpoint_analysis_plots_through_the_public_plot_functions(tmp_path):
    from matplotlib.figure import Figure
    from safetensors.torch import save_file

    from otprior.torch import analyse_checkpoint

    alphas = torch.tensor([1.1, 1.3, 1.6])
    raw = torch.log(torch.expm1(alphas - 1.05))
    save_file({"blocks.0.attn.pos.alpha_raw": raw, "blocks.0.attn.pos.alpha_margin": torch.tensor([0.05])}, str(tmp_path / "c.safetensors"))
    report = analyse_checkpoint(tmp_path / "c.safetensors", window=64, lengths=(512, 8192), tol=0.05)
    ax = Figure().add_subplot()
    fig = report.plot(ax=ax)
    assert fig is ax.figure
    points = [line for line in ax.lines if line.get_linestyle() == "None"]
    np.testing.assert_allclose(np.sort(np.concatenate([p.get_ydata() for p in points])), np.sort(alphas.numpy()), rtol=1e-6)
    levels = {round(float(line.get_ydata()[0]), 9) for line in ax.lines if line.get_linestyle() != "None"}
    assert levels == {1.0, round(1.0 + report.margin.margin, 9)}  # the boundary and 1 + delta

    save_file({"blocks.0.attn.slopes": torch.tensor([0.5, 0.25])}, str(tmp_path / "a.safetensors"))
    report = analyse_checkpoint(tmp_path / "a.safetensors", window=16, lengths=(256, 4096))
    ax = Figure().add_subplot()
    report.plot(ax=ax)
    assert len(ax.lines) == 2  # one curve per head: D_n(W) at the analysed lengths
    for line, row in zip(ax.lines, report.rows, strict=True):
        assert list(line.get_xdata()) == [256, 4096]
        np.testing.assert_allclose(line.get_ydata(), [row["distant_mass"]["256"], row["distant_mass"]["4096"]])
