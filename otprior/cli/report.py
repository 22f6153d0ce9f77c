"""``otprior report``: the tables and figures on built-in defaults, into one folder (:func:`otprior.report.build_report`)."""

from __future__ import annotations

from pathlib import Path

from .._output import check_folder
from ._common import JSON_HELP, path_type


def run(args):
    from ..report import build_report

    check_folder(args.out, force=args.force, name="out")  # before a minute of work
    out = build_report(args.out, progress=not args.json, force=args.force)
    return {"report": str(out)}, [f"report written to {out}"]


def add(command):
    r = command("report", run, help="the main job: tables and figures on built-in defaults",
                description="Compute the tables (log-distance window masses with certified brackets, margins, the "
                "classification of encodings, the dilution of causal OT attention, the limits in rho) and draw the "
                "figures, on built-in defaults, into one folder: index.html to read, tables.json and parameters.json "
                "(versions, commit, every parameter) to reuse, and each figure as PNG and PDF; tens of seconds.")
    r.add_argument("--out", type=path_type, default=Path("report"), help="output folder, new or empty (default: report); index.html goes there")
    r.add_argument("--force", action="store_true", help="write into an existing folder that holds files (files of the report's names are replaced)")
    r.add_argument("--json", action="store_true", help=JSON_HELP)
