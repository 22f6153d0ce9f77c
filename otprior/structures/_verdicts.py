"""The verdict of a single-head encoding under a structure (Theorems S1-S6, ``proofs/attention_structure.md``)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, logsumexp

from .._validation import DomainError
from ..encodings._base import DIRECT_MAX, Verdict, decisive
from ._base import _capped
from .absolute import AbsolutePositions
from .global_tokens import GlobalTokens
from .masks import Chunked, SlidingWindow

__all__ = ["structure_verdict"]


def _n_dependent(encoding) -> bool:
    """Whether the encoding's row depends on ``n`` beyond the distances (absolute key positions)."""
    from ..encodings import FIRE, CausalOT

    return bool(getattr(encoding, "bf16", False)) or isinstance(encoding, FIRE | CausalOT)


def _exp_text(x: float) -> str:
    """``e^x`` as text for any finite ``x``: the number while a double holds it, else a power of ten
    computed in logs (``x / ln 10``), never an overflow."""
    if x < 700.0:
        return decisive(math.exp(x), 0.0)
    return f"10^{x / math.log(10.0):.6g}"


def _verdict(encoding, structure, B, kind, bounded, reason, rate=None, **kw):
    return Verdict(encoding, bounded, kind, reason, rate, score_bound=B, structure=structure,
                   window_mass_fn=lambda W, n: structure.window_mass(encoding, W, n), **kw)


