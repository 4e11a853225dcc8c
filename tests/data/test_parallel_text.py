import logging

import pytest

from tfscones.data import ParallelTextError, read_parallel_text


def write_bytes(path, data: bytes):
    path.write_bytes(data)
    return path


def pairs_of(corpus):
    return [(s.decode(), t.decode()) for s, t in corpus.dataset().as_numpy_iterator()]


@pytest.fixture
def files(tmp_path):
    """Writes parallel files from lists of byte lines; returns their paths."""

    def make(source_lines, target_lines):
        source = write_bytes(tmp_path / "train.src", b"".join(x + b"\n" for x in source_lines))
        target = write_bytes(tmp_path / "train.tgt", b"".join(x + b"\n" for x in target_lines))
        return source, target

    return make


def test_reads_aligned_pairs(tmp_path, synthetic_pairs, write_lines):
    source = write_lines(tmp_path / "a.src", [s for s, _ in synthetic_pairs])
    target = write_lines(tmp_path / "a.tgt", [t for _, t in synthetic_pairs])
    corpus = read_parallel_text(source, target)
    assert (corpus.num_lines, corpus.num_pairs, corpus.num_skipped) == (400, 400, 0)
    assert pairs_of(corpus) == synthetic_pairs


def test_reads_tatoeba(tatoeba_dir):
    corpus = read_parallel_text(tatoeba_dir / "dev.de", tatoeba_dir / "dev.en")
    german = (tatoeba_dir / "dev.de").read_text("utf-8").splitlines()
    english = (tatoeba_dir / "dev.en").read_text("utf-8").splitlines()
    assert corpus.num_pairs == len(german) == 1000
    assert pairs_of(corpus) == list(zip(german, english, strict=True))


def test_line_endings_match_text_line_dataset(tmp_path):
    # CRLF endings, a missing final newline and UTF-8 text: checked and streamed alike.
    source = write_bytes(tmp_path / "s", "Grüße\r\nzwei\r\ndrei".encode())
    target = write_bytes(tmp_path / "t", b"greetings\ntwo\nthree\n")
    assert pairs_of(read_parallel_text(source, target)) == [
        ("Grüße", "greetings"),
        ("zwei", "two"),
        ("drei", "three"),
    ]


def test_different_line_counts_name_both_files_and_counts(files):
    source, target = files([b"eins", b"zwei", b"drei"], [b"one", b"two"])
    with pytest.raises(ParallelTextError) as error:
        read_parallel_text(source, target, on_bad_line="skip")
    message = str(error.value)
    assert f"{source} has 3 lines" in message
    assert f"{target} has 2 lines" in message


@pytest.mark.parametrize(
    ("bad", "reason"), [(b"", "empty line"), (b" \t ", "whitespace-only line"), (b"\r", "empty")]
)
def test_blank_line_is_an_error_naming_file_and_line(files, bad, reason):
    source, target = files([b"eins", b"zwei", b"drei"], [b"one", bad, b"three"])
    with pytest.raises(ParallelTextError, match=f"{target}:2: {reason}"):
        read_parallel_text(source, target)


def test_blank_lines_skipped_keep_pairs_aligned(files, caplog):
    source, target = files(
        [b"eins", b"", b"drei", b"vier", b"  ", b"sechs"],
        [b"one", b"two", b"three", b"\t", b"", b"six"],
    )
    with caplog.at_level(logging.WARNING, logger="tfscones.data.parallel_text"):
        corpus = read_parallel_text(source, target, on_bad_line="skip")
    assert corpus.num_skipped == 3
    assert corpus.skipped_line_numbers == (2, 4, 5)
    assert [(bad.path, bad.line_number) for bad in corpus.bad_lines] == [
        (source, 2),
        (target, 4),
        (source, 5),
        (target, 5),
    ]
    assert corpus.num_pairs == 3
    assert pairs_of(corpus) == [("eins", "one"), ("drei", "three"), ("sechs", "six")]
    assert "Skipped 3 of 6 pairs" in caplog.text


def test_skipped_lines_are_warned_about_once_until_a_file_changes(files, caplog):
    source, target = files([b"eins", b"", b"drei"], [b"one", b"two", b"three"])
    with caplog.at_level(logging.WARNING, logger="tfscones.data.parallel_text"):
        for _ in range(3):  # a run reads its files to check them, for SentencePiece, to train
            assert read_parallel_text(source, target, on_bad_line="skip").num_skipped == 1
        assert caplog.text.count("Skipped 1 of 3 pairs") == 1

        target.write_bytes(b"one\n\nthree, changed\n")
        read_parallel_text(source, target, on_bad_line="skip")
    assert caplog.text.count("Skipped 1 of 3 pairs") == 2


def test_invalid_utf8_is_an_error_naming_file_line_and_bytes(files):
    source, target = files([b"eins", b"zwei", b"dr\xffei"], [b"one", b"two", b"three"])
    with pytest.raises(ParallelTextError) as error:
        read_parallel_text(source, target)
    message = str(error.value)
    assert f"{source}:3:" in message
    assert "invalid UTF-8" in message and r"b'\xff'" in message


def test_invalid_utf8_skipped_keeps_pairs_aligned(files):
    # Latin-1 "ü" (0xfc) is not UTF-8; a truncated multi-byte sequence neither.
    source, target = files(
        [b"gr\xfcn", b"zwei", b"drei", "vier ü".encode()],
        [b"green", b"two", b"thr\xe2\x82", b"four"],
    )
    corpus = read_parallel_text(source, target, on_bad_line="skip")
    assert corpus.skipped_line_numbers == (1, 3)
    assert [str(bad).split(": ", 1)[0] for bad in corpus.bad_lines] == [
        f"{source}:1",
        f"{target}:3",
    ]
    assert pairs_of(corpus) == [("zwei", "two"), ("vier ü", "four")]


def test_no_usable_pair_is_an_error(files):
    source, target = files([b"", b"eins"], [b"one", b""])
    with pytest.raises(ParallelTextError, match="No usable sentence pairs"):
        read_parallel_text(source, target, on_bad_line="skip")


def test_rejects_unknown_mode_and_missing_file(files, tmp_path):
    source, target = files([b"eins"], [b"one"])
    with pytest.raises(ValueError, match="on_bad_line"):
        read_parallel_text(source, target, on_bad_line="ignore")
    with pytest.raises(FileNotFoundError):
        read_parallel_text(source, tmp_path / "missing.tgt")
