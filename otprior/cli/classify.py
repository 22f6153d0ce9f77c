"""``otprior classify ENCODING``: bounded, diluting, oscillating or content-dependent (Theorem 11).

One sub-command per registered encoding (:mod:`otprior.cli._registry_flags`), with a normaliser
(``--normaliser``) and an attention structure (``--sliding-window``, ``--sink``, ...). The library
decides (:func:`otprior.classify`); this module prints the verdict and :math:`D_\\infty(W)`.
"""

from __future__ import annotations

import math

from .. import limits
from .._validation import DomainError, Interval, PrecisionError
from ._common import ANY_LENGTH, JSON_HELP, LENGTH, add_renamed, domain_type
from ._registry_flags import (
    add_normaliser_flags,
    build_encoding,
    build_normaliser,
    encoding_commands,
    encoding_parameters,
    given_flags,
    refuse_overflow,
)


def _limit(verdict, window):
    """:math:`D_\\infty(W)` of a verdict, or None where the pair's constant-score limit is not known
    or does not exist (undecided; content-dependent or with a normaliser, when the library does not
    give it; rows that oscillate with n, such as Falcon's bfloat16 ALiBi)."""
    if verdict.kind == "undecided":
        return None
    try:
        return verdict.limit_distant_mass(window)
    except limits.ResourceError:  # a --window too large to sum: the user's flag, named
        raise
    except (DomainError, PrecisionError):
        return None


def _verdict_lines(v, window, indent=""):
    lines = [f"{indent}reason   {v.reason}"]
    if v.rate:
        lines.append(f"{indent}rate     {v.rate}")
    if v.kind == "content-dependent" and v.threshold is not None:
        lines.append(f"{indent}content  the window keeps its share iff the content advantage Delta {'>' if v.threshold_strict else '>='} {v.threshold:.6g}")
    limit = _limit(v, window)
    if limit is not None:
        lines.append(f"{indent}D_oo(W = {window}) = {limit:.6g}")
    elif v.kind == "oscillating":
        try:
            lo, hi = v.distant_mass_bounds(window)
            lines.append(f"{indent}no limit: liminf D_n(W = {window}) = {lo:.6g}, limsup = {hi:.6g}")
        except (DomainError, PrecisionError):
            lines.append(f"{indent}no limit: D_n(W = {window}) oscillates with n")
    elif v.kind != "undecided":
        lines.append(f"{indent}D_oo(W = {window}) not given: D_n(W) has no limit known to otprior for this pair")
    return lines


def run(args):
    from ..classification import classify

    given = given_flags(args, encoding_parameters(args.encoding))
    enc = build_encoding(args.encoding, given)
    normaliser = build_normaliser(args)
    structure = build_structure(args)
    with refuse_overflow(given):
        result = classify(enc, normaliser, structure=structure)
        return _classify_output(enc, normaliser, result, args.window, structure)


def _classify_output(enc, normaliser, result, window, structure=None):
    pair = repr(enc) + ("" if normaliser is None else f" with {normaliser!r}") + ("" if structure is None else f" under {structure!r}")
    if not isinstance(result, tuple):
        payload = result.as_dict(window) if result.kind == "oscillating" else result.as_dict()
        payload["window"] = window
        payload["limit_distant_mass"] = _limit(result, window)
        return payload, [f"{pair}: {result.kind.upper()}", *_verdict_lines(result, window)]
    rows = []
    lines = [f"{pair}: {len(result)} heads"]
    for head, v in enumerate(result):
        row = {"head": head, **v.as_dict(window if v.kind == "oscillating" else None), "limit_distant_mass": _limit(v, window)}
        rows.append(row)
        lines.append(f"head {head}: {v.kind.upper()}")
        lines += _verdict_lines(v, window, indent="  ")
    counts = {k: sum(r["kind"] == k for r in rows) for k in ("bounded", "diluting", "oscillating", "content-dependent", "undecided")}
    lines.append(", ".join(f"{c} {k}" for k, c in counts.items() if c))
    payload = {"encoding": repr(enc), "normaliser": None if normaliser is None else repr(normaliser), "window": window,
               "counts": counts, "heads": rows}
    return payload, lines


#: The domains of :mod:`otprior.structures`' parameters, as its classes check them: a sink logit is
#: any finite number (``AttentionSink``), a soft cap any finite c > 0 (``SoftCap``); the lengths are
#: integers >= 1 (up to 1e300 here, as every length of the command line).
SINK_LOGIT = Interval(-math.inf, math.inf, low_open=True, high_open=True)
SOFT_CAP = Interval(0.0, math.inf, low_open=True, high_open=True)


def _add_structure_flags(parser) -> None:
    """The attention structure (``otprior.structures``) as flags; several combine on one row."""
    g = parser.add_argument_group("structure", "which keys the query sees and what joins its softmax (default: full causal)")
    g.add_argument("--sliding-window", type=ANY_LENGTH, default=None, metavar="WIDTH", help="keep the WIDTH nearest keys (Theorem S1)")
    g.add_argument("--chunk", type=ANY_LENGTH, default=None, metavar="SIZE", help="chunked attention of SIZE positions (Theorem S2)")
    g.add_argument("--sink", type=domain_type(SINK_LOGIT), nargs="+", default=None, metavar="S",
                   help="sink logit joining the denominator only, one or one per head (Theorem S3)")
    g.add_argument("--softcap", type=domain_type(SOFT_CAP), default=None, metavar="C", help="logits c tanh(z / c), c > 0 (Theorem S4)")
    g.add_argument("--global-block", type=ANY_LENGTH, default=None, metavar="K", help="one summary token per K tokens (Theorem S5)")
    g.add_argument("--absolute-positions", type=ANY_LENGTH, default=None, metavar="P", help="learned absolute positions, table of P (Theorem S6)")

def build_structure(args):
    """The structure the flags describe (``None``: full causal)."""
    from .. import structures as S

    parts = []
    if getattr(args, "sliding_window", None) is not None:
        parts.append(S.SlidingWindow(args.sliding_window))
    if getattr(args, "chunk", None) is not None:
        parts.append(S.Chunked(args.chunk))
    if getattr(args, "sink", None) is not None:
        parts.append(S.AttentionSink(args.sink[0] if len(args.sink) == 1 else tuple(args.sink)))
    if getattr(args, "softcap", None) is not None:
        parts.append(S.SoftCap(args.softcap))
    if getattr(args, "global_block", None) is not None:
        parts.append(S.GlobalTokens(args.global_block))
    if getattr(args, "absolute_positions", None) is not None:
        parts.append(S.AbsolutePositions(args.absolute_positions))
    return S.compose(*parts) if parts else None


def add(command):
    def common(e, enc):
        add_normaliser_flags(e)
        _add_structure_flags(e)
        g = e.add_argument_group("classification")
        # the content bound is the encoding's own --logit-bound: one flag for one quantity
        add_renamed(e, {"--score-bound": "--logit-bound"}, "the content bound B is the encoding's parameter")
        g.add_argument("--window", type=LENGTH, default=64, help="window W for D_oo(W) (default 64)")
        g.add_argument("--json", action="store_true", help=JSON_HELP)

    encoding_commands(command, "classify", run, "bounded, diluting or content-dependent? (Theorem 11; normalisers: proofs/normalisers.md)",
                       "Classify a positional encoding, with a normaliser (default softmax), as bounded (distant attention mass "
                       "stays away from one), diluting (it tends to one) or content-dependent, with the reason, the rate and "
                       "D_oo(W); one verdict per head for a multi-head encoding.", common)
