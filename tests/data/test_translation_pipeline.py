import numpy as np
import pytest
import tensorflow as tf

from tfscones.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    model_example,
    read_parallel_text,
    translation_dataset,
)


def check_batch(features, target_out, budget):
    """Asserts the batch format that keras.Model.fit consumes; returns the unpadded rows."""
    assert set(features) == {"source_ids", "target_in_ids"}
    source, target_in = features["source_ids"], features["target_in_ids"]
    for tensor in (source, target_in, target_out):
        assert tensor.dtype == np.int32 and tensor.ndim == 2
        assert tensor.size <= budget
    assert target_in.shape == target_out.shape
    assert source.shape[0] == target_in.shape[0]
    rows = []
    for s, t_in, t_out in zip(source, target_in, target_out, strict=True):
        n_s, n_t = np.count_nonzero(s), np.count_nonzero(t_out)
        assert (s[n_s:] == PAD_ID).all() and (t_out[n_t:] == PAD_ID).all()
        assert (t_in[n_t:] == PAD_ID).all() and np.count_nonzero(t_in) == n_t
        assert s[n_s - 1] == EOS_ID and EOS_ID not in s[: n_s - 1]
        assert t_out[n_t - 1] == EOS_ID and EOS_ID not in t_out[: n_t - 1]
        assert t_in[0] == BOS_ID and BOS_ID not in t_in[1:n_t]
        np.testing.assert_array_equal(t_in[1:n_t], t_out[: n_t - 1])
        rows.append((s[: n_s - 1].tolist(), t_out[: n_t - 1].tolist()))
    # Batches are padded to their longest row only.
    assert max(np.count_nonzero(s) for s in source) == source.shape[1]
    assert max(np.count_nonzero(t) for t in target_out) == target_out.shape[1]
    return rows


def test_model_example():
    features, target_out = model_example(tf.constant([7, 8]), tf.constant([9, 10, 11]))
    assert features["source_ids"].numpy().tolist() == [7, 8, EOS_ID]
    assert features["target_in_ids"].numpy().tolist() == [BOS_ID, 9, 10, 11]
    assert target_out.numpy().tolist() == [9, 10, 11, EOS_ID]


def test_synthetic_batches_keep_pairs_aligned_and_drop_long_pairs(
    tmp_path, synthetic_tokenizer, make_synthetic_pairs, translate, write_lines
):
    pairs = make_synthetic_pairs(300, seed=5, max_words=12)
    source = write_lines(tmp_path / "s", [s for s, _ in pairs])
    target = write_lines(tmp_path / "t", [t for _, t in pairs])
    max_length, budget = 20, 256
    batches = translation_dataset(
        read_parallel_text(source, target).dataset(),
        synthetic_tokenizer,
        tokens_per_batch=budget,
        max_length=max_length,
        max_length_ratio=None,
    )
    decoded = []
    for features, target_out in batches.as_numpy_iterator():
        rows = check_batch(features, target_out, budget)
        texts = synthetic_tokenizer.detokenize(tf.ragged.constant([s for s, _ in rows]))
        targets = synthetic_tokenizer.detokenize(tf.ragged.constant([t for _, t in rows]))
        for (s_ids, t_ids), s_text, t_text in zip(
            rows, texts.numpy(), targets.numpy(), strict=True
        ):
            assert len(s_ids) <= max_length and len(t_ids) <= max_length
            assert translate(s_text.decode()) == t_text.decode()  # still aligned
            decoded.append(s_text.decode())

    def fits(text):
        return len(synthetic_tokenizer.tokenize(tf.constant(text)).numpy()) <= max_length

    expected = [s for s, t in pairs if fits(s) and fits(t)]
    assert 0 < len(expected) < len(pairs)  # some pairs are too long and must be dropped
    assert sorted(decoded) == sorted(expected)


def test_tatoeba_batches(tatoeba_head, tatoeba_tokenizer):
    budget = 512
    corpus = read_parallel_text(*tatoeba_head)
    batches = translation_dataset(
        corpus.dataset(), tatoeba_tokenizer, tokens_per_batch=budget, max_length=32
    )
    total = 0
    for features, target_out in batches.as_numpy_iterator():
        rows = check_batch(features, target_out, budget)
        for s, t in rows:
            assert 1 <= len(s) <= 32 and 1 <= len(t) <= 32
            assert max(len(s), len(t)) <= 3 * min(len(s), len(t))
        total += len(rows)
    assert 0.8 * corpus.num_pairs < total < corpus.num_pairs


def test_tatoeba_first_batch_decodes_to_corpus_pairs(tatoeba_head, tatoeba_tokenizer):
    german = tatoeba_head[0].read_text("utf-8").splitlines()
    english = tatoeba_head[1].read_text("utf-8").splitlines()
    by_source = dict(zip(german, english, strict=True))
    features, target_out = next(
        iter(translation_dataset(read_parallel_text(*tatoeba_head).dataset(), tatoeba_tokenizer))
    )
    sources = tatoeba_tokenizer.detokenize(features["source_ids"]).numpy()
    targets = tatoeba_tokenizer.detokenize(target_out).numpy()
    known = [(s.decode(), t.decode()) for s, t in zip(sources, targets, strict=True)]
    known = [(s, t) for s, t in known if s in by_source]  # NFKC may change a few lines
    assert len(known) > 0.9 * len(sources)
    assert all(by_source[s] == t for s, t in known)


