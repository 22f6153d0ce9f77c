"""``otprior prior``: the constant-score prior of causal OT attention and its window masses (Theorems 2, 4).

The library solves (:func:`otprior.ot_prior`, :func:`otprior.ot_window_law`); this module checks the
memory the length implies, prints the masses and draws the prior with ``--plot``.
"""

from __future__ import annotations

import math

from .. import limits
from .._output import check_new_file
from .._validation import RHO
from ._common import ANY_LENGTH, JSON_HELP, check_image_suffix, domain_type, path_type, save_figure, show_length

#: Bytes per entry that :func:`otprior.ot_prior` holds at once, with a margin: the Anderson
#: solver keeps 2 x 8 history rows of n doubles besides its iterate, image, residual and
#: output, and the block cumulative sums a few more (``prior`` measured 215 n bytes of
#: peak resident memory at n = 1e6 and 3e6).
PRIOR_BYTES_PER_ENTRY = 8 * 40


def _masses_only(args):
    """Beyond the memory cap (``n`` up to 1e300): the window masses from :func:`otprior.ot_window_mass`'s
    any-length routes beside the window law; the prior itself is not formed."""
    from ..ot_prior import ot_window_law, ot_window_mass

    windows = [w for w in (1, 4, 16, 64, 256, 1024) if w <= args.n]
    rows = []
    for w in windows:
        mass, route = ot_window_mass(w, args.n, args.rho, return_route=True)
        rows.append({"window": w, "mass": float(mass), "route": route, "law": float(ot_window_law(w, args.n, args.rho))})
    payload = {"n": args.n, "rho": args.rho, "c": None, "log_error_bound": None, "prior_formed": False, "windows": rows}
    lines = [
        f"constant-score prior of causal OT attention, n = {show_length(args.n)}, rho = {args.rho}",
        f"(the prior, about {PRIOR_BYTES_PER_ENTRY} n bytes, is beyond the memory cap: window masses from ot_window_mass)",
        "window   window mass     window law H_W (Z_q/n)^(1-rho)   route",
    ]
    lines += [f"{r['window']:>6}   {r['mass']:.6e}   {r['law']:.6e}                     {r['route']}" for r in rows]
    return payload, lines


def run(args):
    from ..ot_prior import ot_prior, ot_window_law

    if PRIOR_BYTES_PER_ENTRY * args.n > limits.current().max_bytes and not (args.full or args.plot is not None):
        return _masses_only(args)
    limits.check_allocation(PRIOR_BYTES_PER_ENTRY * args.n, "n", args.n)
    if args.full:
        limits.check_count(args.n, "n")
    if args.plot is not None:
        check_new_file(args.plot, force=args.force, name="plot")
        check_image_suffix(args.plot, "--plot")
    result = ot_prior(args.n, args.rho)
    prior = result.prior
    windows = [w for w in (1, 4, 16, 64, 256, 1024) if w <= args.n]
    # the masses of the prior just solved (sums of positive terms), not a second solve or the bounds route
    rows = [{"window": w, "mass": math.fsum(prior[:w].tolist()), "law": ot_window_law(w, args.n, args.rho)} for w in windows]
    payload = {"n": args.n, "rho": args.rho, "c": result.c, "log_error_bound": result.log_error_bound, "windows": rows}
    lines = [
        f"constant-score prior of causal OT attention, n = {args.n}, rho = {args.rho}",
        f"(certified log error of the scalings: {result.log_error_bound:.1e})",
        "window   exact mass      window law H_W (Z_q/n)^(1-rho)",
    ]
    lines += [f"{r['window']:>6}   {r['mass']:.6e}   {r['law']:.6e}" for r in rows]
    if args.full:
        payload["prior"] = prior
        lines += ["distance d   pi_n(d)"] + [f"{d:>10}   {p:.16e}" for d, p in enumerate(prior.tolist())]
    if args.plot is not None:
        from ..plots import plot_ot_prior

        save_figure(plot_ot_prior(args.n, args.rho), args.plot)
        payload["plot"] = str(args.plot)
        lines.append(f"plot written to {args.plot}")
    return payload, lines


def add(command):
    q = command("prior", run, help="constant-score prior of causal OT attention and its window masses (Theorems 2, 4)",
                description="The prior pi_n(d) of causal optimal-transport attention with balancing strength rho when every "
                "content score is equal (Theorem 2), for a query with n keys: its normaliser c and error bound, and the "
                "exact window mass m_n(W) of the W nearest keys beside the window law H_W (Z_q/n)^(1-rho) (Theorem 4) "
                "for W = 1, 4, 16, 64, 256, 1024 (those up to n); --full prints pi_n(d) at every distance, --plot draws it. Where the "
                "prior would exceed the memory cap (n up to 1e300), the masses come from ot_window_mass's any-length routes.")
    q.add_argument("--rho", type=domain_type(RHO), required=True, help=f"balancing strength rho in {RHO} (0 = causal softmax)")
    q.add_argument("--n", type=ANY_LENGTH, required=True, help=f"query position (context length) n >= 1, up to 1e300 (the prior takes about "
                   f"{PRIOR_BYTES_PER_ENTRY} n bytes; beyond the memory cap only the window masses are printed, from ot_window_mass)")
    q.add_argument("--full", action="store_true", help="also print pi_n(d) for every distance d = 0 .. n-1")
    q.add_argument("--plot", type=path_type, help="also draw the prior into this new image file (.png, .pdf, .svg, ...)")
    q.add_argument("--force", action="store_true", help="replace the --plot file if it exists")
    q.add_argument("--json", action="store_true", help=JSON_HELP)
