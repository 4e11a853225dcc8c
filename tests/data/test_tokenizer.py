import unicodedata

import keras
import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from tfscones.data import BOS_ID, EOS_ID, PAD_ID, Tokenizer


def normal_lines(paths, count=300):
    lines = [line for path in paths for line in path.read_text("utf-8").splitlines()[:count]]
    return [line for line in lines if unicodedata.normalize("NFKC", line) == line]


def test_ids_equal_python_sentencepiece(tatoeba_tokenizer, tatoeba_model, tatoeba_head):
    lines = [line for path in tatoeba_head for line in path.read_text("utf-8").splitlines()[:300]]
    processor = spm.SentencePieceProcessor(model_file=str(tatoeba_model))
    ids = tatoeba_tokenizer.tokenize(tf.constant(lines))
    assert isinstance(ids, tf.RaggedTensor)
    assert ids.dtype == tf.int32
    assert ids.to_list() == processor.encode(lines)
    assert tatoeba_tokenizer.vocab_size == processor.get_piece_size() == 500


def test_round_trip_on_tatoeba(tatoeba_tokenizer, tatoeba_head):
    lines = normal_lines(tatoeba_head)
    ids = tatoeba_tokenizer.tokenize(tf.constant(lines), add_eos=True)
    assert [row[-1] for row in ids.to_list()] == [EOS_ID] * len(lines)
    assert [s.decode() for s in tatoeba_tokenizer.detokenize(ids).numpy()] == lines


def test_round_trip_on_synthetic_text(synthetic_tokenizer, synthetic_pairs):
    lines = [line for pair in synthetic_pairs for line in pair]
    decoded = synthetic_tokenizer.detokenize(synthetic_tokenizer.tokenize(tf.constant(lines)))
    assert [s.decode() for s in decoded.numpy()] == lines


def test_add_eos_on_scalar_and_nested_input(synthetic_tokenizer, synthetic_pairs):
    source, target = synthetic_pairs[0]
    plain = synthetic_tokenizer.tokenize(tf.constant(source))
    with_eos = synthetic_tokenizer.tokenize(tf.constant(source), add_eos=True)
    assert isinstance(with_eos, tf.Tensor) and with_eos.shape.rank == 1
    assert with_eos.numpy().tolist() == plain.numpy().tolist() + [EOS_ID]
    nested = synthetic_tokenizer.tokenize(
        tf.constant([[source, target], [target, ""]]), add_eos=True
    )
    rows = nested.to_list()
    assert rows[0][0] == with_eos.numpy().tolist()
    assert rows[1][1] == [EOS_ID]


def test_detokenize_cuts_at_first_eos_and_drops_pad_and_bos(synthetic_tokenizer, synthetic_pairs):
    first, second = synthetic_pairs[1][1], synthetic_pairs[2][1]
    a = synthetic_tokenizer.tokenize(tf.constant(first)).numpy().tolist()
    b = synthetic_tokenizer.tokenize(tf.constant(second)).numpy().tolist()
    # Decoder-style rows: BOS, pieces, EOS, then garbage (more pieces, another EOS) and padding.
    rows = [[BOS_ID] + a + [EOS_ID] + b + [EOS_ID] + b, [BOS_ID] + b + [EOS_ID]]
    width = max(len(row) for row in rows) + 3
    dense = tf.constant([row + [PAD_ID] * (width - len(row)) for row in rows], tf.int32)
    expected = [first.encode(), second.encode()]
    assert synthetic_tokenizer.detokenize(dense).numpy().tolist() == expected
    assert synthetic_tokenizer.detokenize(tf.ragged.constant(rows)).numpy().tolist() == expected
    assert synthetic_tokenizer.detokenize(tf.cast(dense, tf.int64)).numpy().tolist() == expected
    assert synthetic_tokenizer.detokenize(dense[0]).numpy() == first.encode()
    # Padding inside a row (left-padded beams) is dropped as well.
    left_padded = tf.constant([PAD_ID, PAD_ID, BOS_ID] + a + [EOS_ID, PAD_ID])
    assert synthetic_tokenizer.detokenize(left_padded).numpy() == first.encode()


def test_works_inside_tf_function(synthetic_tokenizer, synthetic_pairs):
    lines = [source for source, _ in synthetic_pairs[:8]]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(strings):
        ids = synthetic_tokenizer.tokenize(strings, add_eos=True)
        return ids.to_tensor(default_value=PAD_ID), synthetic_tokenizer.detokenize(ids)

    padded, decoded = round_trip(tf.constant(lines))
    assert padded.dtype == tf.int32
    expected = synthetic_tokenizer.tokenize(tf.constant(lines), add_eos=True).to_tensor()
    np.testing.assert_array_equal(padded.numpy(), expected.numpy())
    assert [s.decode() for s in decoded.numpy()] == lines


def test_saved_by_keras_export_archive(tmp_path, synthetic_tokenizer, synthetic_pairs):
    lines = [source for source, _ in synthetic_pairs[:4]]
    archive = keras.export.ExportArchive()
    archive.track(synthetic_tokenizer)
    archive.add_endpoint(
        "tokenize",
        lambda strings: synthetic_tokenizer.tokenize(strings, add_eos=True).to_tensor(),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    archive.add_endpoint(
        "detokenize",
        synthetic_tokenizer.detokenize,
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    archive.write_out(str(tmp_path / "saved"), verbose=False)

    restored = tf.saved_model.load(str(tmp_path / "saved"))
    ids = restored.tokenize(tf.constant(lines))
    expected = synthetic_tokenizer.tokenize(tf.constant(lines), add_eos=True).to_tensor()
    np.testing.assert_array_equal(ids.numpy(), expected.numpy())
    assert [s.decode() for s in restored.detokenize(ids).numpy()] == lines


def test_rejects_model_with_other_special_ids(tmp_path, synthetic_pairs):
    text = tmp_path / "text"
    text.write_text("\n".join(s for s, _ in synthetic_pairs) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.Train(  # SentencePiece defaults: unk 0, bos 1, eos 2, no pad
        input=str(text), model_prefix=str(tmp_path / "default"), vocab_size=100, minloglevel=2
    )
    with pytest.raises(ValueError, match="special ids"):
        Tokenizer.from_file(tmp_path / "default.model")


def test_survives_tf_random_set_seed(synthetic_model, synthetic_pairs):
    # tensorflow/text#570: set_seed clears the eager kernel cache, which deleted tf-text's model.
    tokenizer = Tokenizer.from_file(synthetic_model)
    source = tf.constant(synthetic_pairs[0][0])
    before = tokenizer.tokenize(source).numpy().tolist()
    pairs = tf.data.Dataset.from_tensors(source).map(tokenizer.tokenize)
    tf.random.set_seed(7)
    assert tokenizer.tokenize(source).numpy().tolist() == before
    assert next(iter(pairs)).numpy().tolist() == before


def test_missing_model_file(tmp_path):
    with pytest.raises(tf.errors.NotFoundError):
        Tokenizer.from_file(tmp_path / "missing.model")
