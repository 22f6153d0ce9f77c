"""Theory against the running model: each head's measured window and distant mass.

For a model that can be run (an :class:`otprior.torch.ReferenceModel`, or a
``transformers`` model with the eager attention path), the attention of the last query
over ``n`` tokens of a text is read for several lengths ``n``; per layer and head:

* the measured distant mass :math:`\\hat D_n(W) = \\sum_{d \\ge W} A_{n-1, n-1-d}`
  (mean over ``samples`` stretches of the text) and the window mass :math:`1 - \\hat D_n`;
* the prior's prediction :math:`D_n(W)` for constant content (the head's bias alone, as
  :func:`otprior.torch.analyse_checkpoint` computes it);
* the content band of Theorem 10: with the row's content scores within :math:`B` of a
  constant, :math:`T/(T + e^{2B}H) \\le \\hat D_n \\le T/(T + e^{-2B}H)`, ``T/H`` the
  prior's distant-to-window ratio. ``B`` is measured: the half-spread of the content
  scores of the row, largest over the samples. The reference model exposes its content
  scores; for a ``transformers`` model they are recovered from the attention itself,
  :math:`s_j = \\log A_j - b(d_j)` up to a constant (rows with an attention weight that
  underflows to 0 give an unknown ``B``, and the band [0, 1]).

The prediction itself is checked apart from the content: a copy of the model with every weight
but the positional ones set to zero (content held constant) is run on the same lengths, and its
rows, the model's own positional part, are compared with the predicted :math:`D_n(W)`. A
difference above ``tol`` is a **failed prediction** (``prediction_ok`` false, listed in
``failed``), never absorbed into the content band. The content scores of the band are then read
against the model's own positional row (:math:`\\log A_j - \\log P_j`), not against the prediction.

For an encoder-decoder model both stacks are measured, the same text feeding the encoder and
the decoder; the encoder's last query sees every key before it, so its row is causal too
(distances ``d >= 0``, the lower half of a bidirectional bucket table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .._validation import DomainError
from ..content_bound import MAX_SCORE_BOUND, content_band
from ._checkpoint import Checkpoint, checkpoint_from_model, layer_encoding, layer_groups

__all__ = ["AttentionMeasurement", "measure_attention", "measure_checkpoint", "load_runnable", "plot_measurement"]


@dataclass
class AttentionMeasurement:
    """Measured against predicted mass, one row per (stack, layer, head, length).

    Attributes
    ----------
    checkpoint : Checkpoint
        The positional parameters of the model measured.
    window : int
    lengths : tuple of int
    samples : int
        Stretches of the text measured per length.
    rows : list of dict
        ``stack``, ``layer``, ``head``, ``length``, ``measured_distant_mass``,
        ``measured_window_mass``, ``prior_distant_mass``, ``positional_distant_mass`` (the
        model's constant-content copy), ``prediction_error`` (their difference), ``prediction_ok``
        (``prediction_error <= tol``), ``content_bound`` (``B``, None when unknown), ``band``
        (``[lower, upper]``), ``within_band``.
    note : str
    tol : float
        The largest difference between prediction and the model's positional part accepted.
    skipped : list of str
        What was not measured, and why (lengths past the position limit, blocked maps).
    """

    checkpoint: Checkpoint
    window: int
    lengths: tuple
    samples: int
    rows: list
    note: str
    tol: float = 1e-4
    skipped: list = None

    @property
    def failed(self) -> list:
        """The rows whose prediction the model's own positional part contradicts (above ``tol``)."""
        return [r for r in self.rows if not r["prediction_ok"]]

    def as_dict(self) -> dict:
        return {
            "scheme": self.checkpoint.scheme,
            "family": self.checkpoint.family,
            "window": self.window,
            "lengths": list(self.lengths),
            "samples": self.samples,
            "note": self.note,
            "tol": self.tol,
            "skipped": list(self.skipped or []),
            "failed": len(self.failed),
            "prediction": "FAILED" if self.failed else "confirmed",
            "worst_prediction_error": max((r["prediction_error"] for r in self.rows), default=None),
            "rows": self.rows,
        }

    def largest_gap(self) -> float:
        """Largest ``|measured - prior|`` over the rows."""
        return max(abs(r["measured_distant_mass"] - r["prior_distant_mass"]) for r in self.rows)

    def format_text(self) -> str:
        worst = max((r["prediction_error"] for r in self.rows), default=0.0)
        verdict = (
            f"prediction FAILED on {len(self.failed)} of {len(self.rows)} rows (worst |model positional - prior| = {worst:.3g} > tol {self.tol:g})"
            if self.failed
            else f"prediction confirmed: |model positional - prior| <= {worst:.3g} (tol {self.tol:g}) on every row"
        )
        lines = [
            f"{self.checkpoint.scheme} ({self.checkpoint.family}): W = {self.window}, {self.samples} samples per length; {self.note}",
            verdict,
            *[f"not measured: {s}" for s in (self.skipped or [])],
            f"{'stack':<8}{'layer':>5} {'head':>4} {'n':>6} {'measured D':>11} {'model pos D':>11} {'prior D':>9} {'error':>9} "
            f"{'B':>7} {'band':>19} in",
        ]
        for r in self.rows:
            B = f"{r['content_bound']:7.3f}" if r["content_bound"] is not None else f"{'?':>7}"
            lo, hi = r["band"]
            flag = "" if r["prediction_ok"] else "  FAILED"
            lines.append(
                f"{r['stack']:<8}{r['layer']:>5} {r['head']:>4} {r['length']:>6} {r['measured_distant_mass']:11.5f} "
                f"{r['positional_distant_mass']:11.5f} {r['prior_distant_mass']:9.5f} {r['prediction_error']:9.2e} {B} "
                f"[{lo:8.5f}, {hi:8.5f}] {'yes' if r['within_band'] else 'NO'}{flag}"
            )
        return "\n".join(lines)


_POSITION_TABLES = ("wpe", "embed_positions", "position_embeddings", "sinks", "relative_attention_bias", "pos.")


def _positional_maps(positional, batch, ckpt):
    """The positional copy's attention maps, as :func:`_attention_maps`. Falcon with ALiBi: the rows
    its default (SDPA) path builds, softmax of the mask it hands to attention (bias and causal mask
    together), since transformers' eager Falcon path adds ALiBi a second time."""
    if not (ckpt.family == "falcon" and ckpt.scheme == "alibi" and hasattr(positional, "transformer")):
        return _attention_maps(positional, batch)
    captured = {}
    blocks = positional.transformer.h
    hooks = [
        blk.self_attention.register_forward_pre_hook(lambda m, a, kw, i=i: captured.__setitem__(i, kw.get("attention_mask")), with_kwargs=True)
        for i, blk in enumerate(blocks)
    ]
    try:
        positional(input_ids=batch, use_cache=False)  # the mask carries the bias on either path
    finally:
        for h in hooks:
            h.remove()
    maps = []
    for i in range(len(blocks)):
        mask = captured.get(i)
        if mask is None or mask.dim() != 4:
            raise DomainError("model", "Falcon", "a Falcon model whose SDPA path hands its ALiBi mask to attention")
        maps.append((torch.softmax(mask.double(), -1), None))
    return {"": maps}


def positional_copy(model, checkpoint):
    """A copy of ``model`` with every weight but the positional ones set to zero (content held constant):
    its attention rows are the model's own positional part, softmax(bias + mask) as its code builds them.
    Kept: the tensors the checkpoint reader read (``keys_read``), position tables and sinks."""
    import copy

    clone = copy.deepcopy(model)
    read = tuple(checkpoint.keys_read)
    with torch.no_grad():
        for name, p in clone.named_parameters():
            keep = any(name.endswith(k) or k.endswith(name) for k in read) or any(t in name for t in _POSITION_TABLES)
            if not keep:
                p.zero_()
    # the prediction is about the model's positional prior, not its storage format: a bfloat16 or
    # float16 checkpoint's softmax output rounded to 8 bits (~3e-4) would hide it, so the copy runs
    # in float32 (the measured rows of the model itself keep the checkpoint's dtype)
    clone.to(torch.float32)
    clone.eval()
    return clone


def _dtypes(model):
    """The floating dtypes of a model's parameters, as names (``bfloat16``, ``float32``)."""
    return sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters() if p.is_floating_point()})


