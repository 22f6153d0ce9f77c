"""``otprior margin``: the smallest exponent margin that keeps distant-mass growth within tol (Theorem 9).

The library computes (:func:`otprior.margin_for`); this module declares the flags and prints the result.
"""

from __future__ import annotations

from .._validation import BAND_SCORE_BOUND, OFFSET, TOL
from ._common import ANY_LENGTH, JSON_HELP, domain_type, show_length


def run(args):
    from ..margin import margin_for

    r = margin_for(args.window, tuple(args.lengths), args.tol, growth=args.growth, score_bound=args.score_bound, offset=args.offset)
    L0, L1 = args.lengths
    lines = [
        f"margin   delta = {r.margin:.10f}   (exponent alpha >= {r.exponent:.10f})",
        f"growth   {r.growth_kind} growth of distant mass at the margin: {r.growth:.6g} (tol {args.tol:g})",
        f"distant  D_L0 = {r.distant_mass[0]:.6g}, D_L1 = {r.distant_mass[1]:.6g} (W = {show_length(args.window)}, L = {show_length(L0)}..{show_length(L1)})",
        f"bracket  [{r.bracket[0]:.12f}, {r.bracket[1]:.12f}] (certified: no margin below the left end works, the right end does)",
    ]
    return r.as_dict(), lines


def add(command):
    p = command("margin", run, help="smallest exponent margin keeping distant-mass growth within tol (Theorem 9)",
                description="Smallest delta >= 0 such that every log-distance exponent alpha >= 1 + delta keeps the "
                "growth of distant mass D_L(W) between the two lengths within tol.")
    p.add_argument("--window", type=ANY_LENGTH, required=True, help="window W: the W nearest keys (d < W)")
    p.add_argument("--lengths", type=ANY_LENGTH, nargs=2, required=True, metavar=("L0", "L1"),
                   help="the two context lengths, W < L0 < L1 (up to 1e300)")
    p.add_argument("--tol", type=domain_type(TOL), required=True, help=f"allowed growth of distant mass, in {TOL}")
    p.add_argument("--growth", choices=["absolute", "relative"], default="absolute", help="D_L1 - D_L0 (default) or D_L1/D_L0 - 1")
    p.add_argument("--score-bound", type=domain_type(BAND_SCORE_BOUND), default=0.0,
                   help=f"bound B in {BAND_SCORE_BOUND} on content scores around a constant (Theorem 10; default 0)")
    p.add_argument("--offset", type=domain_type(OFFSET), default=1.0, help=f"offset o in {OFFSET} of the bias -alpha log(d + o) (default 1)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
