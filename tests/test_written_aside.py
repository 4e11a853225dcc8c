"""Files written aside: a whole file or the old one, never half; devices, pipes and links kept."""

import os
import threading
from pathlib import Path

import pytest

from tfscones.data.text_lines import write_lines
from tfscones.written_aside import DiskFull, check_folder, written_aside


def test_a_link_is_followed_and_stays_a_link(tmp_path):
    (tmp_path / "real.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    write_lines(tmp_path / "link.txt", ["new"])
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_a_pipe_is_written_as_it_is_not_replaced(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    write_lines(pipe, ["through the pipe"])
    reader.join(timeout=10)
    assert received == ["through the pipe\n"]
    assert pipe.is_fifo()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_device_is_named_and_left_a_device():
    with pytest.raises(DiskFull, match="no space left on the disk of /dev to write full"):
        write_lines("/dev/full", ["nowhere to go"])
    assert Path("/dev/full").is_char_device()


def test_a_failed_block_leaves_the_file_and_no_partial(tmp_path):
    path = tmp_path / "model.keras"
    path.write_text("whole")
    with pytest.raises(RuntimeError), written_aside(path) as partial:
        partial.write_text("half")
        raise RuntimeError
    assert path.read_text() == "whole"
    assert [child.name for child in tmp_path.iterdir()] == ["model.keras"]


@pytest.mark.parametrize("inside", ["file", "file/below"])
def test_a_folder_under_a_file_is_refused_naming_the_file(tmp_path, inside):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=rf"^--out X: {tmp_path / 'file'} is not a folder"):
        check_folder(tmp_path / inside, "--out X")
    check_folder(tmp_path / "new" / "deeper", "--out X")
    assert not (tmp_path / "new").exists()  # checked, not made
