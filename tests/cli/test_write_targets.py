"""`gen -o /dev/null` replaced the machine's /dev/null with a regular file when run as root (issue 44
item 4): the atomic writer renamed its temporary file over whatever the path named. Now a
character device or FIFO is written through and keeps its kind; a folder, block device or socket
is refused before anything is written; a regular file is still replaced whole or not at all.
Device nodes are made in a temporary folder (mknod needs root: skipped without it)."""
from __future__ import annotations

import os
import socket
import stat
import threading

import pytest

from tracetui import atomic


def _node(path, kind: int, dev=(1, 3)):
    try:
        os.mknod(path, kind | 0o666, os.makedev(*dev))
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


def test_a_character_device_is_written_through_and_stays_one(tmp_path):
    null = _node(tmp_path / "null", stat.S_IFCHR)  # a /dev/null of our own: 1,3
    atomic.write_all({null: b"trace bytes"})
    st = os.stat(null)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)  # before: a regular file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temporary file left beside it


def test_a_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
    reader.start()
    atomic.write_all({fifo: b"x" * 200_000})  # more than a pipe holds: the reader drains it
    reader.join(10)
    assert got == [b"x" * 200_000] and stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("kind", ["block", "socket", "folder"])
def test_other_kinds_are_refused_before_anything_is_written(tmp_path, kind):
    target = tmp_path / "target"
    if kind == "block":
        _node(target, stat.S_IFBLK, (7, 0))
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(target))
    else:
        target.mkdir()
    before = os.stat(target)
    fresh = tmp_path / "fresh.json"
    with pytest.raises(atomic.UnsafeTarget, match="target"):
        atomic.write_all({fresh: b"{}", target: b"trace"})
    after = os.stat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not fresh.exists()  # all or nothing: the regular file beside it was not written either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


def test_a_symlink_to_a_device_is_written_through_not_replaced(tmp_path):
    null = _node(tmp_path / "null", stat.S_IFCHR)
    link = tmp_path / "out.json.gz"
    link.symlink_to(null)
    atomic.write_all({link: b"x"})
    assert link.is_symlink() and stat.S_ISCHR(os.stat(null).st_mode)


def test_a_regular_file_is_still_replaced_whole(tmp_path):
    f = tmp_path / "t.json"
    f.write_bytes(b"old")
    ino = f.stat().st_ino
    atomic.write_all({f: b"new"})
    assert f.read_bytes() == b"new" and f.stat().st_ino != ino  # renamed into place, as before


def test_gen_refuses_a_socket_in_one_line_before_recording(tmp_path, capsys):
    """The CLI: `gen -o SOCKET` is one line, exit 2, before torch is asked for anything."""
    pytest.importorskip("torch")
    from tracetui.cli.main import main
    target = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(target))
    rc = main(["gen", "linear", "--device", "cpu", "--no-stack", "--active", "1", "--batch", "2",
               "--in-features", "8", "--out-features", "8", "-o", str(target)])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and len([ln for ln in err if ln.startswith("tracetui: error: gen: -o ")]) == 1
    assert "[tracetui gen]" not in "\n".join(err)  # refused before the run started
    assert stat.S_ISSOCK(os.stat(target).st_mode)


def test_gen_to_a_character_device_leaves_it_one(tmp_path, capsys):
    pytest.importorskip("torch")
    from tracetui.cli.main import main
    null = _node(tmp_path / "null", stat.S_IFCHR)
    rc = main(["gen", "linear", "--device", "cpu", "--no-stack", "--active", "1", "--batch", "2",
               "--in-features", "8", "--out-features", "8", "-o", str(null)])
    assert rc == 0 and stat.S_ISCHR(os.stat(null).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no sidecar beside a device
