"""`Ensemble`: N models decoded as one, each token scored by the log of the mean probability."""

import random

import numpy as np
import pytest
import tensorflow as tf

from tests import harness
from tfscones import heads
from tfscones.commands import translate as translate_command
from tfscones.data import Tokenizer, train_sentencepiece
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID
from tfscones.decoding import (
    Ensemble,
    Search,
    beam_search,
    compiled_search,
    decoder_names,
    exact_search,
    greedy_decode,
    teacher_forced,
    translate,
)
from tfscones.heads.entmax import entmax_logits_of

A, B, C, D = 4, 5, 6, 7
VOCAB = 8  # pad, eos, unk, bos, then the words A, B, C and D.
# What each model gives the first token (after BOS); every later token is EOS. Model 1 prefers
# A and model 2 B, but the mean probability prefers C (0.245 against 0.23 for A and B, 0.2 for
# D, 0.095 for EOS alone); the mean of the log-probabilities (a product of experts) would pick
# D, and the larger of the two models' probabilities A or B.
FIRST_TOKEN = {
    "model 1": {A: 0.46, C: 0.44, D: 0.10},
    "model 2": {B: 0.46, C: 0.05, D: 0.30, EOS_ID: 0.19},
}
SOURCE = tf.constant([[A, B, EOS_ID]], tf.int32)


def bigram_probabilities(first_token: dict[int, float]) -> np.ndarray:
    """`[previous token, next token]` probabilities: `first_token` after BOS, EOS after others."""
    probabilities = np.zeros([VOCAB, VOCAB])
    probabilities[:, EOS_ID] = 1.0
    probabilities[BOS_ID] = 0.0
    for token, probability in first_token.items():
        probabilities[BOS_ID, token] = probability
    return probabilities


def logits_of(head_name: str, probabilities: np.ndarray) -> np.ndarray:
    """Logits whose `head_name` probabilities are `probabilities` (zeros kept by entmax only)."""
    head = harness.EVERY_HEAD[head_name]
    if isinstance(head, heads.EntmaxHead):
        return entmax_logits_of(tf.constant(probabilities, tf.float32), head.alpha).numpy()
    floored = np.clip(probabilities, 1e-4, 1.0 - 1e-4)
    sigmoid_logits = np.log(floored) - np.log1p(-floored)
    return {
        "softmax": np.log(floored / floored.sum(-1, keepdims=True)),
        "sigmoid": sigmoid_logits,
        "tanh": sigmoid_logits / 2.0,
    }[head_name]


class BigramModel(harness.FakeStepModel):
    """A fake model whose next-token logits depend on the token fed alone: `table[token]`."""

    def __init__(self, table, head, vocabulary_size=VOCAB, max_sequence_length=4):
        super().__init__(table, head, max_sequence_length)
        self.vocabulary_size = vocabulary_size

    def step_logits(self, token_ids, index, encoder_outputs, cross_attention_cache, cache):
        return tf.gather(self.table, token_ids), cache


def bigram_models(head_name: str) -> list[BigramModel]:
    return [
        BigramModel(logits_of(head_name, bigram_probabilities(first)), head_name)
        for first in FIRST_TOKEN.values()
    ]


def best(output) -> list[int]:
    """The best hypothesis of sentence 0, EOS included."""
    ids = output.ids if output.ids.shape.rank == 2 else output.ids[:, 0]
    lengths = output.lengths if output.lengths.shape.rank == 1 else output.lengths[:, 0]
    return ids[0, : lengths[0]].numpy().tolist()


