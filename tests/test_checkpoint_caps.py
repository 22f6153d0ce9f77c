"""Checkpoint caps counted on the real quantity, before the work, under an address-space cap.

Each hostile file is small on disk (sparse files, lying headers, hard links, symbolic links):
a zip directory declaring 10M entries, safetensors tensors aliasing the same bytes, shards that
are one file hard-linked, shards whose headers together exceed the header cap, shards and model
files linked out of the model folder, and configs that ask for a model far larger than the
memory cap or than the checkpoint. All run in one child process under ``RLIMIT_AS``; each must
be refused with one line naming what is wrong, in under a second and well under 500 MB of
peak-memory growth. The command line's exit status 2 is checked on one case in the default run
and on every case in a slow test.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")
transformers = pytest.importorskip("transformers")

ADDRESS_SPACE_CAP = 4 << 30  # bytes; importing torch and transformers maps about 1 GB
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BUILD = textwrap.dedent(
    r'''
    import json, os, struct, zipfile

    def sparse(path, size, head=b"", tail=b""):
        with open(path, "wb") as f:
            f.write(head)
            f.truncate(size - len(tail))
            f.seek(size - len(tail))
            f.write(tail)

    def safetensors(path, header, data=b""):
        raw = json.dumps(header).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw + data)

    def build(root):
        p = lambda *a: os.path.join(root, *a)
        cases = {}  # name -> (kind, path)

        # 1. a zip directory declaring 10M entries (zip64 records), 460 MB of directory, in a sparse 520 MB file
        n, cd_size, cd_offset = 10_000_000, 46 * 10_000_000, 64
        size = cd_offset + cd_size + 56 + 20 + 22
        z64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, cd_size, cd_offset)
        loc = struct.pack("<4sLQL", b"PK\x06\x07", 0, cd_offset + cd_size, 1)
        eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
        sparse(p("ten_million.pt"), size, b"PK\x03\x04", z64 + loc + eocd)
        cases["zip64 directory of 10M entries"] = ("load", p("ten_million.pt"))
        # a classic record declaring few entries over 400 MB of directory
        eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 3, 3, 400 << 20, 64, 0)
        sparse(p("big_directory.pt"), (400 << 20) + 200, b"PK\x03\x04", eocd)
        cases["zip directory of 400 MiB"] = ("load", p("big_directory.pt"))
        # a decoy record inside the comment of an honest-looking one (zipfile takes the last signature it finds)
        decoy = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 3, 3, 400 << 20, 64, 0) + b"tail"
        eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0, 0, 0, 64, len(decoy))
        sparse(p("decoy.pt"), (400 << 20) + 200, b"PK\x03\x04", eocd + decoy)
        cases["decoy record in the zip comment"] = ("load", p("decoy.pt"))
        # zip64: the record before the locator declares 3 entries, the one at the locator's offset 10M
        small = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 3, 3, 0, 64)
        loc = struct.pack("<4sLQL", b"PK\x06\x07", 0, 4096, 1)
        eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
        sparse(p("two64.pt"), 8192, b"PK\x03\x04", small + loc + eocd)
        with open(p("two64.pt"), "r+b") as f:
            f.seek(4096)
            f.write(z64)
        cases["zip64 records disagreeing"] = ("load", p("two64.pt"))
        # a real archive of 400 entries (zipfile's own records), under caps allowing 16 * 16 + 64
        with zipfile.ZipFile(p("many.pt"), "w", zipfile.ZIP_STORED) as z:
            for i in range(400):
                z.writestr(f"archive/data/{i}", b"")
        cases["real zip of 400 entries, cap 320"] = ("load-small-cap", p("many.pt"))

        # 2. 2,000 tensors of 4,096 heads each, all over the same 16 KiB
        header = {f"model.layers.{i}.self_attn.alpha": {"dtype": "F32", "shape": [4096], "data_offsets": [0, 16384]} for i in range(2000)}
        safetensors(p("aliased.safetensors"), header, bytes(16384))
        cases["8.2M heads over 16 KiB of aliased bytes"] = ("load", p("aliased.safetensors"))
        header = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}
        safetensors(p("overlap.safetensors"), header, bytes(24))
        cases["two tensors overlapping by 8 bytes"] = ("load", p("overlap.safetensors"))

        # 3. ten shards, one file hard-linked ten times
        os.makedirs(p("linked"))
        safetensors(p("linked", "base"), {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, bytes(4))
        names = [f"model-{i:05d}-of-00010.safetensors" for i in range(1, 11)]
        for name in names:
            os.link(p("linked", "base"), p("linked", name))
        with open(p("linked", "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {f"k{i}": name for i, name in enumerate(names)}}, f)
        cases["ten hard-linked shards"] = ("load", p("linked"))
        # pipeline per-layer files, one file hard-linked twice
        os.makedirs(p("pipeline"))
        with open(p("pipeline", "layer_00-model_00-model_states.pt"), "wb") as f:
            f.write(b"PK\x03\x04")
        os.link(p("pipeline", "layer_00-model_00-model_states.pt"), p("pipeline", "layer_01-model_00-model_states.pt"))
        cases["two hard-linked per-layer files"] = ("load", p("pipeline"))
        # five distinct sparse shards each declaring a 20 MiB header: 100 MiB together, cap 64 MiB
        os.makedirs(p("heavy"))
        names = [f"model-{i:05d}-of-00005.safetensors" for i in range(1, 6)]
        for name in names:
            sparse(p("heavy", name), 21 << 20, struct.pack("<Q", 20 << 20) + b"{")
        with open(p("heavy", "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {f"k{i}": name for i, name in enumerate(names)}}, f)
        cases["five shards of 20 MiB headers"] = ("load", p("heavy"))

        # 4. links out of the model folder, and a text file named .safetensors
        os.makedirs(p("outlink"))
        os.symlink("/etc/passwd", p("outlink", "model-00001-of-00001.safetensors"))
        with open(p("outlink", "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {"w": "model-00001-of-00001.safetensors"}}, f)
        cases["shard linked to /etc/passwd"] = ("load", p("outlink"))
        os.makedirs(p("outmodel"))
        os.symlink("/etc/passwd", p("outmodel", "model.safetensors"))
        cases["model.safetensors linked to /etc/passwd"] = ("load", p("outmodel"))
        os.makedirs(p("outindex"))
        os.symlink("/etc/passwd", p("outindex", "model.safetensors.index.json"))
        cases["shard index linked to /etc/passwd"] = ("load", p("outindex"))
        os.makedirs(p("beside"))
        safetensors(p("beside", "m.safetensors"), {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, bytes(4))
        os.symlink("/etc/passwd", p("beside", "m.json"))
        cases["config beside a file linked to /etc/passwd"] = ("load", p("beside", "m.safetensors"))
        with open(p("text.safetensors"), "wb") as f:
            f.write(b"root:x:0:0:root:/root:/bin/bash\n" * 4)
        cases["text file named .safetensors"] = ("load", p("text.safetensors"))
        return cases
    '''
)

CHILD = BUILD + textwrap.dedent(
    r"""
    import contextlib, io, resource, sys, time
    cap, root, full = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "full"
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import numpy as np
    import otprior.limits
    from otprior import cli
    from otprior.torch import CheckpointError
    from otprior.torch.measurement import load_runnable
    from otprior.torch.intervention import intervene_checkpoints

    def p(*a):
        return os.path.join(root, *a)

    cases = build(root)

    # 2b. distinct bytes but millions of heads: layers x heads of per-head parameters in a sparse file
    def heads_file(name, layers, heads):
        header, off = {}, 0
        for i in range(layers):
            header[f"layers.{i}.pos.alpha_raw"] = {"dtype": "F32", "shape": [heads], "data_offsets": [off, off + 4 * heads]}
            header[f"layers.{i}.pos.alpha_margin"] = {"dtype": "F32", "shape": [1], "data_offsets": [off + 4 * heads, off + 4 * heads + 4]}
            off += 4 * heads + 4
        raw = json.dumps(header).encode()
        sparse(p(name), 8 + len(raw) + off, struct.pack("<Q", len(raw)) + raw)
        return p(name)

    cases["20 x 1024 heads, cap 10,000 items"] = ("load-few-items", heads_file("heads.safetensors", 20, 1024))
    if full:
        cases["2000 x 4096 heads in 32 MiB"] = ("load", heads_file("many_heads.safetensors", 2000, 4096))

    # 5. configs asking for far more than the memory cap, or than their checkpoint holds
    weights = p("weights.safetensors")
    safetensors(weights, {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, bytes(4))
    if full:
        import torch, transformers
        tiny = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, vocab_size=256,
                                        num_attention_heads=4, num_key_value_heads=4)
        torch.manual_seed(0)
        transformers.LlamaForCausalLM(tiny).save_pretrained(p("tiny"))
        weights = p("tiny", "model.safetensors")
        cases["tiny llama (accepted)"] = ("run", p("tiny"))

    def folder(name, config):
        os.makedirs(p(name))
        os.link(weights, p(name, "model.safetensors"))
        with open(p(name, "config.json"), "w") as f:
            json.dump(config, f)
        return p(name)

    small = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 256, "num_attention_heads": 4,
             "num_key_value_heads": 4, "intermediate_size": 128}
    cases["config intermediate_size 3e7"] = ("run", folder("mlp", {**small, "intermediate_size": 3e7}))
    cases["config intermediate_size 30000000"] = ("run", folder("mlp_int", {**small, "intermediate_size": 30_000_000}))
    cases["config num_hidden_layers 10**6"] = ("run", folder("deep", {**small, "num_hidden_layers": 10**6}))
    if full:  # these read the config through transformers and build the model on the meta device
        cases["bare llama config (7B by its defaults)"] = ("run", folder("bare", {"model_type": "llama"}))
        cases["gpt2 config n_positions 3e6"] = (
            "run", folder("positions", {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 256,
                                        "n_positions": 3_000_000}))
    os.makedirs(p("ref"))
    with open(p("ref", "model.json"), "w") as f:
        json.dump({"scheme": "log-distance", "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 10**8, "train_length": 64}, f)
    safetensors(p("ref", "model.safetensors"), {})
    cases["reference model d_ff 1e8 (intervene)"] = ("intervene", p("ref", "model.safetensors"))

    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    results = {}
    for name, (kind, path) in cases.items():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS")
        start = time.perf_counter()
        rc, stderr = None, ""
        try:
            if kind == "load":  # through the command line, in this process
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    rc = cli.main(["checkpoint", path])
                stderr = err.getvalue()
                outcome, message = ("refused" if rc == 2 else f"exit {rc}"), stderr.strip()
            elif kind == "load-small-cap":
                with otprior.limits.caps(max_files=16):
                    from otprior.torch import load_checkpoint
                    load_checkpoint(path)
                outcome, message = "accepted", ""
            elif kind == "load-few-items":
                with otprior.limits.caps(max_items=10_000):
                    from otprior.torch import load_checkpoint
                    load_checkpoint(path)
                outcome, message = "accepted", ""
            elif kind == "run":
                load_runnable(path)
                outcome, message = "accepted", ""
            else:
                intervene_checkpoints([path], np.zeros(1000, dtype=np.uint8), eval_length=128)
                outcome, message = "accepted", ""
        except CheckpointError as exc:
            outcome, message = "refused", str(exc)
        except BaseException as exc:
            outcome, message = "ESCAPED " + type(exc).__name__, str(exc)[:300]
        results[name] = {"outcome": outcome, "message": message, "rc": rc, "stderr": stderr,
                         "seconds": time.perf_counter() - start, "peak_growth_kib": status("VmHWM") - before}
    print(json.dumps(results))
    """
)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    return env


def _run_child(root, mode):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ADDRESS_SPACE_CAP), str(root), mode],
                          capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    return _run_child(tmp_path_factory.mktemp("caps"), "quick")


QUICK = [
    ("zip64 directory of 10M entries", "the zip directory declares 10000000 entries, above the cap of 65600"),
    ("zip directory of 400 MiB", "the zip directory declares 419430400 bytes"),
    ("decoy record in the zip comment", "the zip directory declares 419430400 bytes"),
    ("zip64 records disagreeing", "the zip directory declares 10000000 entries"),
    ("real zip of 400 entries, cap 320", "declares 400 entries, above the cap of 320"),
    ("8.2M heads over 16 KiB of aliased bytes", "their bytes overlap"),
    ("two tensors overlapping by 8 bytes", "entries 'a' and 'b': their bytes overlap"),
    ("ten hard-linked shards", "the same file as shard model-00001-of-00010.safetensors (a hard link or duplicate)"),
    ("two hard-linked per-layer files", "the same file as shard layer_00-model_00-model_states.pt"),
    ("five shards of 20 MiB headers", "exceed the cap of 67108864 bytes (OTPRIOR_MAX_HEADER_BYTES, counted over all shards)"),
    ("shard linked to /etc/passwd", "model-00001-of-00001.safetensors: the file named by the shard index is a link out of the model folder"),
    ("model.safetensors linked to /etc/passwd", "model.safetensors: the model file is a link out of the model folder"),
    ("shard index linked to /etc/passwd", "the shard index is a link out of the model folder"),
    ("config beside a file linked to /etc/passwd", "m.json: the config is a link out of the model folder"),
    ("text file named .safetensors", "its first 8 bytes are no header length that fits its 128 bytes"),
    ("20 x 1024 heads, cap 10,000 items", "declare more than 10000 rows together"),
    ("config intermediate_size 3e7", "intermediate_size = 30000000"),
    ("config intermediate_size 30000000", "intermediate_size = 30000000 (hidden_size=64"),
    ("config num_hidden_layers 10**6", "num_hidden_layers = 1000000, above the 1024"),
    ("reference model d_ff 1e8 (intervene)", "d_ff = 100000000"),
]
FULL = [
    ("2000 x 4096 heads in 32 MiB", "declare more than 1000000 rows together"),
    ("bare llama config (7B by its defaults)", "intermediate_size = 11008"),
    ("gpt2 config n_positions 3e6", "n_positions = 3000000"),
]


def _check_outcomes(outcomes, expected):
    # the first 8 bytes of /etc/passwd, read as a length, never reach a message
    passwd_length = str(int.from_bytes(b"root:x:0", "little"))
    for case, pattern in expected:
        r = outcomes[case]
        assert r["outcome"] == "refused", (case, r)
        assert pattern in r["message"], (case, r["message"])
        assert "\n" not in r["message"] and len(r["message"]) < 600, r["message"]
        assert passwd_length not in r["message"] and "root:" not in r["message"], (case, r["message"])
        if r["rc"] is not None:  # through the command line: exit 2, one line on stderr
            assert r["rc"] == 2 and len(r["stderr"].strip().splitlines()) == 1, (case, r)
    for name, r in outcomes.items():
        assert r["seconds"] < 5.0, (name, r["seconds"])  # a meta-device build of a config is the slowest, about 1 s
        assert r["peak_growth_kib"] < 500 * 1024, (name, r["peak_growth_kib"])


def test_each_cap_bypass_is_refused_quickly_naming_what_is_wrong(outcomes):
    _check_outcomes(outcomes, QUICK)
    assert len(outcomes) == len(QUICK)


@pytest.mark.slow
def test_configs_read_through_transformers_are_refused_and_an_honest_model_passes(tmp_path):
    outcomes = _run_child(tmp_path, "full")
    _check_outcomes(outcomes, QUICK + FULL)
    assert outcomes["tiny llama (accepted)"]["outcome"] == "accepted", outcomes["tiny llama (accepted)"]


FAMILIES = {
    "llama": lambda: transformers.LlamaConfig(hidden_size=96, intermediate_size=200, num_hidden_layers=3, vocab_size=300,
                                              num_attention_heads=6, num_key_value_heads=2),
    "gpt2": lambda: transformers.GPT2Config(n_embd=96, n_layer=3, n_head=6, vocab_size=300, n_positions=64),
    "mixtral": lambda: transformers.MixtralConfig(hidden_size=64, intermediate_size=100, num_hidden_layers=2, vocab_size=300,
                                                  num_attention_heads=4, num_key_value_heads=2, num_local_experts=4),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=2, vocab_size=300,
                                                   num_attention_heads=4),
    "gemma": lambda: transformers.GemmaConfig(hidden_size=64, intermediate_size=100, num_hidden_layers=2, vocab_size=300,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=32),
    "falcon": lambda: transformers.FalconConfig(hidden_size=64, num_hidden_layers=2, vocab_size=300, num_attention_heads=4),
    "opt": lambda: transformers.OPTConfig(hidden_size=64, ffn_dim=256, num_hidden_layers=2, vocab_size=300, num_attention_heads=4,
                                          word_embed_proj_dim=64, max_position_embeddings=62),
}
LEARNED_POSITIONS = {"gpt2": 64, "opt": 64}  # rows of the position table, which the formula leaves to the meta-device count


@pytest.mark.parametrize("family", [f if f in ("llama", "gpt2") else pytest.param(f, marks=pytest.mark.slow) for f in FAMILIES])
def test_the_config_estimate_bounds_transformers_own_parameter_count(family):
    """The estimate is an upper bound of the parameters transformers builds (counted on the meta
    device, an independent route) and within a factor 2 of it."""
    import torch

    from otprior.torch._config_size import estimate_parameters

    config = FAMILIES[family]()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    exact = sum(t.numel() for t in model.parameters())
    width = getattr(config, "hidden_size", 0)
    estimate = estimate_parameters(config)[0] + LEARNED_POSITIONS.get(family, 0) * width
    assert exact <= estimate <= 2 * exact, (exact, estimate)


def test_sub_configs_are_estimated_and_capped_too():
    from otprior.torch._config_size import estimate_parameters

    text = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 256, "num_attention_heads": 4}
    flat = estimate_parameters(text)[0]
    assert estimate_parameters({"model_type": "x", "text_config": text, "vision_config": text})[0] == 2 * flat
    count, field, fields = estimate_parameters({"text_config": {**text, "intermediate_size": 10**9}})
    assert field == "text_config.intermediate_size" and fields[field] == 10**9 and count > 10**11
    with pytest.raises(ValueError, match=r"num_hidden_layers = 1000000, above the 1024"):
        estimate_parameters({"text_config": {**text, "num_hidden_layers": 10**6}})
    for bad in (float("inf"), -1):
        with pytest.raises(ValueError, match="hidden_size"):
            estimate_parameters({**text, "hidden_size": bad})


CLI_CHILD = BUILD + textwrap.dedent(
    r'''
    import resource, subprocess, sys, time
    cap, root = int(sys.argv[1]), sys.argv[2]
    out = {}
    for name, (kind, path) in build(root).items():
        if kind != "load":
            continue
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "otprior", "checkpoint", path], capture_output=True, text=True, timeout=60,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
        usage = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        out[name] = {"rc": proc.returncode, "stderr": proc.stderr, "seconds": time.perf_counter() - start, "maxrss_kib": usage}
    print(json.dumps(out))
    '''
)


@pytest.mark.slow
def test_cli_exits_2_with_one_line_on_every_hostile_checkpoint(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CLI_CHILD, str(ADDRESS_SPACE_CAP), str(tmp_path)], capture_output=True, text=True,
                          timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == 14
    for name, r in results.items():
        assert r["rc"] == 2, (name, r)
        assert len(r["stderr"].strip().splitlines()) == 1, (name, r["stderr"])
        assert r["seconds"] < 30, (name, r["seconds"])
        assert r["maxrss_kib"] < 500 * 1024, (name, r["maxrss_kib"])  # the largest child so far, torch's import included


def test_links_inside_the_folder_and_into_a_hub_cache_blob_are_followed(tmp_path):
    """A link out of the model folder is refused, but one inside it, or a Hugging Face cache
    snapshot's link into its own ``blobs`` folder, is read."""
    import struct

    from otprior.torch._formats import CheckpointError, open_source

    raw = json.dumps({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    payload = struct.pack("<Q", len(raw)) + raw + bytes(4)
    snapshot = tmp_path / "models--org--name" / "snapshots" / "abc"
    (tmp_path / "models--org--name" / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (tmp_path / "models--org--name" / "blobs" / "f00d").write_bytes(payload)
    os.symlink("../../blobs/f00d", snapshot / "model.safetensors")
    assert open_source(snapshot)[0].shape("w") == (1,)
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "real.bin.safetensors").write_bytes(payload)
    os.symlink("real.bin.safetensors", inside / "model.safetensors")
    assert open_source(inside)[0].shape("w") == (1,)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink("../inside/real.bin.safetensors", outside / "model.safetensors")
    with pytest.raises(CheckpointError, match="link out of the model folder"):
        open_source(outside)
    # a snapshot's link to another repository's blobs is out
    os.symlink(f"{inside}/real.bin.safetensors", snapshot / "other.safetensors")
    (snapshot / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="link out of the model folder"):
        open_source(snapshot)


@pytest.mark.slow
def test_cli_measure_refuses_a_config_far_larger_than_its_checkpoint(tmp_path):
    import resource

    import torch

    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, vocab_size=256,
                                      num_attention_heads=4, num_key_value_heads=4)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path / "m")
    raw = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps({**raw, "intermediate_size": 30_000_000}))
    (tmp_path / "text.txt").write_text("positional priors " * 200)
    argv = [sys.executable, "-m", "otprior", "checkpoint", str(tmp_path / "m"), "--measure", "--text", str(tmp_path / "text.txt"),
            "--lengths", "16", "32"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_env(),
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP)))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "intermediate_size = 30000000" in lines[0] and "refused before building it" in lines[0], proc.stderr


def test_reference_model_config_is_sized_before_it_is_built(tmp_path):
    # load_model (intervene, experiments) checks the config's size before building the model
    from otprior.torch._formats import CheckpointError
    from otprior.torch.model import ModelConfig, ReferenceModel, load_model, save_model

    save_model(ReferenceModel(ModelConfig()), tmp_path / "m.safetensors")
    assert load_model(tmp_path / "m.safetensors") is not None
    raw = json.loads((tmp_path / "m.json").read_text())
    raw["d_ff"] = 10**9
    (tmp_path / "m.json").write_text(json.dumps(raw))
    with pytest.raises(CheckpointError, match="d_ff"):
        load_model(tmp_path / "m.safetensors")
