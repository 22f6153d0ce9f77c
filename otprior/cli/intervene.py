"""``otprior intervene CHECKPOINT ...``: change only the bias beyond the training length (torch extra).

The torch adapter trains nothing here: it loads reference models and measures the loss change
(:func:`otprior.torch.intervene`); this module checks the configs, files and memory first and
prints the agreement of prediction and measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import limits
from .._validation import DomainError, FileFormatError
from ._common import JSON_HELP, MAX_LENGTH, UsageError, input_path, int_type, path_type, real_type, torch_api

#: Sequences per evaluation batch of the intervention, and the float32 tensors of shape
#: (batch, heads, T, T) an attention layer holds at once (content, scores, masked scores,
#: attention weights, and the bias and mask of shape (heads, T, T)): ``intervene``
#: measured 4.8 such tensors of peak resident memory at T = 512 and 1024 on the CPU.
INTERVENE_BATCH = 8
INTERVENE_TENSORS = 6


def _reference_config(path: Path) -> dict:
    """The JSON config beside a reference-model checkpoint, read with a size cap and checked."""
    cfg_path = Path(path).with_suffix(".json")
    if not cfg_path.exists():
        raise UsageError(f"checkpoints: {path}: not a reference-model checkpoint (no JSON config {cfg_path.name} beside it)")
    try:
        raw = limits.read_bytes(cfg_path, "config", limit=limits.current().max_json_bytes)
    except DomainError as exc:
        raise UsageError(f"checkpoints: config {cfg_path}: must be {exc.domain}") from None

    def refuse(token):
        raise ValueError(f"{token} is not JSON")

    try:
        cfg = json.loads(raw.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(f"checkpoints: config {cfg_path}: not JSON in UTF-8 ({exc})") from None
    if not isinstance(cfg, dict):
        raise UsageError(f"checkpoints: config {cfg_path}: not a JSON object")
    for key in ("n_heads", "n_layers", "train_length", "d_model"):
        value = cfg.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limits.current().max_items:
            raise UsageError(f"checkpoints: config {cfg_path}: {key} = {str(value)[:40]!r} is not a count in [1, {limits.current().max_items}]")
    if cfg.get("scheme") != "log-distance":
        raise UsageError(f"checkpoints: {path}: the intervention acts on the log-distance bias (this model's scheme is {str(cfg.get('scheme'))[:40]!r})")
    return cfg


def run(args):
    limits.check_count(len(args.shifts), "shifts", f"{len(args.shifts)} values")
    limits.check_count(len(args.checkpoints), "checkpoints", len(args.checkpoints))
    configs = []
    T = args.eval_length
    for path in args.checkpoints:
        input_path(path, "checkpoints")
        cfg = _reference_config(path)
        if T <= cfg["train_length"]:
            raise UsageError(f"--eval-length: {T} must exceed the training length {cfg['train_length']} of {path}")
        need = INTERVENE_TENSORS * INTERVENE_BATCH * cfg["n_heads"] * T * T * 4
        limits.check_allocation(need, "eval_length", T)
        configs.append(cfg)
    cap = limits.current().max_read_bytes
    if args.max_bytes > cap:
        raise UsageError(f"--max-bytes: {args.max_bytes} is above the cap on bytes read, {cap} (OTPRIOR_MAX_READ_BYTES)")
    available = args.max_bytes
    if args.data:
        limits.check_count(len(args.data), "data", len(args.data))
        total = sum(limits.regular_file(p, "data", limit=cap).st_size for p in args.data)
        if total < 10_000:
            raise UsageError(f"--data: the files hold {total} bytes; the corpus needs at least 10000")
        available = min(total, args.max_bytes)
    held_out = available - int(available * 0.9)
    if held_out < T + 2:
        raise UsageError(f"--eval-length: {T} needs {T + 2} held-out bytes; the data gives {held_out} (the last tenth of --max-bytes)")
    api = torch_api("intervene")
    data = api.byte_corpus([str(p) for p in args.data] if args.data else None, max_bytes=args.max_bytes)[1]
    results = []
    for path in args.checkpoints:
        args._context = str(path)
        try:
            model = api.load_model(path)
        except (DomainError, FileFormatError, MemoryError):
            raise
        except Exception as exc:  # a file is data: whatever the reader trips on is a bad input
            raise UsageError(f"{path}: not a readable reference-model checkpoint ({type(exc).__name__}: {exc})") from None
        rows = api.intervene(model, data, eval_length=T, shifts=tuple(args.shifts), batches=args.batches)
        results.append({"checkpoint": str(path), "train_length": model.cfg.train_length, "rows": rows})
    agree = sum(r["agree"] for res in results for r in res["rows"])
    total = sum(len(res["rows"]) for res in results)
    lines = []
    for res in results:
        lines.append(f"{res['checkpoint']} (trained at {res['train_length']}, evaluated at {T}):")
        for r in res["rows"]:
            low, high = r["interval"]
            lines.append(
                f"  shift {r['shift']:+.2f}: prior mass beyond L {r['prior_far_mass_before']:.4f} -> {r['prior_far_mass_after']:.4f}, "
                f"predicted loss direction {r['predicted_loss_direction']:+d}; loss change {r['loss_change']:+.5f} "
                f"[{low:+.5f}, {high:+.5f}] ({r['level']:.0%} bootstrap over {r['sequences']} sequences): {r['verdict']}"
            )
    lines.append(f"in the predicted direction (interval excludes zero): {agree} of {total}")
    return {"results": results, "agree": agree, "total": total}, lines


def add(command):
    v = command("intervene", run, help="change only the bias beyond the training length; predicted vs measured loss (torch extra)",
                description="For reference-model checkpoints with the log-distance bias: set every head's exponent beyond "
                "the training length to alpha + shift, predict from the prior whether long-context loss rises or falls, "
                "measure it, and report the agreement.")
    v.add_argument("checkpoints", type=path_type, nargs="+", help="reference-model .safetensors files (JSON config beside them)")
    v.add_argument("--eval-length", type=int_type(2, MAX_LENGTH), required=True,
                   help=f"evaluation length, beyond the training length (memory about {INTERVENE_TENSORS * INTERVENE_BATCH * 4} H T^2 bytes)")
    v.add_argument("--shifts", type=real_type(-100.0, 100.0), nargs="+", default=[-0.5, 0.5], help="exponent changes beyond the training length, in [-100, 100]")
    v.add_argument("--data", type=path_type, nargs="+", help="text files to evaluate on (default: the Python standard library)")
    v.add_argument("--max-bytes", type=int_type(10_000, MAX_LENGTH), default=2_000_000, help="bytes of data to read (at least 10000)")
    v.add_argument("--batches", type=int_type(1, 1_000_000), default=8, help="evaluation batches of 8 sequences")
    v.add_argument("--json", action="store_true", help=JSON_HELP)