@pytest.mark.parametrize("head_name", harness.EVERY_HEAD)
def test_only_the_mean_probability_finds_what_neither_model_prefers(head_name):
    members = bigram_models(head_name)
    head = members[0].head
    probabilities = [head.probabilities(model.table).numpy() for model in members]
    mean = np.mean(probabilities, axis=0)[BOS_ID]
    with np.errstate(divide="ignore"):
        product = np.mean(np.log(probabilities), axis=0)[BOS_ID]
    # The table tells the combinations apart: mean C, product of experts D, members A and B.
    assert mean.argmax() == C and product.argmax() == D
    for model, first in zip(members, (A, B), strict=True):
        assert best(greedy_decode(model, SOURCE)) == [first, EOS_ID]
        assert best(beam_search(model, SOURCE, beam_size=4)) == [first, EOS_ID]
    ensemble = Ensemble(members)
    expected_score = np.log(mean[C]) + np.log(np.mean(probabilities, axis=0)[C, EOS_ID])
    for output in (greedy_decode(ensemble, SOURCE), beam_search(ensemble, SOURCE, beam_size=4)):
        assert best(output) == [C, EOS_ID]
        np.testing.assert_allclose(np.ravel(output.scores)[0], expected_score, atol=1e-5)


def test_xla_compiled_beam_search_steps_the_tuple_caches():
    ensemble = Ensemble(bigram_models("sigmoid"))
    decode = compiled_search(ensemble, Search("beam", beam_size=4), jit_compile=True)
    assert best(decode(SOURCE)) == [C, EOS_ID]


def test_exact_search_decodes_an_ensemble_of_one_and_refuses_more():
    first, second = bigram_models("softmax")
    (result,) = exact_search(Ensemble([first]), SOURCE)
    assert result.ids == (A, EOS_ID) and result.complete
    with pytest.raises(ValueError, match="initial_cache has 2 tensors"):
        exact_search(Ensemble([first, second]), SOURCE)


def test_the_experts_search_refuses_an_ensemble():
    with pytest.raises(ValueError, match="needs a model with latent experts"):
        Search("experts").decode(Ensemble(bigram_models("softmax")), SOURCE)


def test_models_of_other_heads_or_vocabularies_are_refused_by_name():
    table = np.zeros([VOCAB, VOCAB], np.float32)
    softmax, sigmoid = BigramModel(table, "softmax"), BigramModel(table, "sigmoid")
    with pytest.raises(ValueError, match=r"model 0 has SoftmaxHead\(\), model 1 has SigmoidHead"):
        Ensemble([softmax, sigmoid])
    wider = BigramModel(np.zeros([VOCAB, VOCAB + 1], np.float32), "softmax", VOCAB + 1)
    with pytest.raises(ValueError, match="model 0 has 8 tokens, model 2 has 9"):
        Ensemble([softmax, softmax, wider])
    with pytest.raises(ValueError, match="at least one model"):
        Ensemble([])


def test_the_ensemble_reads_as_many_positions_as_its_shortest_model():
    table = np.zeros([VOCAB, VOCAB], np.float32)
    ensemble = Ensemble([BigramModel(table, "softmax", max_sequence_length=n) for n in (9, 5, 7)])
    assert ensemble.max_sequence_length == 5 == ensemble.stepper().max_sequence_length


SOURCES = tf.constant([[5, 6, 7, 1], [8, 9, 1, 0]], tf.int32)


@pytest.fixture(scope="module")
def real_models():
    """Two tiny models of every head, EOS made likely so that outputs end early."""
    return {
        name: [harness.tiny_model(24, head, eos_bias=1.5) for _ in range(2)]
        for name, head in harness.EVERY_HEAD.items()
    }


def same_output(first, second):
    np.testing.assert_array_equal(first.ids.numpy(), second.ids.numpy())
    np.testing.assert_array_equal(first.lengths.numpy(), second.lengths.numpy())
    np.testing.assert_allclose(first.scores.numpy(), second.scores.numpy(), atol=1e-5)


@pytest.mark.parametrize("head_name", harness.EVERY_HEAD)
def test_an_ensemble_of_one_decodes_as_the_model_itself(real_models, head_name):
    model = real_models[head_name][0]
    alone = Ensemble([model])
    same_output(greedy_decode(alone, SOURCES), greedy_decode(model, SOURCES))
    beam = {"beam_size": 3, "num_hypotheses": 3}
    same_output(beam_search(alone, SOURCES, **beam), beam_search(model, SOURCES, **beam))