def _tokens(tokens, tokenizer):
    if isinstance(tokens, str):
        if tokenizer is None:
            tokens = tokens.encode("utf-8")
        else:
            tokens = tokenizer(tokens)["input_ids"]
    if isinstance(tokens, bytes | bytearray):
        tokens = np.frombuffer(bytes(tokens), dtype=np.uint8)
    if isinstance(tokens, torch.Tensor):
        if torch.Tensor.is_floating_point(tokens) or torch.Tensor.is_complex(tokens):
            raise DomainError("tokens", f"a {tokens.dtype} tensor", "integer token ids")
        t = torch.Tensor.to(torch.Tensor.detach(tokens), dtype=torch.int64, copy=True).reshape(-1)
    else:
        t = torch.tensor(np.array(tokens, dtype=np.int64)).reshape(-1)
    if t.numel() == 0:
        raise DomainError("tokens", "empty", "a non-empty token sequence or text")
    return t


def _is_reference(model):
    return hasattr(model, "attention_maps") and hasattr(model, "cfg")


def _attention_maps(model, batch):
    """``{stack: per layer (attention, content or None)}``, each ``(B, H, T, T)``; the stack is
    ``""`` for decoder-only models, ``"encoder"`` and ``"decoder"`` for encoder-decoders."""
    if _is_reference(model):
        return {"": model.attention_maps(batch)}
    config = getattr(model, "config", None)
    if config is None:
        raise DomainError("model", type(model).__name__, "an otprior ReferenceModel or a transformers model")
    if getattr(config, "_attn_implementation", "eager") != "eager":
        if not hasattr(model, "set_attn_implementation"):
            raise DomainError("model", type(model).__name__, "a model whose eager attention path can return attention weights")
        model.set_attn_implementation("eager")
    kwargs = {"output_attentions": True, "use_cache": False}
    if getattr(config, "is_encoder_decoder", False):
        out = model(input_ids=batch, decoder_input_ids=batch, **kwargs)
        stacks = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions}
    else:
        out = model(input_ids=batch, **kwargs)
        stacks = {"": out.attentions}
    for attentions in stacks.values():
        if not attentions or any(a is None for a in attentions):
            raise DomainError("model", type(model).__name__, "a model that returns attention weights with output_attentions=True")
    return {stack: [(a, None) for a in attentions] for stack, attentions in stacks.items()}