def structure_verdict(encoding, structure, B):
    """Classify ``encoding`` (one head) with softmax under ``structure`` (one head), content within ``B``."""
    from ..classification import classify

    parts = structure.parts()
    cap = structure.logit_cap
    windows = [p.width for p in parts if isinstance(p, SlidingWindow)]
    chunks = [p.size for p in parts if isinstance(p, Chunked)]
    globals_ = [p for p in parts if isinstance(p, GlobalTokens)]
    absolute = [p for p in parts if isinstance(p, AbsolutePositions)]
    s = structure.sink_logit
    sink_txt = "" if s is None else f" A sink logit s = {float(s):.6g} joins the denominator only: it lowers the window's share, never the verdict (Theorem S3)."

    if absolute:
        P = absolute[0].max_positions
        beyond = f"no position beyond {P}" if absolute[0].table == "learned" else "sinusoidal vectors at every position"
        upto = f" for n <= {P}" if absolute[0].table == "learned" else ""
        from ..encodings import NoPE

        # the masses follow the encoding's own row (window_mass): uniform only without a bias
        row = ("At constant scores the row is uniform, m_n(W) = W/n" if isinstance(encoding, NoPE) else
               f"At constant scores the row is softmax of {encoding.name}'s own bias (the masses given are that row's, not W/n)")
        return _verdict(
            encoding, structure, B, "undecided", None,
            f"{absolute[0].table} absolute positions (a table of {P}): no term of the logits depends on the distance alone, so "
            f"there is no relative prior to classify ({beyond}; Theorem S6). {row}{upto}; with scores (content and positions) "
            "within B of a constant, Theorem 10 bands it.",
        )
    if globals_:
        g = globals_[0]
        return _verdict(
            encoding, structure, B, "diluting", False,
            f"{g.block}-token blocks each add a summary token (ceil(n/{g.block}) of them, logit >= {g.logit:.6g}) to every row: "
            "their weight grows like n while the visible local row is bounded or dilutes itself, so m_n(W) -> 0 (Theorem S5)."
            + sink_txt,
            f"m_n(W) <= H / (Z + ceil(n/{g.block}) e^s), H and Z the local row's window and total weights",
            limit_fn=lambda W: 1.0,
        )
    if chunks and windows:
        return _verdict(encoding, structure, B, "undecided", None, "a sliding window and chunks on one row are not analysed.")

    if windows:
        w = min(windows)

        def limit(W):
            if w > DIRECT_MAX:
                raise DomainError("window", w, f"a sliding window at most {DIRECT_MAX} wide for direct summation")
            if _n_dependent(encoding):
                raise DomainError("encoding", encoding, "a relative bias (its row depends on the absolute positions)")
            return structure.distant_mass(encoding, min(W, w), w) if W < w else float(structure.sink_mass(encoding, 1, w))

        what = f"a sliding window of {w} keys"
        if _n_dependent(encoding) and s is not None:
            # Theorem S3 needs the visible row's total Z_n bounded away from 0; a row that depends on n can
            # lose it (causal-ot: b(0, n) falls like -ln(n)/2 and the sink takes the whole row, D_n -> 1)
            return _verdict(
                encoding, structure, B, "undecided", None,
                f"{what} with a sink (s = {float(s):.6g}): the sink's share e^s / (Z_n + e^s) stays below 1 only while the "
                f"visible row's total Z_n = sum over d < {w} of e^(b(d, n)) stays away from 0, and this encoding's bias "
                "depends on n (absolute positions or n itself), so Z_n may vanish and D_n(W) -> 1 (Theorem S3 assumes a "
                "row independent of n); not decided.",
            )
        if _n_dependent(encoding):
            return _verdict(
                encoding, structure, B, "bounded", True,
                f"{what}: every row sees at most {w} keys, and the window's keys stay within a bounded logit gap of them, so "
                f"D_n(W) <= 1 - (min over n of the visible row's window share) < 1 (Theorem S1); the row depends on the absolute "
                "positions here, so no single limit is given." + sink_txt,
            )
        return _verdict(
            encoding, structure, B, "bounded", True,
            f"{what}: for n >= {w} every row is the same {w}-key row, so D_n(W) = D_{w}(W) of that row, < 1, and 0 for W >= {w} "
            f"without a sink (Theorem S1); content within B = {B:.6g} moves it inside Theorem 10's band of that row." + sink_txt,
            f"D_n(W) constant for n >= {w}",
            limit_fn=limit,
        )

    if chunks:
        C = min(chunks)
        if _n_dependent(encoding):
            return _verdict(encoding, structure, B, "undecided", None,
                            f"chunks of {C}: the row depends on the absolute positions here; not analysed.")

        def bounds(W):
            if C > DIRECT_MAX:
                raise DomainError("size", C, f"a chunk at most {DIRECT_MAX} for direct summation")
            z = _capped(np.asarray(encoding.bias(np.arange(C, dtype=float), C), dtype=float), cap)
            # D_r(W) for every visible count r = 1..C (Theorem S2): prefix sums of the row, the window's and
            # the distant keys' apart (no cancellation), scaled by the row's largest weight
            top = float(np.max(z))
            e = np.exp(z - top)
            head = np.cumsum(e[: min(W, C)])
            head = np.concatenate([head, np.full(C - head.size, head[-1])])
            tail = np.concatenate([np.zeros(min(W, C)), np.cumsum(e[W:])])
            x = -math.inf if s is None else float(s) - top
            if x > 700.0:  # the sink outweighs the whole row by more than e^700: D = 1 to double precision
                D = np.ones(C)
            else:
                extra = math.exp(x)
                D = (tail + extra) / (head + tail + extra)
            return float(D.min()), float(D.max())

        def one_row(W):
            lo, hi = bounds(W)
            return lo, hi

        if C == 1:
            # every row is the query's own key (and the sink): D_n(W) is the same at every n, its limit (Theorem S2, r = 1)
            return _verdict(
                encoding, structure, B, "bounded", True,
                "chunks of 1: every query sees its own key only, so D_n(W) is the same at every n: 0 without a sink, the "
                "sink's share with one (Theorem S2 with C = 1, liminf = limsup)." + sink_txt,
                "D_n(W) constant in n",
                limit_fn=lambda W: bounds(W)[0],
            )

        if s is None:
            keep_all = f" For W >= {C} the window holds every visible key: D_n(W) = 0."
        else:
            keep_all = ""
        return _verdict(
            encoding, structure, B, "oscillating", True,
            f"chunks of {C}: the query at position n - 1 sees the (n - 1) mod {C} + 1 keys of its chunk, so D_n(W) runs through "
            f"D_r(W), r = 1..{C}, once per chunk and has no limit (Theorem S2): liminf = min_r D_r(W) (0 for r <= W without a "
            f"sink), limsup = max_r D_r(W) < 1, so the window keeps a share bounded away from 0 (bounded in Theorem 11's sense "
            f"limsup < 1), but no limit exists." + keep_all + sink_txt,
            f"periodic in n with period {C}",
            bounds_fn=one_row,
        )

    # every key visible
    if cap is not None:
        c = float(cap)
        return _verdict(
            encoding, structure, B, "diluting", False,
            f"logits soft-capped at c = {c:.6g}: every logit lies in (-c, c), bias and content together, so Theorem 10 holds "
            f"with B = c around the uniform row and m_n(W) <= W e^(2c) / (W e^(2c) + n - W) -> 0 whatever the bias and the "
            "weights (Theorem S4)." + sink_txt,
            f"1 - D_n(W) <= W e^{{2c}} / (W e^{{2c}} + n - W), e^(2c) = {_exp_text(2 * c)}",
            limit_fn=lambda W: 1.0,
        )
    base = classify(encoding, None, B)
    if s is None:
        return base
    if base.kind == "diluting":
        return _verdict(encoding, structure, B, "diluting", False, base.reason + sink_txt, base.rate, limit_fn=lambda W: 1.0)
    if base.kind != "bounded":
        return _verdict(encoding, structure, B, "undecided", None, f"{base.kind} encoding with a sink: not analysed. " + base.reason)

    if _n_dependent(encoding):
        # Theorem S3's limit Z_oo = e^(b(0)) / m_oo(1) assumes a row independent of n
        return _verdict(encoding, structure, B, "undecided", None,
                        "a sink on a bounded row that depends on n (absolute positions or n itself): Theorem S3's limit "
                        "assumes a row independent of n; not decided. " + base.reason)
    b0 = float(np.asarray(encoding.bias(np.zeros(1), 1), dtype=float).reshape(-1)[0])

    def sink_limit(W):
        # Theorem S3: m_oo^S(W) = m_oo(W) Z/(Z + e^s) with Z = e^(b(0)) / m_oo(1)
        m1 = 1.0 - base.limit_distant_mass(1)
        logZ = b0 - math.log(m1)
        keep = float(expit(logZ - float(s)))
        return 1.0 - (1.0 - base.limit_distant_mass(W)) * keep

    return _verdict(encoding, structure, B, "bounded", True, base.reason + sink_txt, base.rate, limit_fn=sink_limit)


def explicit_row(encoding, structure, n):
    """The constant-content row of the query with ``n`` keys, built term by term (for checks):
    ``(weights over distances 0 .. n-1, extra share)``."""
    r = structure.visible(n)
    z = np.full(n, -np.inf)
    z[:r] = _capped(np.asarray(encoding.bias(np.arange(r, dtype=float), n), dtype=float), structure.logit_cap)
    extra = structure.extra_log_weight(n)
    allz = z if extra is None else np.append(z, extra)
    p = np.exp(allz - logsumexp(allz))
    return p[:n], (0.0 if extra is None else float(p[n]))
