"""The SIGMORPHON pronunciation TSV reader: lines read as the task writes them, bad ones named."""

import pytest

from tfscones.data import ParallelTextError
from tfscones.data.pronunciation_tsv import (
    language_of_file,
    read_pronunciation_files,
    read_pronunciations,
)


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_line_is_graphemes_tab_phones_and_the_language_tags_the_source(tmp_path):
    french = write(tmp_path / "fre_train.tsv", "abject\ta b ʒ ɛ k t\nœuf\tœ f\r\n".encode())
    read = read_pronunciations(french, language="fre")
    assert read.words == ("abject", "œuf")
    assert read.phones == ("a b ʒ ɛ k t", "œ f")
    assert read.sources() == ["fre\tabject", "fre\tœuf"]
    assert [pair for pair in read.dataset().as_numpy_iterator()] == [
        (b"fre\tabject", "a b ʒ ɛ k t".encode()),
        ("fre\tœuf".encode(), "œ f".encode()),
    ]


def test_several_files_take_their_languages_from_their_names(tmp_path):
    files = [
        write(tmp_path / "kor_dev.tsv", "가게\tk a̠ː ɡ e̞\n".encode()),
        write(tmp_path / "vie_dev.tsv", "a còng\tʔ aː ˧˧ k a w ŋ͡m ˨˩\n".encode()),
    ]
    read = read_pronunciation_files(files)
    assert read.languages == ("kor", "vie")
    assert read.sources() == ["kor\t가게", "vie\ta còng"]  # a space is a grapheme too
    assert language_of_file("data/ady_test.tsv") == "ady"
    with pytest.raises(ParallelTextError, match="cannot tell the language of words.tsv"):
        language_of_file("words.tsv")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"abject a b", "no tab: a line is graphemes<TAB>phones"),
        (b"abject\ta b\tx", "2 tabs: a line is graphemes<TAB>phones"),
        (b"\ta b", "empty graphemes"),
        (b"abject\t  ", "empty phones"),
        (b"abject\t", "empty phones"),
        (b"ab\xffject\ta b", "invalid UTF-8 bytes b'\\xff' at byte offset 2"),
        (b"", "no tab"),
    ],
)
def test_a_bad_line_is_named_with_file_line_and_problem(tmp_path, line, problem):
    path = write(tmp_path / "fre_train.tsv", b"ok\to k\n" + line + b"\nfine\tf i n\n")
    with pytest.raises(ParallelTextError) as raised:
        read_pronunciations(path, "fre")
    assert str(raised.value).startswith(f"{path}:2: ")
    assert problem in str(raised.value)
    skipped = read_pronunciations(path, "fre", on_bad_line="skip")
    assert skipped.words == ("ok", "fine")
    assert [(bad.path, bad.line_number) for bad in skipped.bad_lines] == [(path, 2)]


def test_a_file_without_a_usable_line_and_an_unknown_policy_are_refused(tmp_path):
    path = write(tmp_path / "fre_train.tsv", b"no tab here\n")
    with pytest.raises(ParallelTextError, match="No usable pronunciations"):
        read_pronunciations(path, on_bad_line="skip")
    with pytest.raises(ValueError, match="on_bad_line must be one of"):
        read_pronunciations(path, on_bad_line="ignore")
    with pytest.raises(FileNotFoundError):
        read_pronunciations(tmp_path / "missing.tsv")