@torch.no_grad()
def measure_attention(model, tokens, *, lengths, window, samples=4, tokenizer=None, checkpoint=None, tol=1e-4) -> AttentionMeasurement:
    """Measure each head's window and distant mass over a text at several lengths.

    Parameters
    ----------
    model : ReferenceModel or transformers model
        Run on the CPU in evaluation mode (the caller's mode is restored).
    tokens : str, bytes or sequence of int
        The text (bytes for the reference model; with ``tokenizer`` for others) or its tokens.
    lengths : sequence of int
        Context lengths ``n``, each above ``window`` and at most the number of tokens.
    window : int
        ``W``.
    samples : int
        Evenly spaced stretches of ``n`` tokens per length.
    checkpoint : Checkpoint, optional
        The model's positional parameters (default :func:`checkpoint_from_model`).
    tol : float
        The largest absolute difference between the model's positional part and the prediction
        accepted; above it the row is a failed prediction. The positional copy always runs in float32
        (its rows carry about 1e-7), whatever the checkpoint's dtype: a bfloat16 softmax output would
        carry about 4e-3 relative rounding, which says nothing about the prior.

    Returns
    -------
    AttentionMeasurement
    """
    lengths = tuple(lengths)
    if not lengths or not all(type(n) is int for n in lengths):
        raise DomainError("lengths", lengths, "a non-empty sequence of integers")
    if type(window) is not int or window < 1 or min(lengths) <= window:
        raise DomainError("window", window, f"an integer in [1, {min(lengths) - 1}] (below every length)")
    if type(samples) is not int or not 1 <= samples <= 256:
        raise DomainError("samples", samples, "an integer in [1, 256]")
    seq = _tokens(tokens, tokenizer)
    if seq.numel() < max(lengths):
        raise DomainError("tokens", f"{seq.numel()} tokens", f"at least max(lengths) = {max(lengths)} tokens")
    from ..limits import check_allocation

    # attention maps: layers x samples x heads x n x n float32, twice (attention and content)
    ckpt = checkpoint if checkpoint is not None else checkpoint_from_model(model)
    layers = max(h.layer for h in ckpt.heads) + 1
    check_allocation(2 * 4 * layers * samples * ckpt.num_heads * max(lengths) ** 2, "lengths", max(lengths))
    if not (isinstance(tol, float | int) and not isinstance(tol, bool) and 0 < tol < 1):
        raise DomainError("tol", tol, "a number in (0, 1)")
    from ._checkpoint import layer_structure

    heads = ckpt.heads
    single = {}  # each head's encoding and structure, from its layer's (one per layer, per-head answers)
    for group in layer_groups(heads):
        enc = layer_encoding(ckpt, group)
        st = layer_structure(ckpt, group)
        single.update(zip(map(id, group), enc.per_head() or (enc,) * len(group), strict=True))
        for h in group:
            single[("structure", id(h))] = None if st is None else (st.for_head(h.head) if st.heads else st)
    was_training = model.training
    model.eval()
    positional = positional_copy(model, ckpt)
    rows, skipped = [], []
    try:
        for n in lengths:
            starts = np.linspace(0, seq.numel() - n, samples).astype(int)
            batch = torch.stack([seq[s : s + n] for s in starts])
            maps = _attention_maps(model, batch)
            pmaps = _positional_maps(positional, batch[:1], ckpt)  # constant content: every token gives the same rows
            for head in heads:
                attn, content = maps[head.stack][head.layer]
                if attn.dim() != 4 or attn.shape[-1] != n:
                    note = f"{head.stack or 'self'} layer {head.layer}: blocked attention maps of shape {tuple(attn.shape)} (not rows of n keys)"
                    if note not in skipped:
                        skipped.append(note)
                    continue
                last = attn[:, head.head, -1, :].double().numpy()  # (samples, n)
                measured = 1.0 - last[:, n - window :].sum(-1)  # off the window: distant keys and any sink
                own = pmaps[head.stack][head.layer][0][0, head.head, -1, :].double().numpy()  # the model's positional row
                enc = single[id(head)]
                st = single[("structure", id(head))]
                visible = own > 0
                if content is not None:
                    c = content[:, head.head, -1, :].double().numpy()
                    c = np.where(visible[None, :], c, np.nan)
                    spreads = 0.5 * (np.nanmax(c, -1) - np.nanmin(c, -1))
                else:
                    # content read against the model's own positional row, never against the prediction
                    with np.errstate(divide="ignore", invalid="ignore"):
                        c = np.where(visible[None, :], np.log(last) - np.log(np.where(visible, own, 1.0))[None, :], np.nan)
                    ok = np.all(last[:, visible] > 0, axis=-1)
                    spreads = np.where(ok, 0.5 * (np.nanmax(c, -1) - np.nanmin(c, -1)), np.inf)
                B = float(spreads.max())
                prior = float(enc.distant_mass(window, n) if st is None else st.distant_mass(enc, window, n))
                own_D = float(1.0 - own[n - window :].sum())  # the model's positional distant mass (window: the last W keys)
                error = abs(own_D - prior)
                if B <= MAX_SCORE_BOUND:
                    # Theorem 10 (proofs/content_bound.md): the band around the constant-score
                    # prior for every row whose content spread is at most B. A RoPE model's
                    # measured B already includes any attention factor, and its prior is uniform
                    lo, hi = content_band(prior, B)
                else:
                    lo, hi = 0.0, 1.0
                slack = 1e-5  # float32 attention weights
                rows.append(
                    {
                        "stack": head.stack,
                        "layer": head.layer,
                        "head": head.head,
                        "length": n,
                        "measured_distant_mass": float(measured.mean()),
                        "measured_window_mass": float(1.0 - measured.mean()),
                        "prior_distant_mass": float(prior),
                        "positional_distant_mass": own_D,
                        "prediction_error": error,
                        "prediction_ok": bool(error <= tol),
                        "content_bound": B if math.isfinite(B) else None,
                        "band": [float(lo), float(hi)],
                        "within_band": bool(lo - slack <= measured.min() and measured.max() <= hi + slack),
                    }
                )
    finally:
        model.train(was_training)
        del positional
    note = "content scores read from the model" if _is_reference(model) else "content recovered from the attention (log A - bias)"
    dtypes = _dtypes(model)
    if dtypes and dtypes != ["float32"]:
        note += (f"; the positional check ran in float32 (the checkpoint's weights are {', '.join(dtypes)}; "
                 "the measured masses keep the checkpoint's dtype)")
    if ckpt.family == "falcon" and ckpt.scheme == "alibi":
        note += (
            "; transformers' eager Falcon path adds ALiBi twice (scaled by 1/sqrt(head_dim) and again inside the mask), "
            "so its measured masses follow twice the bias the prior uses (Falcon's bfloat16 row over sqrt(head_dim)); "
            "the prediction is checked against the rows of Falcon's default SDPA path"
        )
    return AttentionMeasurement(ckpt, window, lengths, samples, rows, note, tol=float(tol), skipped=skipped)


