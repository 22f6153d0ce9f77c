"""``otprior mass [ENCODING]``: window and distant mass of an encoding at given lengths.

Without an encoding it is ``mass log-distance`` (:data:`DEFAULT_MASS_ENCODING`), with certified
bounds (Theorems 7, 8) and digits on demand. The library computes every mass; this module prints one
row per head and length.
"""

from __future__ import annotations

from .. import limits
from ._common import ANY_LENGTH, JSON_HELP, int_type, show_length
from ._registry_flags import (
    MASS_DOMAINS,
    build_encoding,
    encoding_commands,
    encoding_parameters,
    given_flags,
    refuse_overflow,
)
from .prior import PRIOR_BYTES_PER_ENTRY

#: Encoding of ``otprior mass`` when none is named.
DEFAULT_MASS_ENCODING = "log-distance"


MASS_ROW_WEIGHT = 100  # items of the item cap one row of `otprior mass` counts for


def run(args):

    name = args.encoding
    given = given_flags(args, encoding_parameters(name))
    enc = build_encoding(name, given)
    with refuse_overflow(given):
        return _masses(args, name, enc)


def _masses(args, name, enc):
    from .. import log_distance as ld

    lengths = list(args.n)
    count = enc.heads or 1
    # the work, checked before the per-head instances are built: each row is a mass computation and a
    # printed line, weighed as MASS_ROW_WEIGHT items against the item cap (10^4 rows at the default cap)
    flag = "--n" if not enc.heads else ("--heads" if name == "alibi" and getattr(args, "slope", None) is None
                                        else "--slope" if name == "alibi" else "heads (per-head values)")
    limits.check_count(len(lengths) * count * MASS_ROW_WEIGHT, flag,
                       f"{count} heads x {len(lengths)} lengths, at most {limits.current().max_items // MASS_ROW_WEIGHT} rows")
    heads = enc.per_head()
    multi = heads is not None
    heads = heads if multi else (enc,)
    if name == "causal-ot":
        limits.check_allocation(PRIOR_BYTES_PER_ENTRY * max(lengths), "n", max(lengths))
    dps = getattr(args, "dps", None)
    more = f" and {len(heads) - 1} more heads" if len(heads) > 1 else ""
    rows, lines = [], [f"{heads[0]!r}{more}, window W = {args.window}"]
    for head, h in enumerate(heads):
        for n in lengths:
            row = {"n": n, "parameters": repr(h)}
            if multi:
                row["head"] = head
            if name == "log-distance":
                a, o = h.alpha, h.offset
                row["window_mass"] = ld.window_mass(args.window, n, a, offset=o)
                row["distant_mass"] = ld.distant_mass(args.window, n, a, offset=o)
                row["window_mass_bounds"] = list(ld.window_mass_bounds(args.window, n, a, offset=o))
                if dps is not None:
                    import mpmath

                    row["window_mass_digits"] = mpmath.nstr(ld.window_mass(args.window, n, a, offset=o, dps=dps), dps)
            else:
                # each share computed as itself: 1 - D loses a window mass below 1e-16 (0.5 sin(d) at 1e300)
                row["distant_mass"] = float(h.distant_mass(args.window, n))
                row["window_mass"] = float(h.window_mass(args.window, n))
            if h.score_bound:
                row["distant_mass_range"] = [float(x) for x in h.distant_mass_range(args.window, n)]
            rows.append(row)
            text = f"{'head ' + str(head) + '  ' if multi else ''}n = {show_length(n):<8} window mass {row['window_mass']:.16g}   distant mass {row['distant_mass']:.16g}"
            if "window_mass_bounds" in row:
                lo, hi = row["window_mass_bounds"]
                text += f"\n{'':8}certified {lo:.16g} <= m <= {hi:.16g}"
            if "window_mass_digits" in row:
                text += f"\n{'':8}{dps} digits  m = {row['window_mass_digits']}"
            if "distant_mass_range" in row:
                text += f"\n{'':8}content within +-{h.score_bound:g}: {row['distant_mass_range'][0]:.6g} <= D <= {row['distant_mass_range'][1]:.6g}"
            lines.append(text)
    payload = {"encoding": name, "parameters": repr(enc), "window": args.window, "heads": len(heads) if multi else None, "rows": rows}
    return payload, lines


def add(command):
    def common(e, enc):
        g = e.add_argument_group("masses")
        g.add_argument("--window", type=ANY_LENGTH, required=True, help="window W")
        g.add_argument("--n", type=ANY_LENGTH, nargs="+", required=True, help="context lengths n >= W (1e12 and up to 1e300 accepted)")
        if enc == "log-distance":
            g.add_argument("--dps", type=int_type(1, 10_000), help="also print the window mass to this many digits (mpmath)")
        g.add_argument("--json", action="store_true", help=JSON_HELP)

    encoding_commands(command, "mass", run, "window and distant mass of an encoding at given lengths (log-distance: certified bounds, Theorems 7, 8)",
                       "Window mass m_n(W) and distant mass D_n(W) = 1 - m_n(W) of the constant-content prior of an encoding "
                       f"(default {DEFAULT_MASS_ENCODING}, the first argument otherwise), at each length n; one row per head "
                       "and length for a multi-head encoding (per-head values as comma-separated lists, or alibi's --heads). "
                       "For log-distance, certified bounds and digits on demand.", common, MASS_DOMAINS)
