"""``otprior margin``: the smallest exponent margin that keeps distant-mass growth within tol (Theorem 9).

The library computes (:func:`otprior.margin_for`); this module declares the flags and prints the result.
"""

from __future__ import annotations

from .._validation import OFFSET, TOL, Interval
from ._common import JSON_HELP, LENGTH, domain_type, real_type

#: Time limits of ``margin`` and ``checkpoint``'s margin inside the API's domains of tol and offset:
#: the certified bisection's cost grows with the margin, and beyond these it took 2 to 35 s of CPU
#: (tol = 5e-324 with relative growth: 16-34 s; offset 1e15: 2 s, 1e23: 30 s); within them every
#: corner measured (W = 1, L up to 1e18, B = 100, both growths) took under 0.3 s.
MARGIN_COST = {"tol": Interval(1e-12, 1.0, high_open=True), "offset": Interval(1e-300, 1e6)}


def run(args):
    from ..margin import margin_for

    r = margin_for(args.window, tuple(args.lengths), args.tol, growth=args.growth, score_bound=args.score_bound, offset=args.offset)
    L0, L1 = args.lengths
    lines = [
        f"margin   delta = {r.margin:.10f}   (exponent alpha >= {r.exponent:.10f})",
        f"growth   {r.growth_kind} growth of distant mass at the margin: {r.growth:.6g} (tol {args.tol:g})",
        f"distant  D_L0 = {r.distant_mass[0]:.6g}, D_L1 = {r.distant_mass[1]:.6g} (W = {args.window}, L = {L0}..{L1})",
        f"bracket  [{r.bracket[0]:.12f}, {r.bracket[1]:.12f}] (certified: no margin below the left end works, the right end does)",
    ]
    return r.as_dict(), lines


def add(command):
    p = command("margin", run, help="smallest exponent margin keeping distant-mass growth within tol (Theorem 9)",
                description="Smallest delta >= 0 such that every log-distance exponent alpha >= 1 + delta keeps the "
                "growth of distant mass D_L(W) between the two lengths within tol.")
    p.add_argument("--window", type=LENGTH, required=True, help="window W: the W nearest keys (d < W)")
    p.add_argument("--lengths", type=LENGTH, nargs=2, required=True, metavar=("L0", "L1"), help="the two context lengths, L0 < L1")
    p.add_argument("--tol", type=domain_type(TOL, cost=MARGIN_COST["tol"]), required=True,
                   help=f"allowed growth of distant mass, in {TOL} (command line: {MARGIN_COST['tol']})")
    p.add_argument("--growth", choices=["absolute", "relative"], default="absolute", help="D_L1 - D_L0 (default) or D_L1/D_L0 - 1")
    p.add_argument("--score-bound", type=real_type(0.0, 100.0), default=0.0, help="bound B in [0, 100] on content scores around a constant (Theorem 10)")
    p.add_argument("--offset", type=domain_type(OFFSET, cost=MARGIN_COST["offset"]), default=1.0,
                   help=f"offset o in {OFFSET} of the bias -alpha log(d + o) (command line: {MARGIN_COST['offset']})")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