@pytest.mark.parametrize("head_name", harness.EVERY_HEAD)
@pytest.mark.parametrize("growing", [False, True])
def test_step_scores_are_the_log_of_the_models_mean_probability(real_models, head_name, growing):
    models = real_models[head_name]
    head = models[0].head
    source, target_in = SOURCES.numpy(), np.array([[BOS_ID, 5, 9, 4], [BOS_ID, 11, 1, PAD_ID]])
    members = [
        head.probabilities(harness.stepwise_logits(model, source, target_in)).numpy()
        for model in models
    ]
    mean = np.mean(members, axis=0)
    ensemble = Ensemble(models)
    logits = harness.stepwise_logits(
        ensemble, source, target_in, use_cross_cache=growing, growing=growing
    )
    # Teacher forcing (what `score_texts` reads) combines the models' calls the same way.
    target = np.array([[5, 9, 4, EOS_ID], [11, EOS_ID, PAD_ID, PAD_ID]], np.int32)
    forced = teacher_forced(ensemble, SOURCES, tf.constant(target)).log_scores
    for scores in (head.log_scores(logits).numpy(), forced.numpy()):
        np.testing.assert_array_equal(np.isneginf(scores), mean == 0.0)  # entmax's zeros
        np.testing.assert_allclose(np.exp(scores), mean, atol=1e-6)


@pytest.mark.parametrize("method", [name for name in decoder_names() if name != "experts"])
def test_every_decoder_scores_its_hypotheses_under_the_ensemble(real_models, method):
    ensemble = Ensemble(real_models["sigmoid"])
    search = {"beam": {"beam_size": 3}, "diverse_beam": {"beam_size": 4, "num_groups": 2}}
    output = Search(method, **search.get(method, {})).decode(ensemble, SOURCES)
    count, width = output.ids.shape[1], output.ids.shape[2]
    sources = tf.repeat(SOURCES, count, axis=0)
    rescored = teacher_forced(ensemble, sources, tf.reshape(output.ids, [-1, width])).scores
    np.testing.assert_allclose(
        np.reshape(rescored.numpy(), [-1, count]), output.log_scores.numpy(), atol=1e-4
    )


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
    rng = random.Random(0)
    words = "the a cat dog sat ran on under mat tree big small red green and but".split()
    lines = [" ".join(rng.choices(words, k=rng.randint(1, 8))) for _ in range(200)]
    folder = tmp_path_factory.mktemp("spm")
    text = folder / "train.txt"
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return train_sentencepiece([text], folder / "spm", vocab_size=32).model_file


SENTENCES = ["the big dog ran under the green tree", "", "a cat"]


def test_translate_takes_an_ensemble(spm_file):
    # A copying model and one that knows nothing (every logit 0): the mean still copies.
    tokenizer = Tokenizer.from_file(spm_file)
    size = tokenizer.vocab_size
    ensemble = Ensemble(
        [harness.CopyModel(size, 32, peak=10.0), harness.CopyModel(size, 24, peak=0.0)]
    )
    assert translate(ensemble, tokenizer, SENTENCES, batch_size=2) == SENTENCES
    beam = Search("beam", beam_size=2)
    assert translate(ensemble, tokenizer, SENTENCES, search=beam) == SENTENCES


def test_the_translate_command_decodes_an_ensemble_of_models(spm_file, tmp_path):
    size = Tokenizer.from_file(spm_file).vocab_size
    paths = []
    for index, vocabulary_size in enumerate((size, size, size + 1)):
        paths.append(tmp_path / f"model{index}.keras")
        harness.tiny_model(vocabulary_size, "sigmoid", eos_bias=2.0).save(paths[-1])
    source, output = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(line + "\n" for line in SENTENCES), encoding="utf-8")
    files = ["--spm", spm_file, "--input", source, "--output", output]
    twins = ["--model", paths[0], "--model", paths[1], *files]
    translate_command.main([str(argument) for argument in twins + ["--search", "beam"]])
    assert len(output.read_text(encoding="utf-8").splitlines()) == len(SENTENCES)
    mismatched = ["--model", paths[0], "--model", paths[2], *files]
    with pytest.raises(SystemExit, match=f"model 0 has {size} tokens, model 1 has {size + 1}"):
        translate_command.main([str(argument) for argument in mismatched])
