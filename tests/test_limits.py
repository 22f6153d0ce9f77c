"""The caps of otprior.limits and the file checks that use them."""

import os
import threading

import pytest

from otprior import limits
from otprior._validation import DomainError


def test_check_allocation_names_the_input_and_the_need():
    limits.check_allocation(1 << 20, "n", 5)
    with pytest.raises(limits.ResourceError) as info:
        limits.check_allocation(3 << 30, "n", 12345)
    assert info.value.parameter == "n" and info.value.value == 12345
    assert "3 GiB" in str(info.value) and "2 GiB" in str(info.value)


def test_caps_override_for_a_block_and_one_thread_only():
    seen = {}

    def other():
        seen["other"] = limits.current().max_items

    with limits.caps(max_items=10):
        limits.check_count(10, "heads")
        with pytest.raises(limits.ResourceError):
            limits.check_count(11, "heads")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen["other"] == limits.Caps().max_items
    limits.check_count(11, "heads")


def test_read_bytes_reads_a_regular_file_within_the_cap(tmp_path):
    path = tmp_path / "data.txt"
    path.write_bytes(b"x" * 100)
    assert limits.read_bytes(path, "data") == b"x" * 100
    with pytest.raises(limits.ResourceError):
        limits.read_bytes(path, "data", limit=99)


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "missing", "link to a device"])
def test_read_bytes_refuses_what_is_not_a_regular_file_without_blocking(tmp_path, kind):
    path = tmp_path / "input"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block until a writer comes
    elif kind == "device":
        path = "/dev/zero"
    elif kind == "folder":
        path.mkdir()
    elif kind == "link to a device":
        os.symlink("/dev/zero", path)
    with pytest.raises(DomainError) as info:
        limits.read_bytes(path, "data")
    assert info.value.parameter == "data"
    assert not isinstance(info.value, limits.ResourceError)


def test_environment_overrides_are_read_at_import(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, OTPRIOR_MAX_ITEMS="7", PYTHONPATH=str(Path(limits.__file__).resolve().parents[1]))
    code = "from otprior import limits; print(limits.current().max_items)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "7"
    env["OTPRIOR_MAX_ITEMS"] = "-3"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "OTPRIOR_MAX_ITEMS" in proc.stderr
