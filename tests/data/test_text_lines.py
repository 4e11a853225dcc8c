"""What a line is: newlines only, carriage returns dropped, bad UTF-8 named by file and line."""

import errno
from pathlib import Path

import pytest

from tfscones.data.text_lines import (
    TextLineError,
    decode_lines,
    format_lines,
    iter_byte_lines,
    read_lines,
    split_lines,
    write_lines,
)
from tfscones.written_aside import DiskFull


def test_lines_end_at_newlines_only():
    data = "a\u2028b\nc\u0085d\r\ne\x0cf\x0bg\u2029h\n".encode()
    assert decode_lines(data, "x") == ["a\u2028b", "c\u0085d", "e\x0cf\x0bg\u2029h"]


def test_a_final_newline_ends_the_last_line_and_blank_lines_count():
    assert split_lines(b"a\n\nb") == [b"a", b"", b"b"]
    assert split_lines(b"a\n\nb\n") == [b"a", b"", b"b"]
    assert split_lines(b"") == []
    assert split_lines(b"\n") == [b""]


def test_streamed_and_whole_file_reads_agree(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"one\r\ntwo\rthree\n\nfour \xe2\x80\xa8five")
    assert list(iter_byte_lines(path)) == split_lines(path.read_bytes())
    assert read_lines(path) == ["one", "twothree", "", "four \u2028five"]


def test_bad_utf8_names_file_line_and_offset(tmp_path):
    path = tmp_path / "bad.de"
    path.write_bytes(b"gut\nauch gut\nschlecht \xff\xfe hier\n")
    expected = r"bad\.de:3: not UTF-8: bytes b'\\xff' at byte offset 9"
    with pytest.raises(TextLineError, match=expected):
        read_lines(path)


def test_writing_refuses_a_line_break_inside_a_line():
    assert format_lines(["a", "b\u2028c"]) == "a\nb\u2028c\n"
    with pytest.raises(TextLineError, match="line 2 to write holds a line break"):
        format_lines(["a", "b\nc"])


def test_a_write_that_fails_midway_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    output = tmp_path / "out.en"
    output.write_text("the earlier translations\n", encoding="utf-8")
    real_write_text = Path.write_text

    def half_then_full_disk(path, text, **arguments):
        real_write_text(path, text[:3], **arguments)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", half_then_full_disk)
    with pytest.raises(DiskFull, match=rf"no space left on the disk of {tmp_path} to write out.en"):
        write_lines(output, ["new one", "new two"])
    monkeypatch.undo()
    assert output.read_text(encoding="utf-8") == "the earlier translations\n"
    assert [path.name for path in tmp_path.iterdir()] == ["out.en"]  # no partial file left
    write_lines(output, ["new one", "new two"])
    assert output.read_text(encoding="utf-8") == "new one\nnew two\n"
