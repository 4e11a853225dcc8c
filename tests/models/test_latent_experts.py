"""Hard mixture of experts (Shen et al. 2019): E-step, hard-EM training, parallel decoding."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones import heads
from tfscones.decoding import OutputLimits, Search, beam_search, greedy_decode
from tfscones.decoding.experts import ParallelExperts, decode_experts
from tfscones.models.latent_experts import LatentExpertTransformer

VOCAB = 23
SOURCE = np.array(
    [
        [5, 6, 7, 8, 1, 0, 0],
        [9, 10, 1, 0, 0, 0, 0],
        [4, 11, 12, 13, 14, 15, 1],
        [16, 17, 18, 1, 0, 0, 0],
        [19, 1, 0, 0, 0, 0, 0],
        [20, 21, 22, 4, 5, 1, 0],
    ]
)
TARGET_OUT = np.array(
    [
        [4, 5, 6, 1, 0, 0],
        [7, 8, 9, 10, 11, 1],
        [12, 1, 0, 0, 0, 0],
        [13, 14, 1, 0, 0, 0],
        [15, 16, 17, 18, 1, 0],
        [19, 20, 1, 0, 0, 0],
    ]
)
TARGET_IN = np.concatenate([np.full((6, 1), 3), TARGET_OUT[:, :-1]], axis=1)


def small_model(head="softmax", num_experts=3, **overrides):
    return harness.small_model(
        VOCAB,
        head,
        model_class=LatentExpertTransformer,
        num_encoder_layers=1,
        num_experts=num_experts,
        **overrides,
    )


def inputs(expert=None, source=SOURCE, target_in=TARGET_IN):
    features = harness.model_inputs(source, target_in)
    if expert is not None:
        features["expert"] = tf.constant(expert, tf.int32)
    return features


def separate_expert_losses(model, loss, targets=TARGET_OUT):
    """-log p(y|z, x) of every pair and expert from K independent forward passes."""
    mask = targets != 0
    columns = []
    for k in range(model.num_experts):
        logits = model(inputs(np.full(len(targets), k)), training=False)
        token_losses = loss.call(tf.constant(targets), logits).numpy()
        columns.append((token_losses * mask).sum(axis=1))
    return np.stack(columns, axis=1)


@pytest.mark.parametrize(
    "head, loss",
    [
        ("softmax", None),
        ("sigmoid", heads.SconesLoss(alpha=0.3, label_smoothing=0.1)),
        ("entmax15", heads.EntmaxLoss(alpha=1.5)),
    ],
)
def test_e_step_is_the_argmin_of_separate_forward_passes(head, loss):
    # Dropout is high, but the E-step turns it off (Algorithm 1).
    model = small_model(head, num_experts=4, dropout=0.5)
    if loss is not None:
        model.compile(optimizer="sgd", loss=loss)
    expected = separate_expert_losses(model, loss or model.head.loss())
    computed = model.expert_losses(inputs(), TARGET_OUT).numpy()
    assert computed.shape == (6, 4) and computed.dtype == np.float32
    np.testing.assert_allclose(computed, expected, rtol=1e-5, atol=1e-5)
    # The experts do differ, so that the argmin means something.
    assert (expected.max(axis=1) - expected.min(axis=1)).min() > 1e-4
    chosen = model.choose_experts(inputs(), TARGET_OUT).numpy()
    np.testing.assert_array_equal(chosen, expected.argmin(axis=1))


def test_only_the_chosen_expert_gets_gradient_and_the_loss_is_the_best_experts():
    model = small_model("softmax", num_experts=3)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=model.head.loss())
    chosen = model.choose_experts(inputs(), TARGET_OUT).numpy()
    winner = np.bincount(chosen, minlength=3).argmax()
    rows = chosen == winner
    source, target_in, target_out = SOURCE[rows], TARGET_IN[rows], TARGET_OUT[rows]
    batch = inputs(source=source, target_in=target_in)
    best = model.expert_losses(batch, target_out).numpy().min(axis=1)
    # The hard-EM loss (eq. 3) per token, which both Keras steps must report.
    expected_loss = best.sum() / (target_out != 0).sum()
    assert model.evaluate(batch, target_out, verbose=0, return_dict=True)["loss"] == (
        pytest.approx(expected_loss, rel=1e-5)
    )
    before = model.expert_embedding.embeddings.numpy().copy()
    others_before = [w.numpy().copy() for w in model.decoder_layers[0].trainable_weights]
    history = model.fit(batch, target_out, batch_size=len(target_out), verbose=0).history
    after = model.expert_embedding.embeddings.numpy()
    assert history["loss"][0] == pytest.approx(expected_loss, rel=1e-5)
    assert history[f"expert_{winner}_share"][0] == 1.0
    assert history["expert_perplexity"][0] == pytest.approx(1.0)
    assert np.abs(after[winner] - before[winner]).max() > 1e-4
    for k in set(range(3)) - {winner}:
        np.testing.assert_array_equal(after[k], before[k])
    # The shared parameters are trained too.
    others_after = [w.numpy() for w in model.decoder_layers[0].trainable_weights]
    assert max(np.abs(a - b).max() for a, b in zip(others_after, others_before, strict=True)) > 1e-4


def test_expert_choice_dropout_makes_the_e_step_noisy():
    overrides = dict(num_experts=4, dropout=0.5, num_decoder_layers=1)
    noisy = small_model(expert_choice_dropout=True, **overrides)
    clean = small_model(**overrides)
    batch = (inputs(), TARGET_OUT)
    four_times = (inputs(source=np.tile(SOURCE, [4, 1]), target_in=np.tile(TARGET_IN, [4, 1])),)
    four_times += (np.tile(TARGET_OUT, [4, 1]),)
    shares = {}
    for name, model in (("clean", clean), ("noisy", noisy)):
        # A zero learning rate keeps the model fixed, so only dropout can change the choices.
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss=model.head.loss())
        history = model.fit(*four_times, batch_size=24, epochs=5, verbose=0).history
        shares[name] = np.array([history[f"expert_{k}_share"] for k in range(4)])
    assert np.ptp(shares["clean"], axis=1).max() == 0.0
    assert np.ptp(shares["noisy"], axis=1).max() > 0.0
    # The same holds for `choose_experts` called directly.
    np.testing.assert_array_equal(
        clean.choose_experts(*batch).numpy(), clean.choose_experts(*batch).numpy()
    )
    draws = {tuple(clean.choose_experts(*batch, training=True).numpy()) for _ in range(5)}
    assert len(draws) > 1


@pytest.mark.parametrize(
    "head, overrides",
    [("softmax", {}), ("sigmoid", {"tie_embeddings": True, "normalize_first": True})],
)
def test_cached_decoding_of_each_expert_equals_its_full_forward_pass(head, overrides):
    model = small_model(head, **overrides)
    full = [model(inputs(np.full(6, k)), training=False).numpy() for k in range(3)]
    for k in range(3):
        target_in = TARGET_IN.copy()
        target_in[:, 0] = VOCAB + k
        stepped = stepped_logits(model, SOURCE, target_in)
        np.testing.assert_allclose(stepped, full[k], atol=1e-4)
    # BOS first is expert 0, in `call` and in its stepper's `decode_step`.
    np.testing.assert_allclose(model(inputs(), training=False).numpy(), full[0], atol=1e-6)
    np.testing.assert_allclose(stepped_logits(model, SOURCE, TARGET_IN), full[0], atol=1e-4)
    # The experts are different decoders.
    assert np.abs(full[1] - full[0]).max() > 1e-3
    # All experts at once: row b * K + k of the tiled batch is sentence b with expert k.
    experts = ParallelExperts(model)
    tiled_source = experts.tile_sources(SOURCE)
    stepped = stepped_logits(experts, tiled_source, np.repeat(TARGET_IN, 3, axis=0))
    np.testing.assert_allclose(stepped.reshape(6, 3, 6, VOCAB), np.stack(full, 1), atol=1e-4)


def stepped_logits(decoder, source, target_in):
    return harness.stepwise_logits(
        decoder, source, target_in, use_cross_cache=True, max_length=8
    ).numpy()


def reference_greedy(model, expert, source, length):
    """Greedy search for one expert by full forward passes over the growing prefix."""
    prefix = np.full((len(source), 1), 3)
    for _ in range(length):
        logits = model(inputs(np.full(len(source), expert), source, prefix), training=False)
        prefix = np.concatenate([prefix, logits[:, -1].numpy().argmax(-1)[:, None]], axis=1)
    return prefix[:, 1:]


def test_parallel_greedy_decoding_of_all_experts():
    model = small_model("sigmoid", num_experts=3)
    output = decode_experts(model, SOURCE, limits=OutputLimits(5, max_length_b=5))
    assert output.ids.shape == (6, 3, 5)
    ids, lengths = output.ids.numpy(), output.lengths.numpy()
    for k in range(3):
        expected = reference_greedy(model, k, SOURCE, 5)
        for b in range(6):
            n = lengths[b, k]
            np.testing.assert_array_equal(ids[b, k, :n], expected[b, :n])
            assert n == 5 or expected[b, n - 1] == 1
    assert (ids[:, 0] != ids[:, 1]).any()
    # The decoders are unchanged: greedy search of the tiled sources gives the same rows, also
    # compiled with XLA.
    experts = ParallelExperts(model)
    decode = tf.function(
        lambda source: greedy_decode(
            experts, source, max_length=5, max_length_b=5, jit_compile=True
        ),
        jit_compile=True,
    )
    compiled = decode(experts.tile_sources(SOURCE))
    np.testing.assert_array_equal(compiled.ids.numpy().reshape(6, 3, 5), ids)
    # Beam search runs per expert; a beam of one is greedy search.
    beams = decode_experts(
        model, SOURCE, Search("beam", OutputLimits(5, max_length_b=5), beam_size=1)
    )
    np.testing.assert_array_equal(beams.ids.numpy(), ids)
    wide = beam_search(experts, experts.tile_sources(SOURCE), beam_size=3, num_hypotheses=2)
    assert wide.ids.shape == (18, 2, 8)
    best_per_expert = decode_experts(model, SOURCE, Search("beam", beam_size=3, num_hypotheses=2))
    assert best_per_expert.ids.shape == (6, 6, 8)
    np.testing.assert_array_equal(best_per_expert.ids.numpy(), wide.ids.numpy().reshape(6, 6, 8))


def two_rewrite_task(count, seed, length=3, low=4, high=10):
    """Each source has two valid targets, its tokens +1 or +2, drawn at random per example."""
    rng = np.random.default_rng(seed)
    content = rng.integers(low, high, size=(count, length))
    plus_one, plus_two = content + 1, content + 2
    target = np.where(rng.integers(0, 2, size=(count, 1)).astype(bool), plus_one, plus_two)
    eos = np.ones((count, 1), np.int64)
    features = {
        "source_ids": np.concatenate([content, eos], axis=1),
        "target_in_ids": np.concatenate([np.full((count, 1), 3), target], axis=1),
    }
    rewrites = [np.concatenate([r, eos], axis=1) for r in (plus_one, plus_two)]
    return features, np.concatenate([target, eos], axis=1), rewrites


def train_toy_model(num_experts):
    model = LatentExpertTransformer.from_preset(
        "tiny",
        vocabulary_size=13,
        num_experts=num_experts,
        hidden_dim=64,
        intermediate_dim=128,
        num_encoder_layers=1,
        num_decoder_layers=1,
        max_sequence_length=4,
    )
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=model.head.loss(), jit_compile=False)
    features, targets, _ = two_rewrite_task(4096, seed=0)
    history = model.fit(features, targets, batch_size=64, epochs=6, verbose=0).history
    return model, history


@pytest.mark.slow  # 22 s: trains a hard MoE until each expert has learnt its rewrite
def test_hard_moe_learns_both_rewrites_one_per_expert():
    features, _, (plus_one, plus_two) = two_rewrite_task(200, seed=1)
    moe, history = train_toy_model(num_experts=2)
    # Neither expert died: each wins about half of the pairs (perplexity near K = 2).
    assert history["expert_perplexity"][-1] > 1.9
    ids = decode_experts(moe, features["source_ids"]).ids.numpy()
    matches = np.stack(
        [(ids == rewrite[:, None]).all(axis=-1) for rewrite in (plus_one, plus_two)], axis=1
    )  # [example, rewrite, expert]
    # Every expert returns a valid rewrite, and the two experts return different ones. Which
    # expert gives which rewrite may depend on the input: hard-EM splits each input's modes
    # between the experts, and nothing ties expert k to the same rewrite for every input.
    assert matches.any(axis=1).mean(axis=0).min() >= 0.9
    both = matches.any(axis=2).all(axis=1)
    assert both.mean() >= 0.8

    plain, _ = train_toy_model(num_experts=1)
    plain_ids = decode_experts(plain, features["source_ids"]).ids.numpy()
    plain_matches = np.stack(
        [(plain_ids == rewrite[:, None]).all(axis=-1) for rewrite in (plus_one, plus_two)], 1
    )
    # The plain model learnt the task, but its one greedy output gives one rewrite at most.
    assert plain_matches.any(axis=(1, 2)).mean() >= 0.5
    assert plain_matches.any(axis=2).all(axis=1).mean() == 0.0


@pytest.mark.parametrize(
    "head", [heads.SigmoidHead(), heads.EntmaxHead(alpha=1.5), heads.EntmaxHead(alpha=2.0)]
)
def test_one_training_step_with_every_head(head):
    model = small_model(head, num_experts=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=model.head.loss(), run_eagerly=True)
    history = model.fit(inputs(), TARGET_OUT, epochs=2, verbose=0).history
    assert np.isfinite(history["loss"]).all() and history["loss"][1] < history["loss"][0]
    assert history["expert_0_share"][0] + history["expert_1_share"][0] == pytest.approx(1.0)


def test_mixed_precision_e_step_and_training(global_policy):
    global_policy("mixed_float16")
    model = small_model("sigmoid", num_experts=3)
    assert model.expert_embedding.compute_dtype == "float16"
    assert model.expert_losses(inputs(), TARGET_OUT).dtype == tf.float32
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=model.head.loss(), run_eagerly=True)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    history = model.fit(inputs(), TARGET_OUT, epochs=2, verbose=0).history
    assert np.isfinite(history["loss"]).all() and history["loss"][1] < history["loss"][0]
    assert decode_experts(model, SOURCE, limits=OutputLimits(4)).ids.shape == (6, 3, 4)


def test_get_config_round_trip_and_save_load(tmp_path):
    model = small_model(heads.EntmaxHead(alpha=1.3), num_experts=4, tie_embeddings=True)
    config = model.get_config()
    assert config["num_experts"] == 4 and config["expert_choice_dropout"] is False
    clone = LatentExpertTransformer.from_config(config)
    assert clone.get_config() == config
    noisy = LatentExpertTransformer.from_config({**config, "expert_choice_dropout": True})
    assert noisy.expert_choice_dropout
    clone.set_weights(model.get_weights())
    batch = inputs([3, 2, 1, 0, 1, 2])
    np.testing.assert_array_equal(clone(batch).numpy(), model(batch).numpy())
    # `from_preset` of the base class builds the subclass, K extra embeddings and nothing else.
    preset = LatentExpertTransformer.from_preset("tiny", vocabulary_size=50, num_experts=5)
    assert isinstance(preset, LatentExpertTransformer) and preset.num_experts == 5
    # Saved and loaded, compiled and trained: same outputs, same config.
    model.compile(optimizer="adam", loss=model.head.loss(), run_eagerly=True)
    model.fit(inputs(), TARGET_OUT, verbose=0)
    restored = harness.saved_and_loaded(model, tmp_path)
    assert isinstance(restored, LatentExpertTransformer)
    assert restored.get_config() == model.get_config()
    np.testing.assert_array_equal(
        restored(batch, training=False).numpy(), model(batch, training=False).numpy()
    )
    np.testing.assert_array_equal(
        restored.expert_embedding.embeddings.numpy(), model.expert_embedding.embeddings.numpy()
    )


def test_invalid_number_of_experts():
    with pytest.raises(ValueError, match="num_experts"):
        small_model(num_experts=0)
