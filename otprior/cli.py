"""The ``otprior`` command.

Subcommands: ``margin``, ``classify``, ``prior``, ``mass``, ``report`` (the main job) and
``checkpoint`` (with the torch extra). Every subcommand takes ``--json``; bad input
becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

from ._validation import ConvergenceError, DomainError, FileFormatError, PrecisionError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, status 2
        sys.stderr.write(f"otprior: error: {message}\n")
        raise SystemExit(2)


class UsageError(Exception):
    """A combination of options that cannot be used."""


def _number(text):
    """Accept 1e12 or 4096 for lengths; refuse anything that is not an integer value."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    return int(value)


def _emit(payload, as_json, lines):
    if as_json:
        print(json.dumps(payload, indent=2, default=_jsonable))
    else:
        print("\n".join(lines))


def _jsonable(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


# --- margin ---------------------------------------------------------------------------


def _cmd_margin(args):
    from .margin import margin_for

    r = margin_for(
        args.window, tuple(args.lengths), args.tol, growth=args.growth, score_bound=args.score_bound, offset=args.offset
    )
    lines = [
        f"margin   delta = {r.margin:.10f}   (exponent alpha >= {r.exponent:.10f})",
        f"growth   {r.growth_kind} growth of distant mass at the margin: {r.growth:.6g} (tol {r.tol:g})",
        f"distant  D_L0 = {r.distant_mass[0]:.6g}, D_L1 = {r.distant_mass[1]:.6g} (W = {r.window}, L = {r.lengths[0]}..{r.lengths[1]})",
        f"bracket  [{r.bracket[0]:.12f}, {r.bracket[1]:.12f}] (certified: no margin below the left end works, the right end does)",
    ]
    _emit(r.as_dict(), args.json, lines)


# --- classify -------------------------------------------------------------------------

_ENCODING_OPTIONS = {
    "logit_bound": (float, "bound B on |content logit - constant| (RoPE, YaRN; optional elsewhere)"),
    "scale": (float, "YaRN context scale factor s >= 1"),
    "slope": (float, "ALiBi slope m >= 0 (bias -m d)"),
    "r1": (float, "KERPLE r1 >= 0 (log: -r1 log(1 + r2 d); power: -r1 d^r2)"),
    "r2": (float, "KERPLE r2 (> 0; power variant: in (0, 2])"),
    "num_buckets": (int, "T5 number of buckets"),
    "max_distance": (int, "T5 max_distance"),
    "c": (float, "FIRE log-transform parameter c > 0"),
    "L": (float, "FIRE threshold L > 0"),
    "min_increment": (float, "CABLE smallest softplus increment epsilon >= 0"),
    "alpha": (float, "log-distance exponent alpha > 0 (bias -alpha log(d + offset))"),
    "offset": (float, "log-distance offset o > 0"),
    "rho": (float, "causal OT balancing strength rho in [0, 1)"),
    "expr": (str, "a bias b(d) as a sympy expression in d; write --expr='-1.2*log(d+1)' when it starts with '-'"),
}


def _encoding_classes():
    from . import encodings as E

    return {
        cls.name: cls
        for cls in (E.NoPE, E.RoPE, E.YaRN, E.ALiBi, E.KerpleLog, E.KerplePower, E.T5Buckets, E.FIRE, E.CABLE, E.LogDistance, E.CausalOT, E.Bias)
    }


def build_encoding(name, given: dict):
    """Build an encoding from its kebab-case name and the options given (``None`` = absent)."""
    classes = _encoding_classes()
    if name not in classes:
        raise UsageError(f"unknown encoding {name!r}; choose one of {', '.join(classes)}")
    cls = classes[name]
    params = inspect.signature(cls.__init__).parameters
    accepted = {p for p in params if p != "self" and params[p].kind != inspect.Parameter.VAR_KEYWORD}
    present = {k: v for k, v in given.items() if v is not None}
    extra = sorted(set(present) - accepted)
    if extra:
        raise UsageError(f"{name} does not take --{', --'.join(e.replace('_', '-') for e in extra)}")
    missing = [p for p in accepted if params[p].default is inspect.Parameter.empty and p not in present]
    if name == "bias":
        missing = [m for m in missing if m != "expr"] + ([] if "expr" in present else ["expr"])
    if missing:
        raise UsageError(f"{name} needs --{', --'.join(m.replace('_', '-') for m in missing)}")
    if name == "bias":
        import sympy as sp

        d = sp.Symbol("d")
        try:
            expr = sp.sympify(present.pop("expr"), locals={"d": d})
        except (sp.SympifyError, SyntaxError, TypeError) as exc:
            raise UsageError(f"--expr is not a sympy expression: {exc}") from None
        return cls(expr, d, **present)
    return cls(**present)


def _cmd_classify(args):
    from .encodings import classify

    given = {k: getattr(args, k) for k in _ENCODING_OPTIONS}
    enc = build_encoding(args.encoding, given)
    v = classify(enc)
    payload = v.as_dict(window=args.window if v.kind != "undecided" else None)
    lines = [f"{enc!r}: {v.kind.upper()}", f"reason   {v.reason}"]
    if v.rate:
        lines.append(f"rate     {v.rate}")
    if v.kind != "undecided":
        lines.append(f"D_oo(W = {args.window}) = {payload['limit_distant_mass']:.6g}")
    _emit(payload, args.json, lines)


# --- prior, mass ----------------------------------------------------------------------


def _cmd_prior(args):
    from .ot_prior import ot_prior, ot_window_law, ot_window_mass

    prior, info = ot_prior(args.n, args.rho, return_info=True)
    windows = [w for w in (1, 4, 16, 64, 256, 1024) if w <= args.n]
    rows = [{"window": w, "mass": ot_window_mass(w, args.n, args.rho), "law": ot_window_law(w, args.n, args.rho)} for w in windows]
    payload = {"n": args.n, "rho": args.rho, "c": info.c, "log_error_bound": info.log_error_bound, "windows": rows}
    lines = [
        f"constant-score prior of causal OT attention, n = {args.n}, rho = {args.rho}",
        f"(certified log error of the scalings: {info.log_error_bound:.1e})",
        "window   exact mass      window law H_W (Z_q/n)^(1-rho)",
    ]
    lines += [f"{r['window']:>6}   {r['mass']:.6e}   {r['law']:.6e}" for r in rows]
    if args.plot:
        from .plots import plot_ot_prior

        plot_ot_prior(args.n, args.rho).savefig(args.plot, dpi=150)
        payload["plot"] = str(args.plot)
        lines.append(f"plot written to {args.plot}")
    _emit(payload, args.json, lines)


def _cmd_mass(args):
    from .log_distance import distant_mass, window_mass, window_mass_bounds

    m = window_mass(args.window, args.n, args.alpha, offset=args.offset)
    D = distant_mass(args.window, args.n, args.alpha, offset=args.offset)
    lo, hi = window_mass_bounds(args.window, args.n, args.alpha, offset=args.offset)
    payload = {"window": args.window, "n": args.n, "alpha": args.alpha, "offset": args.offset, "window_mass": m, "distant_mass": D, "window_mass_bounds": [lo, hi]}
    lines = [
        f"log-distance prior (d + {args.offset:g})^-{args.alpha:g}, n = {args.n}, W = {args.window}",
        f"window mass   m = {m:.16g}",
        f"distant mass  D = {D:.16g}",
        f"certified     {lo:.16g} <= m <= {hi:.16g}",
    ]
    if args.dps:
        exact = window_mass(args.window, args.n, args.alpha, offset=args.offset, dps=args.dps)
        import mpmath

        digits = mpmath.nstr(exact, args.dps)
        payload["window_mass_digits"] = digits
        lines.append(f"{args.dps} digits  m = {digits}")
    _emit(payload, args.json, lines)


def _cmd_report(args):
    from .report import build_report

    out = build_report(Path(args.out), progress=not args.json)
    if args.json:
        print(json.dumps({"report": str(out)}))
    else:
        print(f"report written to {out}")


def _cmd_checkpoint(args):
    try:
        from .torch import checkpoint_report
    except ImportError as exc:
        raise UsageError(f"the checkpoint command needs the torch extra (pip install 'otprior[torch]'): {exc}") from None
    checkpoint_report(args)


def _cmd_intervene(args):
    try:
        from .torch.train import intervene_command
    except ImportError as exc:
        raise UsageError(f"the intervene command needs the torch extra (pip install 'otprior[torch]'): {exc}") from None
    for path in args.checkpoints:
        if not Path(path).with_suffix(".json").exists():
            raise UsageError(f"{path}: not a reference-model checkpoint (no JSON config beside it)")
    intervene_command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="otprior",
        description="Positional priors of causal attention: dilution, certified window-mass bounds, margins. "
        "Every result is proved in proofs/.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("margin", help="smallest exponent margin keeping distant-mass growth within tol (Theorem 9)",
                       description="Smallest delta >= 0 such that every log-distance exponent alpha >= 1 + delta keeps the "
                       "growth of distant mass D_L(W) between the two lengths within tol.")
    p.add_argument("--window", type=_number, required=True, help="window W: the W nearest keys (d < W)")
    p.add_argument("--lengths", type=_number, nargs=2, required=True, metavar=("L0", "L1"), help="the two context lengths, L0 < L1")
    p.add_argument("--tol", type=float, required=True, help="allowed growth of distant mass, in (0, 1)")
    p.add_argument("--growth", choices=["absolute", "relative"], default="absolute", help="D_L1 - D_L0 (default) or D_L1/D_L0 - 1")
    p.add_argument("--score-bound", type=float, default=0.0, help="bound B on content scores around a constant (Theorem 10)")
    p.add_argument("--offset", type=float, default=1.0, help="offset o of the bias -alpha log(d + o)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_cmd_margin)

    c = sub.add_parser("classify", help="bounded or diluting? (Theorem 11)",
                       description="Classify a positional encoding as bounded (distant attention mass stays away from one) "
                       "or diluting (it tends to one), with the reason, the rate and D_oo(W).")
    c.add_argument("encoding", help="one of: nope, rope, yarn, alibi, kerple-log, kerple-power, t5, fire, cable, log-distance, causal-ot, bias")
    for key, (typ, text) in _ENCODING_OPTIONS.items():
        c.add_argument("--" + key.replace("_", "-"), dest=key, type=typ, default=None, help=text)
    c.add_argument("--window", type=_number, default=64, help="window W for D_oo(W) (default 64)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=_cmd_classify)

    q = sub.add_parser("prior", help="constant-score prior of causal OT attention and its window masses (Theorems 2, 4)")
    q.add_argument("--rho", type=float, required=True, help="balancing strength rho in [0, 1) (0 = causal softmax)")
    q.add_argument("--n", type=_number, required=True, help="query position (context length) n >= 1")
    q.add_argument("--plot", type=Path, help="also draw the prior into this image file")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=_cmd_prior)

    m = sub.add_parser("mass", help="window and distant mass of a log-distance prior, with certified bounds (Theorems 7, 8)")
    m.add_argument("--window", type=_number, required=True, help="window W")
    m.add_argument("--n", type=_number, required=True, help="context length n >= W (1e12 accepted)")
    m.add_argument("--alpha", type=float, required=True, help="exponent alpha > 0")
    m.add_argument("--offset", type=float, default=1.0, help="offset o of the bias -alpha log(d + o)")
    m.add_argument("--dps", type=int, help="also print the window mass to this many digits (mpmath)")
    m.add_argument("--json", action="store_true", help="machine-readable output")
    m.set_defaults(func=_cmd_mass)

    r = sub.add_parser("report", help="the main job: tables and figures on built-in defaults")
    r.add_argument("--out", default="report", help="output folder (created); index.html goes there")
    r.add_argument("--json", action="store_true", help="print the report location as JSON")
    r.set_defaults(func=_cmd_report)

    k = sub.add_parser("checkpoint", help="per-head positional parameters of a checkpoint against the theory (torch extra)")
    k.add_argument("path", type=Path, help=".safetensors, .pt, .pth or .bin state dict")
    k.add_argument("--scheme", help="positional scheme when detection is ambiguous (log-distance, kerple-log, kerple-power, alibi)")
    k.add_argument("--window", type=_number, default=64, help="window W (default 64)")
    k.add_argument("--lengths", type=_number, nargs=2, default=(512, 8192), metavar=("L_TRAIN", "L_EVAL"), help="training and evaluation length")
    k.add_argument("--tol", type=float, default=0.05, help="growth tolerance for the margin (default 0.05)")
    k.add_argument("--plot", type=Path, help="write figures into this folder")
    k.add_argument("--json", action="store_true", help="machine-readable output")
    k.set_defaults(func=_cmd_checkpoint)

    v = sub.add_parser("intervene", help="change only the bias beyond the training length; predicted vs measured loss (torch extra)",
                       description="For reference-model checkpoints with the log-distance bias: set every head's exponent beyond "
                       "the training length to alpha + shift, predict from the prior whether long-context loss rises or falls, "
                       "measure it, and report the agreement.")
    v.add_argument("checkpoints", type=Path, nargs="+", help="reference-model .safetensors files (JSON config beside them)")
    v.add_argument("--eval-length", type=_number, required=True, help="evaluation length (beyond the training length)")
    v.add_argument("--shifts", type=float, nargs="+", default=[-0.5, 0.5], help="exponent changes beyond the training length")
    v.add_argument("--data", type=Path, nargs="+", help="text files to evaluate on (default: the Python standard library)")
    v.add_argument("--max-bytes", type=_number, default=2_000_000, help="bytes of data to read")
    v.add_argument("--batches", type=_number, default=8, help="evaluation batches of 8 sequences")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.set_defaults(func=_cmd_intervene)
    return parser


# library parameter names that the command spells differently
_FLAGS = {"Lrange": "lengths"}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (DomainError, UsageError, PrecisionError, ConvergenceError, FileFormatError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the source wrote
        if isinstance(exc, DomainError):
            flag = _FLAGS.get(exc.parameter, exc.parameter.replace("_", "-"))
            message = f"--{flag}: {message}"
        sys.stderr.write(f"otprior: error: {message}\n")
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
