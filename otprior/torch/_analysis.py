"""A checkpoint's positional parameters held against the theory (data in, data out).

For every head: the verdict of Theorem 11 (``proofs/classification.md``: bounded iff
:math:`\\sum_d e^{b(d)} < \\infty`), the parameter that decides it and its distance to
the boundary, and the constant-content distant mass :math:`D_n(W)` at the lengths asked
(default: the training length found beside the checkpoint and ``factor`` times it). For
the power-law schemes (log-distance, KERPLE-log) the exponent margin of Theorem 9
(:func:`otprior.margin_for`) is given as well; for ALiBi, KERPLE-power, T5, RoPE and
NoPE a margin in the exponent means nothing and none is given.

Every verdict and mass comes from the :mod:`otprior.encodings` registry: one encoding per layer
(:func:`otprior.torch.layer_encoding`), whose :func:`otprior.classify` is a tuple of per-head
verdicts and whose masses carry a leading head axis. Falcon's bfloat16 ALiBi rows dilute
(Theorem 11c) whatever the slope, so no parameter decides them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._validation import DomainError, PrecisionError
from ..classification import classify
from ..margin import margin_for
from ._checkpoint import Checkpoint, layer_encoding, layer_groups, layer_structure, load_checkpoint

__all__ = ["CheckpointReport", "analyse_checkpoint", "default_lengths", "DEFAULT_FACTOR", "FALLBACK_LENGTH"]

DEFAULT_FACTOR = 8
"""Default evaluation length as a multiple of the training length."""
FALLBACK_LENGTH = 2048
"""Training length assumed (and stated in the report) when none is found."""

_MARGIN_SCHEMES = ("log-distance", "kerple-log")


def _decider(scheme, params, encoding):
    """``(name, value, boundary)``: the parameter whose side of ``boundary`` decides the verdict of
    ``encoding`` (Theorem 11), or None when no single parameter does."""
    if scheme == "log-distance":
        return "alpha", params["alpha"], 1.0
    if scheme == "kerple-log":
        return "bias_p", params["bias_p"], 1.0  # exponent of (1 + bias_a d)^(-bias_p)
    if scheme == "kerple-power":
        if "bias_a" in params or "bias_p" in params:
            return "bias_a", params.get("bias_a", 1.0), 0.0  # coefficient of d^bias_p
        return None
    if scheme == "alibi":
        if getattr(encoding, "bf16", False):
            return None  # bfloat16 rows tie the nearest keys at every slope (Theorem 11c): no boundary
        return "slope", params["slope"], 0.0
    if scheme == "cable":
        return "min_increment", params["min_increment"], 0.0
    return None


def default_lengths(checkpoint: Checkpoint, factor=DEFAULT_FACTOR):
    """``((L, factor * L), source)`` with ``L`` the training length found, or
    :data:`FALLBACK_LENGTH` (stated as assumed) when none is."""
    if type(factor) is not int or factor < 2:
        raise DomainError("factor", factor, "an integer at least 2")
    L = checkpoint.training_length
    if L is None:
        return (FALLBACK_LENGTH, factor * FALLBACK_LENGTH), f"no training length found; {FALLBACK_LENGTH} assumed, and {factor}x beyond"
    return (L, factor * L), f"training length {L} ({checkpoint.training_length_source}) and {factor}x beyond"


@dataclass
class CheckpointReport:
    """Per-head verdicts and predictions for one checkpoint.

    Attributes
    ----------
    checkpoint : Checkpoint
    window : int
    lengths : tuple of int
    lengths_note : str
        Where the lengths come from.
    tol : float
    margin : MarginResult or None
        Theorem 9's margin, for the power-law schemes only.
    rows : list of dict
        One per head: ``layer``, ``head``, ``stack``, ``params``, ``kind``, ``reason``,
        ``decided_by`` (``{"name", "value", "boundary"}`` or None),
        ``distance_from_boundary``, ``distant_mass`` and ``window_mass`` (``{str(n): value}``),
        ``limit_distant_mass``.
    nearest : list of dict
        The heads nearest their boundary (smallest distance first).
    """

    checkpoint: Checkpoint
    window: int
    lengths: tuple
    lengths_note: str
    tol: float
    margin: object
    rows: list
    nearest: list = field(default_factory=list)

    @property
    def near_boundary(self):
        """Heads of a power-law scheme whose exponent lies below ``1 + margin``."""
        if self.margin is None:
            return []
        return [r for r in self.rows if r["decided_by"] is not None and r["decided_by"]["value"] < 1.0 + self.margin.margin]

    def as_dict(self) -> dict:
        """Strict JSON data (no NaN or infinities: absent values are ``None``)."""
        ckpt = self.checkpoint
        return {
            "path": str(ckpt.path),
            "scheme": ckpt.scheme,
            "family": ckpt.family,
            "note": ckpt.note,
            "encoding_params": ckpt.encoding_params,
            "num_layers": ckpt.num_layers,
            "num_heads": ckpt.num_heads,
            "keys_read": ckpt.keys_read,
            "bytes_read": ckpt.bytes_read,
            "window": self.window,
            "lengths": list(self.lengths),
            "lengths_note": self.lengths_note,
            "tol": self.tol,
            "margin": None if self.margin is None else self.margin.as_dict(),
            "counts": {k: sum(r["kind"] == k for r in self.rows) for k in ("bounded", "diluting", "oscillating", "undecided")},
            "implementation": ckpt.implementation,
            "structure_notes": ckpt.structure_notes,
            "not_modelled": [{"field": k, "why": why} for k, why in ckpt.not_modelled],
            "position_limit": ckpt.position_limit,
            "heads_near_boundary": [[r["stack"], r["layer"], r["head"]] for r in self.near_boundary],
            "nearest_boundary": [[r["stack"], r["layer"], r["head"], r["distance_from_boundary"]] for r in self.nearest],
            "heads": self.rows,
        }

    def format_text(self) -> str:
        """The report as a table (one line per head)."""
        ckpt = self.checkpoint
        L = self.lengths
        lines = [
            f"{ckpt.path}: {ckpt.note}",
            f"scheme {ckpt.scheme} ({ckpt.family}), {ckpt.num_layers} layers x {ckpt.num_heads} heads; read {len(ckpt.keys_read)} tensors ({ckpt.bytes_read} bytes)",
            f"window W = {self.window}; lengths {', '.join(map(str, L))}: {self.lengths_note}",
            ("modelled on transformers' class (what from_pretrained runs)" if ckpt.implementation == "transformers"
             else "modelled on the family's original implementation") + (f"; position limit {ckpt.position_limit} ({ckpt.position_limit_source})" if ckpt.position_limit else ""),
        ]
        lines += [f"structure: {note}" for note in ckpt.structure_notes]
        lines += [f"not modelled: {k} ({why})" for k, why in ckpt.not_modelled]
        if self.margin is not None:
            lines.append(
                f"margin for W = {self.window}, L = {L[0]}..{L[-1]}, tol = {self.tol:g}: delta = {self.margin.margin:.4f} "
                f"(exponent >= {self.margin.exponent:.4f})"
            )
        stacked = any(r["stack"] for r in self.rows)
        head = f"{'stack':<8}" if stacked else ""
        cols = " ".join(f"{'D_' + str(n):>9}" for n in L)
        lines.append(f"{head}{'layer':>5} {'head':>4} {'decided by':<24} {'distance':>9} {'verdict':<11} {cols}")
        near = {id(r) for r in self.near_boundary}
        for r in self.rows:
            d = r["decided_by"]
            decided = f"{d['name']}={d['value']:.4g} (>{d['boundary']:g})" if d else "-"
            dist = f"{r['distance_from_boundary']:9.4f}" if r["distance_from_boundary"] is not None else f"{'-':>9}"
            masses = " ".join(f"{r['distant_mass'][str(n)]:9.4f}" if r["distant_mass"][str(n)] is not None else f"{'?':>9}" for n in L)
            mark = " *" if id(r) in near else ""
            prefix = f"{r['stack']:<8}" if stacked else ""
            lines.append(f"{prefix}{r['layer']:>5} {r['head']:>4} {decided:<24} {dist} {r['kind']:<11} {masses}{mark}")
        counts = self.as_dict()["counts"]
        lines.append(f"{counts['bounded']} bounded, {counts['diluting']} diluting, {counts['oscillating']} oscillating, {counts['undecided']} undecided")
        for r in self.rows:  # every oscillating head: D_n(W) has no limit, its liminf and limsup instead
            if r["distant_mass_bounds"] is not None:
                lo, hi = r["distant_mass_bounds"]
                lines.append(f"oscillating: {(r['stack'] + ' ') if r['stack'] else ''}L{r['layer']}H{r['head']}: liminf D = {lo:.6g}, limsup D = {hi:.6g}")
        if self.margin is not None:
            lines.append(f"{len(self.near_boundary)} heads within the margin of the boundary (*)")
        if self.nearest:
            near_txt = ", ".join(f"{(r['stack'] + ' ') if r['stack'] else ''}L{r['layer']}H{r['head']} ({r['distance_from_boundary']:.4g})" for r in self.nearest)
            lines.append(f"nearest the boundary: {near_txt}")
        return "\n".join(lines)


    def plot(self, ax=None):
        """The analysis as a figure, drawn by :mod:`otprior.plots` (into ``ax`` when given).

        Where every head is decided by an exponent against the boundary 1 (log-distance
        :math:`\\alpha`, KERPLE-log :math:`r_1`): :func:`otprior.plots.plot_head_exponents`, with
        :math:`1 + \\delta` when the analysis has a margin. Otherwise (slopes, tables, bias-free
        heads, several stacks): :func:`otprior.plots.plot_head_distant_mass`, the predicted
        :math:`D_n(W)` of every head at the analysed lengths (lengths it could not evaluate
        left out). Returns the figure.
        """
        from .. import plots

        stacks = sorted({r["stack"] for r in self.rows})
        decided = [r for r in self.rows if r["decided_by"] is not None]
        if decided and len(stacks) == 1 and all(r["decided_by"]["boundary"] == 1.0 for r in decided):
            margin = None if self.margin is None else self.margin.margin
            fig = plots.plot_head_exponents(decided, margin, key=lambda r: r["decided_by"]["value"], ax=ax)
            target = ax if ax is not None else fig.axes[0]
            name = decided[0]["decided_by"]["name"]
            target.set_ylabel({"alpha": "exponent $\\alpha$", "r1": "exponent $r_1$ (KERPLE-log)"}.get(name, f"{name} per head"))
        else:
            rows = [
                dict(
                    r,
                    layer=f"{r['stack']} {r['layer']}" if len(stacks) > 1 else r["layer"],
                    distant_mass={n: v for n, v in r["distant_mass"].items() if v is not None},
                )
                for r in self.rows
            ]
            fig = plots.plot_head_distant_mass(rows, self.window, ax=ax)
            target = ax if ax is not None else fig.axes[0]
        target.set_title(f"{self.checkpoint.path.name}: {self.checkpoint.scheme}")
        return fig


def _finite_or_none(x):
    return x if x is not None and math.isfinite(x) else None


_UNEVALUATED = (OverflowError, PrecisionError, DomainError)  # sums the encodings cannot evaluate: stated, not guessed


def _layer_rows(ckpt, group, window, lengths):
    """Per head of one layer: ``(encoding, verdict, {str(n): D_n(W)}, D_oo(W), reason)``.

    One registry encoding for the layer (:func:`layer_encoding`): :func:`otprior.classify` answers
    with a tuple of verdicts and ``distant_mass`` with a leading head axis; a single-head
    encoding (parameters shared by every head) answers for all of them.
    """
    H = len(group)
    enc = layer_encoding(ckpt, group)
    st = layer_structure(ckpt, group)
    verdicts = classify(enc, structure=st)
    verdicts = verdicts if isinstance(verdicts, tuple) else (verdicts,) * H
    singles = enc.per_head() or (enc,) * H
    structs = [None if st is None else st.for_head(h) for h in range(H)] if st is not None and st.heads else [st] * H

    def masses_of(e, s, n):
        return e.distant_mass(window, n) if s is None else s.distant_mass(e, window, n)

    masses = []
    for single, s in zip(singles, structs, strict=True):  # per head: the structure may carry per-head sinks
        try:
            masses.append(({str(n): float(masses_of(single, s, n)) for n in lengths}, ""))
        except _UNEVALUATED as exc:
            masses.append(({str(n): None for n in lengths}, f" (distant mass not evaluated: {exc})"))
    out = []
    for single, v, (D_h, note) in zip(singles, verdicts, masses, strict=True):
        limit, bounds = None, None
        try:
            if v.kind == "oscillating":
                bounds = v.distant_mass_bounds(window)
                if bounds[0] == bounds[1]:  # liminf = limsup at this window (W >= the chunk): the limit exists
                    limit, bounds = bounds[0], None
            elif v.kind != "undecided":
                limit = v.limit_distant_mass(window)
        except _UNEVALUATED:
            pass
        out.append((single, v, D_h, limit, v.reason + note, bounds))
    return out


def analyse_checkpoint(
    checkpoint, *, scheme=None, mapping=None, num_heads=None, window=None, lengths=None, factor=DEFAULT_FACTOR, tol=0.05, nearest=5,
    implementation="transformers",
) -> CheckpointReport:
    """Per-head verdicts, deciding parameters and predicted distant masses of a checkpoint.

    Parameters
    ----------
    checkpoint : Checkpoint, str or Path
        A loaded checkpoint, or a path for :func:`load_checkpoint` (with ``scheme``,
        ``mapping``, ``num_heads``).
    window : int, optional
        ``W``; default ``min(64, lengths[0] // 2)``.
    lengths : sequence of int, optional
        Increasing context lengths; default :func:`default_lengths` (the training length
        found and ``factor`` times it).
    tol : float
        Allowed growth of the distant mass from ``lengths[0]`` to ``lengths[-1]`` for the
        margin (power-law schemes only).
    nearest : int
        How many heads nearest their boundary to list.
    implementation : {"transformers", "original"}
        Whose code to model where they differ (:func:`load_checkpoint`).

    Returns
    -------
    CheckpointReport

    Notes
    -----
    ``D_n(W)`` is the constant-content distant mass of the head's bias (the encodings'
    ``distant_mass``: closed forms for ALiBi, certified power sums for the power laws,
    direct log-sum-exp otherwise); the window mass is ``1 - D_n(W)``.
    """
    ckpt = (
        checkpoint
        if isinstance(checkpoint, Checkpoint)
        else load_checkpoint(checkpoint, scheme, mapping, num_heads=num_heads, implementation=implementation)
    )
    if lengths is None:
        lengths, note = default_lengths(ckpt, factor)
    else:
        note = "as given"
    lengths = tuple(lengths)
    if not 2 <= len(lengths) <= 64 or not all(type(n) is int and n >= 2 for n in lengths) or list(lengths) != sorted(set(lengths)):
        raise DomainError("lengths", lengths, "2 to 64 increasing integers >= 2")
    if window is None:
        window = max(1, min(64, lengths[0] // 2))
    if type(window) is not int or not 1 <= window < lengths[0]:
        raise DomainError("window", window, f"an integer in [1, {lengths[0] - 1}] (below the shortest length)")
    if not (isinstance(tol, float | int) and not isinstance(tol, bool) and 0 < tol < 1):
        raise DomainError("tol", tol, "a number in (0, 1)")
    margin = margin_for(window, (lengths[0], lengths[-1]), tol) if ckpt.scheme in _MARGIN_SCHEMES else None
    by_head = {}
    cache = {}
    for group in layer_groups(ckpt.heads):
        st = layer_structure(ckpt, group)
        lp = ckpt.layer_encoding_params.get(group[0].layer) if not group[0].stack else None
        key = (group[0].stack, tuple(tuple(sorted(h.params.items())) for h in group), repr(st), repr(lp))
        if key not in cache:
            cache[key] = _layer_rows(ckpt, group, window, lengths)
        for head, (per_head_encoding, v, D, limit, reason, bounds) in zip(group, cache[key], strict=True):
            dec = _decider(ckpt.scheme, head.params, per_head_encoding)
            constant = v.kind == "oscillating" and bounds is None and limit is not None  # the chunk within the window
            by_head[id(head)] = {
                "layer": head.layer,
                "head": head.head,
                "stack": head.stack,
                "params": {k: (list(x) if isinstance(x, tuple) else x) for k, x in head.params.items()},
                "kind": "bounded" if constant else v.kind,
                "reason": reason if not constant else
                f"{reason} At W = {window}, liminf = limsup = {limit:.6g}: D_n(W) is constant in n, bounded with that limit.",
                "decided_by": None if dec is None else {"name": dec[0], "value": dec[1], "boundary": dec[2]},
                "distance_from_boundary": None if dec is None else dec[1] - dec[2],
                "distant_mass": D,
                "window_mass": {n: None if x is None else 1.0 - x for n, x in D.items()},
                "limit_distant_mass": _finite_or_none(limit),
                "distant_mass_bounds": None if bounds is None else [bounds[0], bounds[1]],
                "structure": None if st is None else repr(st if not st.heads else st.for_head(head.head)),
            }
    rows = [by_head[id(h)] for h in ckpt.heads]
    ranked = sorted((r for r in rows if r["distance_from_boundary"] is not None), key=lambda r: abs(r["distance_from_boundary"]))
    return CheckpointReport(ckpt, window, lengths, note, float(tol), margin, rows, ranked[: max(0, int(nearest))])
