"""The torch adapter: checkpoints in, theory out (install with ``pip install 'otprior[torch]'``).

Importing :mod:`otprior` never imports torch; this subpackage does. Checkpoints are data,
never code: safetensors headers are parsed and checked here and only the positional
tensors read; torch archives are checked entry by entry and loaded only with
``torch.load(weights_only=True)``, which refuses any object that is not a tensor or a
plain container. Model folders (single, sharded, per-layer), the families' configs and the
caps of :class:`otprior.limits.Caps` are described in ``_checkpoint`` and ``_formats``; the
attention structure (windows, chunks, sinks, caps, per-layer types) is read by ``_structure``.

* :func:`load_checkpoint` -> :class:`Checkpoint` (per-layer, per-head parameters);
* :func:`layer_encoding` / :func:`encoding_for` -> the :mod:`otprior.encodings` object of a layer's
  heads (multi-head) or of one head: every formula is the registry's;
* :func:`analyse_checkpoint` -> :class:`CheckpointReport` (verdicts, deciding parameter,
  distance to the boundary, predicted masses; ``as_dict()``, ``format_text()``, ``plot()``);
* :func:`measure_attention` / :func:`measure_checkpoint` -> :class:`AttentionMeasurement`
  (a running model's masses beside the prior and Theorem 10's band; :func:`plot_measurement`).
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("otprior.torch needs PyTorch: pip install 'otprior[torch]'") from exc

from ._analysis import CheckpointReport, analyse_checkpoint, default_lengths
from ._checkpoint import (
    SCHEMES,
    Checkpoint,
    CheckpointError,
    HeadParameters,
    checkpoint_from_model,
    checkpoint_from_state_dict,
    encoding_for,
    layer_encoding,
    layer_structure,
    load_checkpoint,
)
from .measurement import (
    AttentionMeasurement,
    load_runnable,
    measure_attention,
    measure_checkpoint,
    plot_measurement,
    positional_copy,
)
from .model import ModelConfig, ReferenceModel, load_model, save_model
from .train import byte_corpus, evaluate_loss, intervene, measure_distant_mass, train

__all__ = [
    "load_checkpoint",
    "Checkpoint",
    "CheckpointError",
    "HeadParameters",
    "analyse_checkpoint",
    "CheckpointReport",
    "default_lengths",
    "checkpoint_from_model",
    "checkpoint_from_state_dict",
    "encoding_for",
    "layer_encoding",
    "layer_structure",
    "SCHEMES",
    "AttentionMeasurement",
    "measure_attention",
    "measure_checkpoint",
    "load_runnable",
    "plot_measurement",
    "positional_copy",
    "ModelConfig",
    "ReferenceModel",
    "save_model",
    "load_model",
    "train",
    "byte_corpus",
    "evaluate_loss",
    "measure_distant_mass",
    "intervene",
]
