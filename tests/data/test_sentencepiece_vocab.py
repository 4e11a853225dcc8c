import unicodedata

import pytest
import sentencepiece as spm

from tfscones.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, train_sentencepiece


def pieces_and_scores(model_file):
    processor = spm.SentencePieceProcessor(model_file=str(model_file))
    return [
        (processor.id_to_piece(i), processor.get_score(i))
        for i in range(processor.get_piece_size())
    ]


def is_normal_text(line: str) -> bool:
    """True if nmt_nfkc normalisation leaves the line unchanged."""
    return unicodedata.normalize("NFKC", line) == line and " ".join(line.split()) == line


def test_special_ids_are_fixed(synthetic_model):
    processor = spm.SentencePieceProcessor(model_file=str(synthetic_model))
    assert (processor.pad_id(), processor.eos_id(), processor.unk_id(), processor.bos_id()) == (
        PAD_ID,
        EOS_ID,
        UNK_ID,
        BOS_ID,
    )
    assert [processor.id_to_piece(i) for i in range(4)] == ["<pad>", "</s>", "<unk>", "<s>"]
    assert processor.get_piece_size() == 200


def test_writes_model_and_vocab(tmp_path, synthetic_pairs, write_lines):
    text = write_lines(tmp_path / "text", [s for s, _ in synthetic_pairs])
    files = train_sentencepiece([text], tmp_path / "out" / "joint", vocab_size=150)
    assert files.model_file == tmp_path / "out" / "joint.model"
    assert files.vocab_file == tmp_path / "out" / "joint.vocab"
    vocab = files.vocab_file.read_text(encoding="utf-8").splitlines()
    assert len(vocab) == 150
    assert [line.split("\t")[0] for line in vocab[:4]] == ["<pad>", "</s>", "<unk>", "<s>"]


def test_round_trip_on_synthetic_text(synthetic_model, synthetic_pairs):
    processor = spm.SentencePieceProcessor(model_file=str(synthetic_model))
    for source, target in synthetic_pairs:
        for line in (source, target):
            ids = processor.encode(line)
            assert UNK_ID not in ids
            assert processor.decode(ids) == line


def test_round_trip_on_tatoeba(tatoeba_model, tatoeba_head):
    processor = spm.SentencePieceProcessor(model_file=str(tatoeba_model))
    assert processor.get_piece_size() == 500
    lines = [line for path in tatoeba_head for line in path.read_text("utf-8").splitlines()]
    normal = [line for line in lines if is_normal_text(line)]
    assert len(normal) > 0.99 * len(lines)
    assert [processor.decode(processor.encode(line)) for line in normal] == normal


def test_identity_normalization_keeps_characters_nfkc_would_change(tmp_path, synthetic_pairs):
    lines = [s for s, _ in synthetic_pairs] + ["apfel ½ brot", "haus … baum"] * 5
    text = tmp_path / "text"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    nfkc = train_sentencepiece([text], tmp_path / "nfkc", vocab_size=150).model_file
    identity = train_sentencepiece(
        [text], tmp_path / "identity", vocab_size=150, normalization_rule_name="identity"
    ).model_file
    line = "apfel ½ brot … haus"
    nfkc_processor = spm.SentencePieceProcessor(model_file=str(nfkc))
    identity_processor = spm.SentencePieceProcessor(model_file=str(identity))
    assert nfkc_processor.decode(nfkc_processor.encode(line)) != line
    assert identity_processor.decode(identity_processor.encode(line)) == line


def test_sampled_training_is_reproducible_and_seeded(tmp_path, tatoeba_head):
    def train(name, seed):
        return train_sentencepiece(
            list(tatoeba_head), tmp_path / name, vocab_size=300, input_sentence_size=800, seed=seed
        ).model_file

    first, again, other_seed = train("a", 1), train("b", 1), train("c", 2)
    assert pieces_and_scores(first) == pieces_and_scores(again)
    assert pieces_and_scores(first) != pieces_and_scores(other_seed)


def test_sampling_trains_on_the_sampled_lines_only(tmp_path, write_lines):
    text = write_lines(tmp_path / "text", ["ab", "cd"])

    def char_model(name, **kwargs):
        files = train_sentencepiece([text], tmp_path / name, model_type="char", **kwargs)
        return spm.SentencePieceProcessor(model_file=str(files.model_file))

    # 4 specials + "▁" + the characters seen: a, b, c, d in full; one line's two when sampled.
    full = char_model("full", vocab_size=9)
    sampled = char_model("sampled", vocab_size=7, input_sentence_size=1, seed=0)
    assert full.encode("abcd") == [full.piece_to_id(p) for p in ["▁", "a", "b", "c", "d"]]
    assert sampled.encode("abcd").count(UNK_ID) == 1  # unknown characters merge into one unk


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"model_type": "wordpiece"}, ValueError, "model_type"),
        ({"vocab_size": 4}, ValueError, "vocab_size"),
    ],
)
def test_rejects_bad_settings(tmp_path, write_lines, kwargs, error, match):
    text = write_lines(tmp_path / "text", ["ein satz"])
    with pytest.raises(error, match=match):
        train_sentencepiece([text], tmp_path / "m", **kwargs)


def test_rejects_missing_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.txt"):
        train_sentencepiece([tmp_path / "nothing.txt"], tmp_path / "m", vocab_size=100)
    with pytest.raises(ValueError, match="input_files is empty"):
        train_sentencepiece([], tmp_path / "m", vocab_size=100)


def test_invalid_utf8_names_file_and_line(tmp_path):
    text = tmp_path / "text"
    text.write_bytes(b"ein satz\nnoch ein\nkaputt \xff\n")
    with pytest.raises(ValueError, match=rf"{text}:3: invalid UTF-8 bytes b'\\xff'"):
        train_sentencepiece([text], tmp_path / "m", vocab_size=20)
