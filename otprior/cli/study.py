"""``otprior study PLAN``: run a preregistered study plan and decide its hypotheses (torch extra).

The library runs and decides (:func:`otprior.study.run_study`); this module prints the summary
and the progress lines.
"""

from __future__ import annotations

import json
import os

from .._output import check_folder, write_stderr_line
from ._common import JSON_HELP, input_path, int_type, path_type, printable, real_type


def run(args):
    from .. import study

    input_path(args.plan, "plan")
    kw = {"resume": not args.fresh, "dry_run": args.dry_run, "max_runs": args.max_runs, "time_budget_s": args.budget,
          "spread": args.spread, "time_steps": args.time_steps}
    out = None if args.out is None else str(args.out)
    if args.out is not None:  # a dry run checks the folder too (check_folder creates nothing)
        out = str(check_folder(args.out, force=True, name="out"))
    result = study.run_study(str(args.plan), out, log=(lambda *_: None) if args.json else _progress_line, **kw)
    if args.spread and os.environ.get("RANK", "0") not in ("", "0"):
        return result, []  # under torchrun, process 0 prints the summary
    lines = [f"plan {result['plan_sha256'][:12]}: {result['runs']} runs"]
    if args.dry_run:
        mem = result.get("memory", {})
        lines.append(f"dry run: nothing trained; memory estimate {mem}")
        if not result.get("device_here", True):
            lines.append(f"device: {result['device']} is not on this machine; every other check passed (the plan runs "
                         "where that device is)")
        lines.append(f"data: {result['data_bytes_available']} bytes in {result['data_files']} files; optimiser reach "
                     f"{result['optimiser_reach']:.3g} (move of one raw parameter at steps of typical size)")
        est = result.get("time_estimate")
        if est:
            total = est["total_seconds"]
            lines.append(f"time estimate here ({est['threads']} thread(s) per process): {total / 3600:.2f} h in one "
                         f"process, {total / 7200:.2f} h spread over two")
        lines.append("plan as validated (every default filled in):")
        lines.append(json.dumps(result["plan"], indent=1))
        return result, lines
    lines.append(f"done: {result['done']} of {result['runs']}")
    for d in result.get("decisions", []):
        interval = d.get("interval")
        shown = "" if not interval else f" [{interval[0]:+.4g}, {interval[1]:+.4g}]"
        lines.append(f"  {d['id']}: {d['outcome']}{shown}  {d['claim']}")
    return result, lines


def _progress_line(*parts):
    write_stderr_line(printable(" ".join(str(p) for p in parts)))


def add(command):
    s = command("study", run, help="run a preregistered study plan and decide its hypotheses (torch extra)",
                description="Run every training and evaluation a plan file states, write results after each run "
                "(with the plan's SHA-256), resume where a previous call stopped, and decide each hypothesis by its "
                "preregistered rule: supported / not supported / not run, with its interval.")
    s.add_argument("plan", type=path_type, help="the plan file (.toml or .json), e.g. plans/cpu-130k.toml")
    s.add_argument("--out", type=path_type, help="results folder (default study-<plan name>); an existing one is resumed")
    s.add_argument("--fresh", action="store_true", help="refuse a results folder that already holds runs instead of resuming")
    s.add_argument("--dry-run", action="store_true", help="validate the plan and list its runs; train nothing")
    s.add_argument("--max-runs", type=int_type(1, 1_000_000), help="stop after this many new runs")
    s.add_argument("--budget", type=real_type(1.0, 1e7), help="start no new run after this many seconds; a run in progress "
                   "stops at its next state save (rerun the same command to resume)")
    s.add_argument("--time-steps", type=int_type(1, 1000), help="with --dry-run: time this many training steps of "
                   "every arm and length here and extrapolate the study's time")
    s.add_argument("--spread", action="store_true", help="under torchrun: deal whole runs out to the processes instead of "
                   "data-parallel training (e.g. torchrun --standalone --nproc_per_node 2 -m otprior study PLAN --spread)")
    s.add_argument("--json", action="store_true", help=JSON_HELP)

