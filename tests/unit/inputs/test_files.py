"""inputs.files: the one reading layer (regular files only, byte caps, gzip, one-line OS errors)."""

from __future__ import annotations

import gzip
import os
import threading

import pytest

from oomguard.errors import InputError
from oomguard.inputs import files


def _drain(stream, size: int = 1 << 20) -> bytes:
    out = []
    while True:
        chunk = stream.read(size)
        if not chunk:
            return b"".join(out)
        out.append(chunk)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused_before_reading(device, tmp_path):
    if not os.path.exists(device):
        pytest.skip(f"{device} absent")
    link = tmp_path / "config.json"
    link.symlink_to(device)
    for path in (device, str(link)):
        with pytest.raises(InputError, match="character device, expected a regular file"):
            files.read_bytes(path, limit=1 << 20)
        with pytest.raises(InputError, match="character device"):
            files.open_stream(path)


def test_directory_and_symlink_to_directory(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "d")
    for p in (tmp_path / "d", tmp_path / "l"):
        with pytest.raises(InputError, match="a directory, expected a regular file"):
            files.read_text(p, limit=100)


def test_fifo_without_writer_does_not_block(tmp_path):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    result: list[BaseException] = []

    def attempt():
        try:
            files.open_stream(str(fifo))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            result.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():  # unblock the thread before failing
        os.close(os.open(fifo, os.O_RDWR))  # O_RDWR never blocks on Linux and releases the reader
        pytest.fail("open_stream blocked on a FIFO with no writer")
    assert result and isinstance(result[0], InputError)
    assert "FIFO" in str(result[0]) and "stdin" in str(result[0])


def test_named_pipe_the_user_passed_is_read(tmp_path):
    r, w = os.pipe()
    os.write(w, b"line one\nline two\n")
    os.close(w)
    try:
        stream = files.open_stream(f"/dev/fd/{r}")
        assert _drain(stream) == b"line one\nline two\n"
        stream.close()
    finally:
        try:
            os.close(r)
        except OSError:
            pass


def test_read_is_bounded_whatever_the_size(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b"x" * 2000)
    with pytest.raises(InputError, match="larger than 1000 bytes"):
        files.read_bytes(p, limit=1000)
    assert files.read_bytes(p, limit=2000) == b"x" * 2000
    with pytest.raises(InputError, match=r"not a config \(.*\)"):
        files.read_bytes(p, limit=1000, too_large="not a config ({size})")


def test_proc_file_with_zero_st_size_is_read_and_capped():
    assert os.stat("/proc/self/status").st_size == 0
    text = files.read_text("/proc/self/status", limit=1 << 20)
    assert "Name:" in text
    with pytest.raises(InputError, match="larger than 10 bytes"):
        files.read_text("/proc/self/status", limit=10)


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda p: p.parent / ("x" * 5000), "file name too long"),
        (lambda p: p / "missing.json", "no such file"),
        (lambda p: p / "a\x00b", "invalid file name"),
    ],
)
def test_os_errors_become_one_line(tmp_path, make, needle):
    path = make(tmp_path)
    with pytest.raises(InputError) as e:
        files.read_bytes(path, limit=100, what="config")
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and len(msg) < 600


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_permission_denied(tmp_path):
    p = tmp_path / "secret.json"
    p.write_text("{}")
    p.chmod(0)
    with pytest.raises(InputError, match="permission denied"):
        files.read_bytes(p, limit=100)


def test_gzip_members_and_padding(tmp_path):
    one = gzip.compress(b"INFO a\n")
    p = tmp_path / "two.log.gz"
    p.write_bytes(one + gzip.compress(b"ERROR b\n") + b"\x00" * 512)
    s = files.open_stream(str(p))
    assert files.is_gzip(s)
    assert _drain(s) == b"INFO a\nERROR b\n"


def test_gzip_trailing_garbage_is_an_error_not_an_empty_log(tmp_path):
    p = tmp_path / "vllm.log.gz"
    body = gzip.compress(b"ERROR torch.OutOfMemoryError: CUDA out of memory\n")
    p.write_bytes(body + b"garbage!")
    s = files.open_stream(str(p))
    with pytest.raises(InputError) as e:
        _drain(s)
    assert f"at byte {len(body)}" in str(e.value) and "not gzip" in str(e.value)


def test_gzip_truncated(tmp_path):
    p = tmp_path / "cut.gz"
    p.write_bytes(gzip.compress(b"INFO x\n" * 1000)[:40])
    with pytest.raises(InputError, match="truncated"):
        _drain(files.open_stream(str(p)))


def test_gzip_output_cap(tmp_path):
    p = tmp_path / "bomb.gz"
    p.write_bytes(gzip.compress(b"A" * (8 << 20)))  # 8 MiB of text in ~8 KiB
    s = files.open_stream(str(p), limit=1 << 20)
    with pytest.raises(InputError, match="decompresses to more than 1 MiB"):
        _drain(s)


def test_stream_cap_on_a_pipe(tmp_path):
    r, w = os.pipe()

    def feed():
        try:
            for _ in range(64):
                os.write(w, b"x" * 65536)
        except OSError:
            pass
        finally:
            os.close(w)

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    s = files.open_stream(f"/dev/fd/{r}", limit=1 << 20)
    with pytest.raises(InputError, match="more than 1 MiB"):
        _drain(s)
    s.close()
    os.close(r)
    t.join(5)


def test_optional_text(tmp_path):
    assert files.read_optional_text(tmp_path / "absent") is None
    assert files.read_optional_text(tmp_path) is None  # a directory: not there for our purposes
    fifo = tmp_path / "meminfo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        files.read_optional_text(fifo)
