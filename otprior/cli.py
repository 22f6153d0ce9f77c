"""The ``otprior`` command: ``otprior report`` and the subcommands that compute one thing.

Bad input becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._validation import DomainError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, status 2
        sys.stderr.write(f"otprior: error: {message}\n")
        raise SystemExit(2)


def _emit(payload, as_json, lines):
    if as_json:
        print(json.dumps(payload, indent=2, default=float))
    else:
        print("\n".join(lines))


def _cmd_prior(args):
    from .ot_prior import ot_prior, ot_window_law, ot_window_mass

    prior, info = ot_prior(args.n, args.rho, return_info=True)
    windows = [w for w in (1, 4, 16, 64, 256) if w <= args.n]
    rows = [
        {"window": w, "mass": ot_window_mass(w, args.n, args.rho), "law": ot_window_law(w, args.n, args.rho)}
        for w in windows
    ]
    payload = {"n": args.n, "rho": args.rho, "c": info.c, "log_error_bound": info.log_error_bound, "windows": rows}
    lines = [f"constant-score prior of the causal OT operator, n={args.n}, rho={args.rho}", "window  exact mass  window law"]
    lines += [f"{r['window']:>6}  {r['mass']:.6e}  {r['law']:.6e}" for r in rows]
    if args.plot:
        from .plots import plot_ot_prior

        plot_ot_prior(args.n, args.rho).savefig(args.plot, dpi=150)
        payload["plot"] = str(args.plot)
        lines.append(f"plot written to {args.plot}")
    _emit(payload, args.json, lines)


def _cmd_report(args):
    from .report import build_report

    out = build_report(Path(args.out), progress=not args.json)
    if args.json:
        print(json.dumps({"report": str(out)}))
    else:
        print(f"report written to {out}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="otprior", description="Positional priors of causal attention (see proofs/ for every result).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("prior", help="constant-score prior of the causal OT operator and its window masses")
    p.add_argument("--rho", type=float, required=True, help="balancing strength rho in [0, 1) (0 = softmax)")
    p.add_argument("--n", type=lambda s: int(float(s)), required=True, help="query position (context length) n >= 1")
    p.add_argument("--plot", type=Path, help="also draw the prior into this image file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_prior)

    r = sub.add_parser("report", help="the main job: tables and figures on built-in defaults")
    r.add_argument("--out", default="report", help="output folder (created); index.html goes there")
    r.add_argument("--json", action="store_true", help="print the report location as JSON")
    r.set_defaults(func=_cmd_report)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except DomainError as exc:
        sys.stderr.write(f"otprior: error: {exc}\n")
        return 2
    return 0



if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