def plot_measurement(measurement: AttentionMeasurement, layer, *, stack="", ax=None):
    """One layer's heads: measured distant mass (markers), the prior (line) and Theorem 10's
    band (shaded) against the context length. Draws on ``ax`` (a new figure when None,
    made without pyplot or global settings) and returns it."""
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(6.0, 4.0)).add_subplot()
    rows = [r for r in measurement.rows if r["layer"] == layer and r["stack"] == stack]
    if not rows:
        raise DomainError("layer", layer, "a layer present in the measurement")
    for i, h in enumerate(sorted({r["head"] for r in rows})):
        mine = sorted((r for r in rows if r["head"] == h), key=lambda r: r["length"])
        n = [r["length"] for r in mine]
        color = f"C{i % 10}"
        ax.fill_between(n, [r["band"][0] for r in mine], [r["band"][1] for r in mine], color=color, alpha=0.12, lw=0)
        ax.plot(n, [r["prior_distant_mass"] for r in mine], color=color, lw=1.2)
        ax.plot(n, [r["measured_distant_mass"] for r in mine], "o", color=color, ms=4, label=f"head {h}")
    ax.set_xscale("log")
    ax.set(
        xlabel="context length n",
        ylabel=f"distant mass D_n(W = {measurement.window})",
        title=f"{(stack + ' ') if stack else ''}layer {layer}: measured (dots), prior (line), Theorem 10 band",
    )
    ax.legend(fontsize=7, ncol=2)
    return ax


