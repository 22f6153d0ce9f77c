"""The intervention: change only the log-distance bias beyond the training length.

For a shift ``delta``, every head's exponent beyond ``L`` becomes ``alpha + delta`` and
the bias stays continuous at ``L`` (``ReferenceModel.set_bias_beyond``). The prior
predicts the change of attention mass beyond ``L`` at the evaluation length (less for a
steeper bias, ``delta > 0``); the prediction for the loss is that it moves with that mass
(more attention on distances never seen in training, higher loss). The measured effect is
the paired change of the per-sequence loss on the same evaluation windows, with a
bootstrap interval over those windows; a direction is claimed only when the interval
excludes zero.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..encodings import Encoding
from .training import evaluate_sequences

__all__ = ["BentLogDistance", "bootstrap_interval", "intervene", "intervene_checkpoints"]


class BentLogDistance(Encoding):
    """The log-distance bias with exponent ``alpha`` below ``L`` and ``alpha_far`` from ``L`` on.

    .. math::

        b(d) = -\\alpha\\log(1 + d),\\ d < L;\\qquad
        b(d) = -\\alpha\\log(1 + L) - \\alpha_{far}(\\log(1 + d) - \\log(1 + L)),\\ d \\ge L.

    Its distant mass is the library's direct summation of the bias
    (:meth:`otprior.encodings.Encoding.distant_mass`).
    """

    name = "bent-log-distance"

    def __init__(self, alpha, alpha_far, length):
        self.alpha, self.alpha_far, self.length = float(alpha), float(alpha_far), int(length)

    def bias(self, d, n=None):
        d = np.asarray(d, dtype=float)
        L = self.length
        near = -self.alpha * np.log1p(d)
        far = -self.alpha * math.log1p(L) - self.alpha_far * (np.log1p(d) - math.log1p(L))
        return np.where(d < L, near, far)

    def _params(self):
        return {"alpha": self.alpha, "alpha_far": self.alpha_far, "length": self.length}


def bootstrap_interval(values, *, level=0.95, resamples=2000, seed=0):
    """Percentile bootstrap interval of the mean of ``values`` (resampled with replacement).

    Returns ``(mean, low, high)``. For paired differences this is the paired bootstrap.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"values of shape {x.shape} are outside the valid domain: at least two finite numbers")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    a = (1 - level) / 2
    return float(x.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def verdict_of(predicted, low, high):
    """``"in the predicted direction"`` when the interval excludes zero on the predicted side,
    ``"against the prediction"`` when it excludes zero on the other, else ``"inconclusive"``."""
    if low > 0 or high < 0:
        measured = 1 if low > 0 else -1
        return "in the predicted direction" if measured == predicted else "against the prediction"
    return "inconclusive"


@torch.no_grad()
def intervene(model, data, *, eval_length, shifts=(-0.5, 0.5), train_length=None, sequences=None, batches=8, batch_size=8,
              device="cpu", level=0.95, resamples=2000, seed=1234):
    """Change only the log-distance bias beyond the training length and compare with the prior.

    Parameters
    ----------
    model : ReferenceModel
        A ``log-distance`` model.
    data : Tensor
        Evaluation bytes.
    eval_length : int
        Length of the evaluation windows; the loss is taken over positions ``>= L``.
    shifts : sequence of float
        Exponent changes ``delta`` beyond ``L``.
    train_length : int, optional
        ``L`` (default the model's training length).
    sequences : int, optional
        Evaluation windows (default ``batches * batch_size``), the bootstrap's units.
    level, resamples : float, int
        Bootstrap interval of the mean paired loss change.

    Returns
    -------
    list of dict
        One per shift: the prior's distant mass beyond ``L`` before and after (mean over
        heads), the predicted loss direction, losses before and after, the loss change with
        its interval, the measured direction (0 when the interval holds zero), ``verdict``
        (``"in the predicted direction"``, ``"against the prediction"`` or ``"inconclusive"``)
        and ``agree`` (the verdict is the first).
    """
    if model.cfg.scheme != "log-distance":
        raise ValueError(f"scheme={model.cfg.scheme!r} is outside the valid domain: the intervention acts on the log-distance bias")
    L = int(train_length or model.cfg.train_length)
    n = int(eval_length)
    if n <= L:
        raise ValueError(f"eval_length={eval_length} is outside the valid domain: above the training length {L}")
    count = int(sequences or batches * batch_size)
    kw = dict(start=L, sequences=count, batch_size=batch_size, seed=seed, device=device)
    base = evaluate_sequences(model, data, n, **kw)
    alphas = np.concatenate([block.attn.pos.alpha().detach().cpu().numpy() for block in model.blocks])
    before = float(np.mean([BentLogDistance(a, a, L).distant_mass(L, n) for a in alphas]))
    rows = []
    for shift in shifts:
        after = float(np.mean([BentLogDistance(a, a + shift, L).distant_mass(L, n) for a in alphas]))
        model.set_bias_beyond(L, shift)
        try:
            changed = evaluate_sequences(model, data, n, **kw)
        finally:
            model.set_bias_beyond(None, None)
        diff = changed - base
        mean, low, high = bootstrap_interval(diff, level=level, resamples=resamples, seed=seed)
        predicted = int(np.sign(after - before))
        verdict = verdict_of(predicted, low, high)
        rows.append(
            {
                "shift": float(shift),
                "prior_far_mass_before": before,
                "prior_far_mass_after": after,
                "predicted_loss_direction": predicted,
                "loss_before": float(base.mean()),
                "loss_after": float(changed.mean()),
                "loss_change": mean,
                "interval": [low, high],
                "level": level,
                "sequences": count,
                "measured_loss_direction": 0 if verdict == "inconclusive" else (1 if low > 0 else -1),
                "verdict": verdict,
                "agree": verdict == "in the predicted direction",
            }
        )
    return rows


def intervene_checkpoints(paths, data, *, eval_length, shifts=(-0.5, 0.5), batches=8, batch_size=8, device="cpu"):
    """The intervention on each saved checkpoint: ``{"results": [...], "agree": k, "total": n}``
    (``agree`` counts rows whose interval excludes zero in the predicted direction)."""
    from ._config_size import check_runnable_size
    from .model import load_model

    results = []
    for path in paths:
        check_runnable_size(path)  # the model's size from its config, refused before it is built
        model = load_model(path)
        rows = intervene(model, data, eval_length=eval_length, shifts=tuple(shifts), batches=batches,
                         batch_size=batch_size, device=device)
        results.append({"checkpoint": str(path), "train_length": model.cfg.train_length, "rows": rows})
    agree = sum(r["agree"] for res in results for r in res["rows"])
    total = sum(len(res["rows"]) for res in results)
    return {"results": results, "agree": agree, "total": total}
