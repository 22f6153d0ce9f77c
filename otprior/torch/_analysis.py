"""A checkpoint's positional parameters held against the theory."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..encodings import ALiBi, KerpleLog, KerplePower, LogDistance, classify
from ..margin import margin_for
from ._checkpoint import Checkpoint, load_checkpoint


def _encoding(scheme, params):
    if scheme == "log-distance":
        return LogDistance(params["alpha"]), params["alpha"]
    if scheme == "kerple-log":
        return KerpleLog(params["r1"], params["r2"]), params["r1"]
    if scheme == "kerple-power":
        return KerplePower(params["r1"], min(params["r2"], 2.0)), None  # KERPLE clamps r2 to [0.01, 2]
    return ALiBi(params["slope"]), None


@dataclass
class CheckpointReport:
    """Per-head verdicts and predictions for one checkpoint; ``rows`` has one dict per head."""

    checkpoint: Checkpoint
    window: int
    lengths: tuple
    tol: float
    margin: object
    rows: list

    @property
    def near_boundary(self):
        """Heads whose exponent lies below ``1 + margin`` (the margin ``margin_for`` imposes)."""
        return [r for r in self.rows if r["exponent"] is not None and r["exponent"] < 1 + self.margin.margin]

    def as_dict(self):
        return {
            "path": str(self.checkpoint.path),
            "scheme": self.checkpoint.scheme,
            "scheme_note": self.checkpoint.note,
            "keys_read": self.checkpoint.keys_read,
            "bytes_read": self.checkpoint.bytes_read,
            "window": self.window,
            "lengths": list(self.lengths),
            "tol": self.tol,
            "margin": self.margin.as_dict(),
            "heads_near_boundary": [(r["layer"], r["head"]) for r in self.near_boundary],
            "counts": {k: sum(r["kind"] == k for r in self.rows) for k in ("bounded", "diluting")},
            "heads": self.rows,
        }

    def table(self) -> str:
        L0, L1 = self.lengths
        lines = [
            f"{self.checkpoint.path}: {self.checkpoint.note}; read {len(self.checkpoint.keys_read)} keys ({self.checkpoint.bytes_read} bytes)",
            f"margin for W = {self.window}, L = {L0}..{L1}, tol = {self.tol:g}: delta = {self.margin.margin:.4f} (exponent >= {self.margin.exponent:.4f})",
            f"{'layer':>5} {'head':>4} {'parameters':<28} {'alpha-1':>8} {'verdict':<9} {'D_L0':>8} {'D_L1':>8} {'growth':>8} near",
        ]
        for r in self.rows:
            params = ", ".join(f"{k}={v:.4g}" for k, v in r["params"].items())
            dist = f"{r['distance_from_boundary']:8.4f}" if r["distance_from_boundary"] is not None else f"{'-':>8}"
            near = "*" if r in self.near_boundary else ""
            lines.append(
                f"{r['layer']:>5} {r['head']:>4} {params:<28} {dist} {r['kind']:<9} {r['distant_mass'][str(L0)]:8.4f} "
                f"{r['distant_mass'][str(L1)]:8.4f} {r['growth']:8.4f} {near}"
            )
        counts = self.as_dict()["counts"]
        lines.append(f"{counts['bounded']} bounded, {counts['diluting']} diluting, {len(self.near_boundary)} within the margin of the boundary (*)")
        return "\n".join(lines)

    def plots(self, folder) -> list:
        """Exponent histogram against the boundary, and per-head predicted distant mass vs length."""
        from ..plots import _figure

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = []
        exps = [r["exponent"] for r in self.rows if r["exponent"] is not None]
        if exps:
            fig, (ax,) = _figure(1)
            ax.hist(exps, bins=min(30, max(5, len(exps))), color="C0")
            ax.axvline(1.0, color="k", label="summability boundary α = 1")
            ax.axvline(1 + self.margin.margin, color="C3", ls="--", label=f"1 + margin = {1 + self.margin.margin:.3f}")
            ax.set(xlabel="per-head exponent α", ylabel="heads", title=f"{self.checkpoint.path.name}: exponents vs boundary")
            ax.legend(fontsize=8)
            fig.savefig(folder / "exponents.png", dpi=120)
            out.append(folder / "exponents.png")
        fig, (ax,) = _figure(1, width=6.0)
        lengths = sorted(int(k) for k in self.rows[0]["distant_mass"])
        for r in self.rows:
            ax.semilogx(lengths, [r["distant_mass"][str(n)] for n in lengths], alpha=0.6, ls="-" if r["kind"] == "bounded" else "--")
        ax.set(xlabel="context length n (tokens)", ylabel=f"predicted distant mass D_n(W = {self.window})", title="per-head predicted distant mass")
        fig.savefig(folder / "distant_mass.png", dpi=120)
        out.append(folder / "distant_mass.png")
        return out


def analyse_checkpoint(checkpoint, *, scheme=None, mapping=None, num_heads=None, window=64, lengths=(512, 8192), tol=0.05, eval_lengths=None):
    """Per head: parameters, distance from the summability boundary, verdict, predicted distant
    mass at the lengths, growth from ``lengths[0]`` to ``lengths[1]``, and the margin
    :func:`otprior.margin_for` imposes for ``(window, lengths, tol)``."""
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint, scheme, mapping, num_heads=num_heads)
    L0, L1 = lengths
    grid = sorted({L0, L1, *(eval_lengths or ()), *np.geomspace(max(window + 1, 64), max(L1, 65536), 8).astype(int).tolist()})
    margin = margin_for(window, (L0, L1), tol)
    rows = []
    for head in ckpt.heads:
        enc, exponent = _encoding(ckpt.scheme, head.params)
        v = classify(enc)
        D = {str(n): enc.distant_mass(window, n) for n in grid}
        rows.append(
            {
                "layer": head.layer,
                "head": head.head,
                "params": head.params,
                "exponent": exponent,
                "distance_from_boundary": None if exponent is None else exponent - 1.0,
                "kind": v.kind,
                "reason": v.reason,
                "limit_distant_mass": v.limit_distant_mass(window),
                "distant_mass": D,
                "growth": D[str(L1)] - D[str(L0)],
            }
        )
    return CheckpointReport(ckpt, window, (L0, L1), tol, margin, rows)


def checkpoint_report(args):
    """The ``otprior checkpoint`` command."""
    report = analyse_checkpoint(args.path, scheme=args.scheme, window=args.window, lengths=tuple(args.lengths), tol=args.tol)
    paths = report.plots(args.plot) if args.plot else []
    if args.json:
        data = report.as_dict()
        data["plots"] = [str(p) for p in paths]
        print(json.dumps(data, indent=2))
    else:
        print(report.table())
        for p in paths:
            print(f"plot written to {p}")
