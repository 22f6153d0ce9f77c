"""Hostile checkpoint files: every one refused, quickly, in bounded memory, with no payload run.

All cases run in one child process under an address-space cap (``resource.setrlimit``), which
reports, per case, the outcome, the message, the time and the growth of its peak resident
memory. Malicious pickles: 20 payloads, each as a bare pickle, inside a torch zip archive
and as a folder's ``pytorch_model.bin``.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

ADDRESS_SPACE_CAP = 4 << 30  # bytes; importing torch maps about 0.7 GB

CHILD = textwrap.dedent(
    r'''
    import io, json, os, pickle, pickletools, resource, struct, sys, time, zipfile
    cap, root, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import torch
    from safetensors.torch import save_file
    from otprior.torch import load_checkpoint, CheckpointError

    def p(name):
        return os.path.join(root, name)

    cases = {}

    # ---- malicious pickles: opcodes written by hand, so no payload object exists here
    def glob(module, name):
        return b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def call(module, name, *args):
        body = b"".join(b"X" + struct.pack("<I", len(a.encode())) + a.encode() for a in args)
        return glob(module, name) + b"(" + body + b"tR"

    touch = f"touch {marker}"
    payloads = {
        "os.system": call("os", "system", touch),
        "posix.system": call("posix", "system", touch),
        "subprocess.call": glob("subprocess", "call") + b"((X\x05\x00\x00\x00touchX" + struct.pack("<I", len(marker)) + marker.encode() + b"ltR",
        "subprocess.Popen": glob("subprocess", "Popen") + b"((X\x05\x00\x00\x00touchX" + struct.pack("<I", len(marker)) + marker.encode() + b"ltR",
        "builtins.eval": call("builtins", "eval", f"__import__('os').system({touch!r})"),
        "builtins.exec": call("builtins", "exec", f"import os; os.system({touch!r})"),
        "builtins.__import__": call("builtins", "__import__", "os"),
        "builtins.getattr": glob("builtins", "getattr") + b"(" + call("builtins", "__import__", "os") + b"X\x06\x00\x00\x00systemtR",
        "builtins.open": call("builtins", "open", marker, "w"),
        "io.open": call("io", "open", marker, "w"),
        "pty.spawn": call("pty", "spawn", "true"),
        "shutil.rmtree": call("shutil", "rmtree", os.path.join(root, "never")),
        "importlib.import_module": call("importlib", "import_module", "os"),
        "runpy.run_path": call("runpy", "run_path", marker),
        "pickle.loads": glob("pickle", "loads") + b"(C\x04\x00\x00\x00junktR",
        "torch.load": call("torch", "load", marker),
        "torch.storage._load_from_bytes": glob("torch.storage", "_load_from_bytes") + b"(C\x04\x00\x00\x00junktR",
        "torch._utils._rebuild_tensor_v2 on a fake storage": glob("torch._utils", "_rebuild_tensor_v2") + b"(" + call("os", "system", touch) + b"K\x00(J\x00\x00\x00\x04tr\x00tR",
        "INST opcode": b"(X" + struct.pack("<I", len(touch)) + touch.encode() + b"ios\nsystem\n",
        "OBJ with BUILD": glob("collections", "OrderedDict") + b")R}X\x06\x00\x00\x00updateX\x01\x00\x00\x00xsb" + call("os", "system", touch),
    }
    for name, ops in payloads.items():
        data = b"\x80\x02}X\x05\x00\x00\x00layerq\x00" + ops + b"s."
        slug = "".join(ch if ch.isalnum() else "_" for ch in name)
        with open(p(f"bare_{slug}.pt"), "wb") as f:
            f.write(data)
        cases[f"bare pickle: {name}"] = p(f"bare_{slug}.pt")
        torch.save({"layers.0.pos.alpha_raw": torch.zeros(2)}, p("base.pt"))
        with zipfile.ZipFile(p("base.pt")) as src, zipfile.ZipFile(p(f"zip_{slug}.pt"), "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                dst.writestr(info, data if info.filename.endswith("data.pkl") else src.read(info))
        cases[f"torch archive: {name}"] = p(f"zip_{slug}.pt")
        os.makedirs(p(f"folder_{slug}"))
        os.link(p(f"zip_{slug}.pt"), p(f"folder_{slug}/pytorch_model.bin"))
        cases[f"model folder: {name}"] = p(f"folder_{slug}")

    # ---- memory bombs
    t = torch.zeros(1).as_strided((1 << 26,), (0,))
    torch.save({"layers.0.pos.alpha_raw": t}, p("zero_stride.pt"))
    cases["zero-stride view of 2^26 elements"] = p("zero_stride.pt")
    header = json.dumps({"layers.0.pos.alpha_raw": {"dtype": "F32", "shape": [1 << 28], "data_offsets": [0, 1 << 30]}}).encode()
    with open(p("sparse.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + (1 << 30))  # a sparse file: 1 GiB declared, nothing on disk
    cases["sparse safetensors with a 1 GiB positional tensor"] = p("sparse.safetensors")
    big = pickle.dumps({"layers.0.pos.alpha_raw": b"\0" * (1 << 20)})
    with zipfile.ZipFile(p("base.pt")) as src, zipfile.ZipFile(p("deflated.pt"), "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                info.compress_type = zipfile.ZIP_DEFLATED
                data = data + b"\0" * (64 << 20)
            dst.writestr(info, data, compress_type=info.compress_type)
    cases["compressed data.pkl expanding to 64 MiB"] = p("deflated.pt")
    save_file({"transformer.h.0.self_attention.query_key_value.weight": torch.zeros(24, 8)}, p("m.safetensors"))
    for name, cfg in {
        "config n_head = 1e9": {"model_type": "bloom", "n_head": 1e9, "n_layer": 1},
        "config n_head = 10**9": {"model_type": "bloom", "n_head": 10**9, "n_layer": 1},
        "config n_layer = 10**9": {"model_type": "bloom", "n_head": 2, "n_layer": 10**9},
        "config n_head as a string": {"model_type": "bloom", "n_head": "8"},
        "config n_head true": {"model_type": "bloom", "n_head": True},
        "config alibi as a string": {"model_type": "falcon", "alibi": "yes", "num_attention_heads": 2},
    }.items():
        d = p(name.replace(" ", "_").replace("*", "").replace("=", ""))
        os.makedirs(d)
        os.link(p("m.safetensors"), os.path.join(d, "model.safetensors"))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        cases[name] = d
    os.makedirs(p("devzero"))
    os.link(p("m.safetensors"), p("devzero/model.safetensors"))
    os.symlink("/dev/zero", p("devzero/config.json"))
    cases["config symlinked to /dev/zero"] = p("devzero")
    os.makedirs(p("latin1"))
    os.link(p("m.safetensors"), p("latin1/model.safetensors"))
    with open(p("latin1/config.json"), "wb") as f:
        f.write('{"model_type": "bloom", "name": "caf\xe9"}'.encode("latin-1"))
    cases["config not UTF-8"] = p("latin1")
    os.makedirs(p("nan"))
    os.link(p("m.safetensors"), p("nan/model.safetensors"))
    with open(p("nan/config.json"), "w") as f:
        f.write('{"model_type": "bloom", "n_head": NaN}')
    cases["config with NaN"] = p("nan")
    os.makedirs(p("hugecfg"))
    os.link(p("m.safetensors"), p("hugecfg/model.safetensors"))
    with open(p("hugecfg/config.json"), "wb") as f:
        f.truncate(1 << 30)
    cases["config of 1 GiB (sparse)"] = p("hugecfg")

    # ---- FIFOs and other non-files
    os.mkfifo(p("fifo.pt"))
    cases["FIFO named .pt"] = p("fifo.pt")
    os.mkfifo(p("fifo.safetensors"))
    cases["FIFO named .safetensors"] = p("fifo.safetensors")
    os.makedirs(p("fifocfg"))
    os.link(p("m.safetensors"), p("fifocfg/model.safetensors"))
    os.mkfifo(p("fifocfg/config.json"))
    cases["FIFO config.json"] = p("fifocfg")
    os.makedirs(p("fifoshard"))
    with open(p("fifoshard/model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"a": "shard.safetensors"}}, f)
    os.mkfifo(p("fifoshard/shard.safetensors"))
    cases["FIFO shard"] = p("fifoshard")
    os.makedirs(p("escape"))
    with open(p("escape/model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"a": "../m.safetensors"}}, f)
    cases["shard index pointing outside the folder"] = p("escape")
    cases["character device"] = "/dev/zero"

    # ---- malformed files
    with open(p("text.pt"), "w") as f:
        f.write("this is a text file, not a checkpoint\n")
    cases["text file named .pt"] = p("text.pt")
    for name, raw in {
        "empty safetensors": b"",
        "safetensors header length 2^63": struct.pack("<Q", 1 << 63) + b"{}",
        "safetensors header not JSON": struct.pack("<Q", 4) + b"\xff\xfe{}",
        "safetensors header a list": struct.pack("<Q", 2) + b"[]",
        "safetensors negative shape": (lambda h: struct.pack("<Q", len(h)) + h)(b'{"a.slopes": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}') + b"\0" * 4,
        "safetensors offsets outside": (lambda h: struct.pack("<Q", len(h)) + h)(b'{"a.slopes": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4000]}}'),
        "safetensors size mismatch": (lambda h: struct.pack("<Q", len(h)) + h)(b'{"a.slopes": {"dtype": "F32", "shape": [1000000000, 1000000000], "data_offsets": [0, 4]}}') + b"\0" * 4,
        "safetensors unknown dtype": (lambda h: struct.pack("<Q", len(h)) + h)(b'{"a.slopes": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}}') + b"\0" * 4,
        "safetensors integer slopes": (lambda h: struct.pack("<Q", len(h)) + h)(b'{"a.slopes": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}') + b"\0" * 4,
        "safetensors NaN slope": (lambda h: struct.pack("<Q", len(h)) + h)(b'{"a.slopes": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}') + struct.pack("<f", float("nan")),
    }.items():
        path = p(name.replace(" ", "_").replace("^", "") + ".safetensors")
        with open(path, "wb") as f:
            f.write(raw)
        cases[name] = path
    sparse_t = torch.sparse_coo_tensor(torch.zeros(1, 1, dtype=torch.long), torch.ones(1), (1 << 40,))
    torch.save({"layers.0.pos.alpha_raw": sparse_t}, p("sparse_tensor.pt"))
    cases["sparse tensor of 2^40 elements"] = p("sparse_tensor.pt")
    torch.save({"layers.0.pos.alpha_raw": torch.zeros(2, dtype=torch.complex64)}, p("complex.pt"))
    cases["complex tensor"] = p("complex.pt")
    param = torch.nn.Parameter(torch.zeros(2))
    param.__dict__["detach"] = "replaced"
    param.__dict__["to"] = "replaced"
    torch.save({"layers.0.pos.alpha_raw": param, "layers.0.pos.alpha_margin": torch.zeros(1)}, p("detach.pt"))
    cases["Parameter whose state overrides .detach (read, safely)"] = p("detach.pt")

    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak resident set size (VmHWM) to the current one

    results = {}
    base = status("VmRSS")
    for name, path in cases.items():
        reset_peak()
        before = status("VmRSS")
        start = time.perf_counter()
        try:
            ck = load_checkpoint(path)
            outcome, message = "read", f"{len(ck.heads)} heads"
        except (CheckpointError, ValueError) as exc:
            outcome, message = type(exc).__name__, str(exc)
        except BaseException as exc:
            outcome, message = "ESCAPED " + type(exc).__name__, str(exc)[:300]
        seconds = time.perf_counter() - start
        results[name] = {"outcome": outcome, "message": message, "seconds": seconds, "peak_growth_kib": status("VmHWM") - before}
    print(json.dumps({"results": results, "baseline_kib": base, "executed": os.path.exists(marker)}))
    '''
)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    marker = root / "executed"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(ADDRESS_SPACE_CAP), str(root), str(marker)], capture_output=True, text=True, timeout=240, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not marker.exists() and not data["executed"]
    return data


def test_every_malicious_pickle_is_refused_and_says_so(outcomes):
    pickles = {k: v for k, v in outcomes["results"].items() if k.startswith(("bare pickle", "torch archive", "model folder"))}
    assert len(pickles) == 60
    for name, r in pickles.items():
        assert r["outcome"] == "CheckpointError", (name, r)
        assert "refused" in r["message"] and "nothing in it was executed" in r["message"], (name, r["message"])
        assert "weights_only=False" not in r["message"] and "trust" not in r["message"].lower(), (name, r["message"])


def test_every_hostile_file_is_refused_quickly_in_bounded_memory(outcomes):
    results = outcomes["results"]
    for name, r in results.items():
        if name.startswith("Parameter whose state"):
            assert r["outcome"] == "read", r  # read through torch.Tensor's own methods, not the stored ones
            continue
        assert r["outcome"] in ("CheckpointError", "DomainError"), (name, r)
        assert "\n" not in r["message"] and len(r["message"]) < 600, (name, r["message"])
        assert r["seconds"] < 1.0, (name, r["seconds"])
    # largest growth of the peak resident memory over all cases, after importing torch
    largest = max(r["peak_growth_kib"] for r in results.values())
    assert largest < 256 * 1024, largest
    print(f"\n{len(results)} hostile files, largest peak-memory growth {largest / 1024:.1f} MiB (address space capped at {ADDRESS_SPACE_CAP >> 30} GiB)")


@pytest.mark.parametrize(
    "case, pattern",
    [
        ("zero-stride view of 2^26 elements", "view of 67108864 elements over a storage of 1"),
        ("sparse safetensors with a 1 GiB positional tensor", "OTPRIOR_MAX_TENSOR_BYTES"),
        ("compressed data.pkl expanding to 64 MiB", "compressed"),
        ("config symlinked to /dev/zero", "link out of the model folder"),
        ("FIFO named .pt", "not a regular file"),
        ("config n_head = 1e9", "n_head = 1000000000.0 is not a positive integer"),
        ("config n_head = 10**9", "do not divide the hidden size 8"),
        ("config n_layer = 10**9", "n_layer = 1000000000 but the tensors hold 1 layers"),
        ("config not UTF-8", "not UTF-8"),
        ("text file named .pt", "neither a zip archive nor a pickle"),
        ("sparse tensor of 2^40 elements", "layout"),
        ("complex tensor", "complex64"),
        ("shard index pointing outside the folder", "not a file inside the folder"),
        ("config of 1 GiB (sparse)", "above the cap"),
    ],
)
def test_the_message_names_the_problem(outcomes, case, pattern):
    assert pattern in outcomes["results"][case]["message"]