def load_runnable(path):
    """A model to run from a checkpoint: the reference model (a ``save_model`` file with its
    JSON config beside it) or a ``transformers`` model folder, loaded with
    ``trust_remote_code=False`` and the eager attention path (the folder's own code is
    never run). Returns ``(model, tokenizer or None)``."""
    from pathlib import Path

    from ._checkpoint import CheckpointError

    path = Path(path)
    from ._config_size import check_runnable_size
    check_runnable_size(path)  # the model's size from its config, refused before it is built
    if path.is_file() and path.suffix == ".safetensors" and path.with_suffix(".json").is_file():
        from .model import load_model

        return load_model(path), None
    if not (path.is_dir() and (path / "config.json").is_file()):
        raise CheckpointError(f"{path}: no runnable model (a reference-model .safetensors with its .json, or a transformers folder)")
    try:
        import transformers
    except ImportError:
        raise CheckpointError(f"{path}: running a transformers model needs transformers installed") from None
    config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=False)
    cls = transformers.AutoModelForSeq2SeqLM if getattr(config, "is_encoder_decoder", False) else transformers.AutoModelForCausalLM
    model = cls.from_pretrained(path, attn_implementation="eager", trust_remote_code=False)
    tokenizer = None
    if any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    return model, tokenizer


def measure_checkpoint(path, text, *, lengths, window, samples=4, scheme=None, mapping=None, num_heads=None, implementation="transformers",
                       tol=1e-4, checkpoint=None):
    """:func:`measure_attention` for a checkpoint on disk (:func:`load_runnable`) over ``text``
    (str or bytes). Without a tokenizer in the folder the text's bytes are the tokens,
    taken modulo the vocabulary size (stated in the note).

    The checkpoint is read with the same ``scheme``, ``mapping``, ``num_heads`` and
    ``implementation`` as the analysis (or pass the ``checkpoint`` read already). Lengths above
    the model's position limit (learned position tables, MPT's ``max_seq_len``) are dropped and
    the note says so; if none remains, ``DomainError``.
    """
    from ._checkpoint import load_checkpoint

    ckpt = checkpoint if checkpoint is not None else load_checkpoint(path, scheme, mapping, num_heads=num_heads, implementation=implementation)
    lengths = tuple(lengths)
    note = ""
    if ckpt.position_limit is not None:
        kept = tuple(n for n in lengths if n <= ckpt.position_limit)
        dropped = [n for n in lengths if n > ckpt.position_limit]
        if dropped:
            if not kept:
                raise DomainError(
                    "lengths", lengths, f"lengths at most the model's position limit {ckpt.position_limit} ({ckpt.position_limit_source}); "
                    "the model cannot run longer inputs"
                )
            note = f"; lengths {', '.join(map(str, dropped))} dropped: above the model's position limit {ckpt.position_limit} ({ckpt.position_limit_source})"
            lengths = kept
    model, tokenizer = load_runnable(path)
    if tokenizer is not None:
        tokens = tokenizer(text if isinstance(text, str) else bytes(text).decode("utf-8", "replace"))["input_ids"]
    else:
        raw = np.frombuffer(text.encode("utf-8") if isinstance(text, str) else bytes(text), dtype=np.uint8).astype(np.int64)
        vocab = getattr(getattr(model, "config", None), "vocab_size", 256)
        tokens = raw % vocab
        if vocab < 256 and not _is_reference(model):
            note += f"; no tokenizer: bytes modulo the vocabulary size {vocab} as tokens"
    out = measure_attention(model, tokens, lengths=lengths, window=window, samples=samples, checkpoint=ckpt, tol=tol)
    out.note += note
    if note.startswith("; lengths"):
        out.skipped = [note[2:].split(";")[0], *(out.skipped or [])]
    return out