def test_seeded_shuffle_is_reproducible_and_repeat_continues(synthetic_tokenizer, synthetic_pairs):
    pairs = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in synthetic_pairs], [t for _, t in synthetic_pairs])
    )

    def first_sources(seed, count=6, **kwargs):
        batches = translation_dataset(
            pairs,
            synthetic_tokenizer,
            tokens_per_batch=128,
            max_length=30,
            shuffle_buffer_size=400,
            seed=seed,
            **kwargs,
        )
        return [f["source_ids"].tolist() for f, _ in batches.take(count).as_numpy_iterator()]

    assert first_sources(1) == first_sources(1)
    assert first_sources(1) != first_sources(2)
    one_epoch = sum(
        1
        for _ in translation_dataset(
            pairs, synthetic_tokenizer, tokens_per_batch=128, max_length=30
        )
    )
    assert len(first_sources(1, count=3 * one_epoch, repeat=True)) == 3 * one_epoch


def test_a_resumed_pipeline_draws_the_batches_of_the_uninterrupted_one(
    synthetic_tokenizer, synthetic_pairs
):
    """A resumed run builds the pipeline anew and skips what it consumed, then `fit` makes a
    new iterator for the epochs after the interrupted one: the stream must not depend on that."""
    pairs = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in synthetic_pairs], [t for _, t in synthetic_pairs])
    )

    def pipeline():
        return translation_dataset(
            pairs,
            synthetic_tokenizer,
            tokens_per_batch=128,
            max_length=30,
            shuffle_buffer_size=400,
            repeat=True,
            seed=3,
        )

    def sources(batches, count):
        return [f["source_ids"].tolist() for f, _ in batches.take(count).as_numpy_iterator()]

    one_epoch = sum(
        1
        for _ in translation_dataset(
            pairs, synthetic_tokenizer, tokens_per_batch=128, max_length=30
        )
    )
    uninterrupted = sources(pipeline(), 3 * one_epoch)
    killed_at, epoch_end = one_epoch // 2, one_epoch
    resumed = pipeline().skip(killed_at)
    first_fit = sources(resumed, epoch_end - killed_at)
    second_fit = sources(resumed.skip(epoch_end - killed_at), 2 * one_epoch)

    assert first_fit + second_fit == uninterrupted[killed_at:]
    assert uninterrupted[:one_epoch] != uninterrupted[one_epoch : 2 * one_epoch]  # reshuffled


def test_static_shapes_for_tpu(synthetic_tokenizer, synthetic_pairs):
    pairs = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in synthetic_pairs], [t for _, t in synthetic_pairs])
    )
    bucket_lengths = [8, 16, 24]
    batches = translation_dataset(
        pairs,
        synthetic_tokenizer,
        tokens_per_batch=96,
        max_length=23,
        bucket_lengths=bucket_lengths,
        static_shapes=True,
        drop_remainder=True,
    )
    shapes = set()
    for features, target_out in batches.as_numpy_iterator():
        shape = features["source_ids"].shape
        assert shape == features["target_in_ids"].shape == target_out.shape
        assert shape in {(96 // n, n) for n in bucket_lengths}
        shapes.add(shape)
    assert len(shapes) >= 2


def test_rejects_buckets_too_short_for_max_length(synthetic_tokenizer):
    pairs = tf.data.Dataset.from_tensors((tf.constant("a"), tf.constant("b")))
    with pytest.raises(ValueError, match="cannot hold max_length=16"):
        translation_dataset(pairs, synthetic_tokenizer, max_length=16, bucket_lengths=[8, 16])


def test_keras_fit_consumes_the_batches(synthetic_tokenizer, synthetic_pairs):
    import keras

    pairs = tf.data.Dataset.from_tensor_slices(
        ([s for s, _ in synthetic_pairs[:64]], [t for _, t in synthetic_pairs[:64]])
    )
    batches = translation_dataset(
        pairs, synthetic_tokenizer, tokens_per_batch=256, max_length=30, repeat=True
    )
    vocab = synthetic_tokenizer.vocab_size
    source = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_in = keras.Input(shape=(None,), dtype="int32", name="target_in_ids")
    embed = keras.layers.Embedding(vocab, 8)
    context = keras.layers.GlobalAveragePooling1D()(embed(source))
    hidden = embed(target_in) + keras.layers.Reshape((1, 8))(context)
    model = keras.Model([source, target_in], keras.layers.Dense(vocab)(hidden))
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD_ID),
    )
    history = model.fit(batches, epochs=1, steps_per_epoch=3, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"][0])
