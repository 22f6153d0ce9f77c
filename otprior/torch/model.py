"""A small causal transformer language model with pluggable positional schemes.

Schemes: ``nope``, ``rope`` (YaRN scaling at evaluation via ``yarn_scale``), ``alibi``,
``kerple-log``, ``cable``, ``log-distance`` (exponent ``alpha = 1 + margin + softplus(raw)``
per head, every head starting at ``alpha_init``) and ``causal-ot`` (the operator of :func:`otprior.causal_ot_attention`, converged to
``ot_tol`` with implicit gradients: :mod:`otprior.torch.ot_attention`).

The log-distance bias can be changed beyond a length ``L`` only (the intervention of the
paper): for ``d >= L`` the exponent becomes ``alpha'`` and the bias stays continuous at L.
Parameters are saved as safetensors with a JSON config beside them.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..encodings import REFERENCE_MODEL_SCHEMES, ALiBi, KerpleLog, LogDistance, NoPE, RoPE, kerple_clamp_bounds
from .ot_attention import causal_ot_attention

SCHEMES = REFERENCE_MODEL_SCHEMES


@dataclass
class ModelConfig:
    """Hyper-parameters of :class:`ReferenceModel` (byte-level vocabulary of 256)."""

    scheme: str = "log-distance"
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.0
    alpha_margin: float = 0.05
    alpha_init: float | None = None
    rope_base: float = 10000.0
    ot_rho: float = 0.5
    ot_tol: float | None = None
    train_length: int = 64

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme={self.scheme!r} is outside the valid domain: one of {', '.join(SCHEMES)}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model={self.d_model} must be a multiple of 2 * n_heads={2 * self.n_heads}")
        if self.alpha_init is not None and not (math.isfinite(self.alpha_init) and self.alpha_init > 1.0 + self.alpha_margin):
            raise ValueError(f"alpha_init={self.alpha_init!r} is outside the valid domain: a finite number above "
                             f"1 + alpha_margin = {1.0 + self.alpha_margin}")

    def initial_raw(self) -> float:
        """The raw parameter that starts every head at ``alpha_init``: the inverse of
        ``alpha = 1 + margin + softplus(raw)``, ``raw = log(expm1(alpha_init - 1 - margin))``
        (0, softplus(0) = ln 2, when ``alpha_init`` is not given)."""
        if self.alpha_init is None:
            return 0.0
        x = self.alpha_init - 1.0 - self.alpha_margin
        return x + math.log(-math.expm1(-x))  # log(expm1(x)) without overflow for large x


def _distances(T, device):
    i = torch.arange(T, device=device)
    return (i[:, None] - i[None, :]).clamp(min=0).to(torch.float32)


class PositionalBias(nn.Module):
    """The additive bias b(i, j) of one attention layer, or ``None`` (NoPE, RoPE)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        H = cfg.n_heads
        self.override = None  # (L, alpha') for the intervention on the log-distance bias
        if cfg.scheme == "log-distance":
            self.alpha_raw = nn.Parameter(torch.full((H,), cfg.initial_raw()))
            self.register_buffer("alpha_margin", torch.tensor([cfg.alpha_margin]))
        elif cfg.scheme == "alibi":
            self.register_buffer("slopes", torch.tensor(ALiBi.slopes(H), dtype=torch.float32))
        elif cfg.scheme == "kerple-log":
            # as in KERPLE: r1 ~ U(0, 2), r2 ~ U(0, 1), both clamped at 0.01 in the forward pass
            self.bias_p = nn.Parameter(torch.rand(H, 1, 1) * 2)
            self.bias_a = nn.Parameter(torch.rand(H, 1, 1))
        elif cfg.scheme == "cable":
            self.increment = nn.Linear(cfg.d_model, H)

    def alpha(self):
        return 1.0 + self.alpha_margin + F.softplus(self.alpha_raw)

    @torch.no_grad()
    def head_encoding(self, head, logit_bound=0.0):
        """The registry encoding of head ``head``'s bias, with content bound ``logit_bound``.

        ``LogDistance`` (the head's exponent), ``ALiBi`` (its slope), ``KerpleLog`` (from the
        stored parameters through :meth:`otprior.encodings.KerpleLog.from_stored`, which clamps
        as the forward pass does), ``RoPE`` (plain, at this model's base; YaRN applies only at
        evaluation) or ``NoPE``; ``None`` for biases that are not a function of distance alone
        (``cable``: content-dependent increments; ``causal-ot``: the operator, not a bias).
        """
        s, B = self.cfg.scheme, float(logit_bound)
        if s == "log-distance":
            return LogDistance(float(self.alpha()[head]), logit_bound=B)
        if s == "alibi":
            return ALiBi(float(self.slopes[head]), logit_bound=B)
        if s == "kerple-log":
            return KerpleLog.from_stored(bias_p=float(self.bias_p[head]), bias_a=float(self.bias_a[head]), logit_bound=B)
        if s == "rope":
            return RoPE(B, head_dim=self.cfg.d_model // self.cfg.n_heads, rope_theta=self.cfg.rope_base)
        if s == "nope":
            return NoPE(B)
        return None

    def forward(self, x):
        T = x.shape[1]
        d = _distances(T, x.device)
        s = self.cfg.scheme
        if s == "log-distance":
            alpha = self.alpha()[:, None, None]
            bias = -alpha * torch.log1p(d)
            if self.override is not None:
                L, new_alpha = self.override
                far = d >= L
                bent = -alpha * math.log1p(L) - new_alpha * (torch.log1p(d) - math.log1p(L))
                bias = torch.where(far, bent, bias)
            return bias[None]
        if s == "alibi":
            return (-self.slopes[:, None, None] * d)[None]
        if s == "kerple-log":
            # the KERPLE forward pass's clamps, from the registry (the one place they live)
            p = self.bias_p.clamp(*kerple_clamp_bounds("log", "bias_p"))
            a = self.bias_a.clamp(*kerple_clamp_bounds("log", "bias_a"))
            return (-p * torch.log1p(a * d))[None]
        if s == "cable":
            inc = F.softplus(self.increment(x))  # (B, T, H)
            cum = torch.cumsum(inc, dim=1).transpose(1, 2)  # (B, H, T)
            return -(cum[:, :, :, None] - cum[:, :, None, :]).clamp(min=0)
        return None


def rope_frequencies(head_dim, base, *, yarn_scale=None, original_length=64, beta_fast=32.0, beta_slow=1.0):
    """Rotary inverse frequencies (float32 tensor) and the attention factor on cos and sin.

    From the registry's :class:`otprior.encodings.RoPE`: plain RoPE (``rope_type="default"``,
    factor 1) without ``yarn_scale`` or at scale 1, otherwise ``rope_type="yarn"`` with
    ``factor=yarn_scale``, ``original_max_position_embeddings=original_length`` and the
    correction range ``beta_fast``/``beta_slow``: the frequencies and factor
    (:math:`0.1\\ln s + 1` for :math:`s > 1`) of ``transformers``' ``_compute_yarn_parameters``
    (Theorem R, ``proofs/rope_scaling.md``).
    """
    inv, factor = _rope_frequencies(int(head_dim), float(base), yarn_scale, int(original_length), float(beta_fast), float(beta_slow))
    return torch.tensor(inv, dtype=torch.float32), factor


@functools.lru_cache(maxsize=64)
def _rope_frequencies(head_dim, base, yarn_scale, original_length, beta_fast, beta_slow):
    if yarn_scale is None or yarn_scale == 1.0:
        rope = RoPE(0.0, head_dim=head_dim, rope_theta=base)
    else:
        rope = RoPE(
            0.0,
            rope_type="yarn",
            head_dim=head_dim,
            rope_theta=base,
            factor=float(yarn_scale),
            original_max_position_embeddings=original_length,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
        )
    inv = rope.inverse_frequencies()
    inv.flags.writeable = False  # cached: shared by every call
    return inv, rope.cos_sin_factor


def apply_rope(q, k, inv_freq, factor):
    T = q.shape[-2]
    angles = torch.arange(T, device=q.device, dtype=torch.float32)[:, None] * inv_freq.to(q.device)[None, :]
    cos, sin = torch.cos(angles) * factor, torch.sin(angles) * factor

    def rotate(x):
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    return rotate(q), rotate(k)


def causal_ot_rows(scores, rho, sweeps=None, *, tol=None):
    """Prefix-consistent causal OT attention of ``scores`` (..., T, T), differentiable.

    Kept for callers of the earlier fixed-sweep version: ``sweeps`` is ignored, the operator
    is iterated to ``tol`` (:func:`otprior.torch.ot_attention.causal_ot_attention`).
    """
    return causal_ot_attention(scores, rho, tol=tol)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.pos = PositionalBias(cfg)
        self.yarn_scale = None  # set at evaluation for RoPE + YaRN

    def forward(self, x, return_scores=False):
        B, T, _ = x.shape
        H = self.cfg.n_heads
        hd = self.cfg.d_model // H
        q, k, v = self.qkv(x).view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4)
        if self.cfg.scheme == "rope":
            inv, factor = rope_frequencies(hd, self.cfg.rope_base, yarn_scale=self.yarn_scale, original_length=self.cfg.train_length)
            q, k = apply_rope(q, k, inv, factor)
        content = q @ k.transpose(-1, -2) / math.sqrt(hd)
        bias = self.pos(x)
        scores = content if bias is None else content + bias
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if self.cfg.scheme == "causal-ot":
            attn = causal_ot_attention(scores, self.cfg.ot_rho, tol=self.cfg.ot_tol)
        else:
            attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(B, T, -1)
        out = self.out(y)
        if return_scores:
            return out, attn, content
        return out


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ReferenceModel(nn.Module):
    """Byte-level causal transformer LM. ``forward(idx)`` returns logits ``(B, T, 256)``."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(256, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, 256, bias=False)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))

    def loss(self, idx):
        logits = self(idx[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 256), idx[:, 1:].reshape(-1))

    def attention_maps(self, idx):
        """Per layer: (attention, content scores), each (B, H, T, T)."""
        maps = []
        x = self.embed(idx)
        for block in self.blocks:
            h = block.ln1(x)
            out, attn, content = block.attn(h, return_scores=True)
            maps.append((attn, content))
            x = x + out
            x = x + block.mlp(block.ln2(x))
        return maps

    def set_yarn(self, scale):
        for block in self.blocks:
            block.attn.yarn_scale = scale

    def set_bias_beyond(self, length, shift):
        """Intervention: beyond distance ``length`` every head's exponent becomes ``alpha + shift``
        (the bias stays continuous at ``length``); ``length=None`` restores the trained bias."""
        for block in self.blocks:
            pos = block.attn.pos
            if length is None:
                pos.override = None
            else:
                new_alpha = (pos.alpha().detach() + shift).reshape(-1, 1, 1)
                pos.override = (int(length), new_alpha)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())


def save_model(model: ReferenceModel, path) -> Path:
    """Save parameters as safetensors and the config as JSON beside them (``path.json``)."""
    from safetensors.torch import save_file

    from .._output import write_file_safely

    path = Path(path).with_suffix(".safetensors")
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    # through temporary names and os.replace: a link planted at either name is replaced, not followed
    write_file_safely(path, lambda tmp: save_file(state, str(tmp)), name="path")
    text = json.dumps(asdict(model.cfg), indent=2)
    write_file_safely(path.with_suffix(".json"), lambda tmp: tmp.write_text(text), name="path")
    return path


def load_model(path) -> ReferenceModel:
    """Rebuild a :class:`ReferenceModel` from ``save_model``'s files (no pickle involved)."""
    from safetensors.torch import load_file

    from ._config_size import check_runnable_size

    check_runnable_size(path)  # the config's size against the caps, before anything is built
    path = Path(path).with_suffix(".safetensors")
    raw = json.loads(path.with_suffix(".json").read_text())
    raw.pop("ot_sweeps", None)  # configs written before the operator iterated to a tolerance
    cfg = ModelConfig(**raw)
    model = ReferenceModel(cfg)
    model.load_state_dict(load_file(str(path)))
    return model
