"""A decoder defined here, in one module with one registry entry, reaches every consumer.

No other file knows it: `Search` builds and checks its settings, `tfscones translate` makes its
flag, and a `TranslationModule` exports it as a SavedModel signature.
"""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfscones.commands import translate as translate_command
from tfscones.data.vocab_ids import EOS_ID
from tfscones.decoding import NBest, OutputLimits, Search, registry
from tfscones.decoding.registry import Decoder, register, setting
from tfscones.ranges import AT_LEAST_ONE
from tfscones.serving import TranslationModule, write_savedmodel


@dataclasses.dataclass(frozen=True)
class FirstPieceSettings:
    repeats: int = setting(1, "--repeats", "times the first source piece is repeated")

    def __post_init__(self):
        AT_LEAST_ONE.check("repeats", self.repeats)


def first_piece(stepper, source_ids, settings, limits, jit_compile) -> NBest:
    """The source's first piece `repeats` times, then EOS: a decoder whose output is known."""
    first = tf.repeat(source_ids[:, :1], settings.repeats, axis=1)
    ids = tf.concat([first, tf.fill([tf.shape(source_ids)[0], 1], EOS_ID)], axis=1)
    batch = tf.shape(ids)[0]
    zeros = tf.zeros([batch, 1])
    lengths = tf.fill([batch, 1], settings.repeats + 1)
    return NBest(ids[:, tf.newaxis], lengths, zeros, zeros, tf.zeros_like(ids, tf.float32)[:, None])


FIRST_PIECE = Decoder(
    "first_piece", "the first source piece, repeated", FirstPieceSettings, first_piece
)


@pytest.fixture
def registered(monkeypatch):
    """The registry with `first_piece` added, for one test."""
    monkeypatch.setattr(registry, "_DECODERS", dict(registry._DECODERS))
    return register(FIRST_PIECE)


def test_search_builds_and_checks_its_settings(registered, model):
    source = tf.constant([[7, 8, EOS_ID], [9, EOS_ID, 0]])
    output = Search("first_piece", repeats=2).decode(model, source)
    np.testing.assert_array_equal(output.ids[:, 0], [[7, 7, EOS_ID], [9, 9, EOS_ID]])
    with pytest.raises(ValueError, match="repeats must be a whole number in"):
        Search("first_piece", repeats=0)
    with pytest.raises(ValueError, match="first_piece search has no setting beam_size"):
        Search("first_piece", beam_size=2)


def test_the_translate_command_makes_its_flag(registered, tmp_path):
    (tmp_path / "model.keras").touch()
    (tmp_path / "spm.model").touch()
    run = ["--run", str(tmp_path)]
    arguments = translate_command.parse_arguments(
        [*run, "--search", "first_piece", "--repeats", "3"]
    )
    assert arguments.search == Search("first_piece", repeats=3)
    with pytest.raises(SystemExit):
        translate_command.parse_arguments([*run, "--repeats", "3"])  # greedy has no repeats


def test_a_translation_module_exports_it_as_a_signature(registered, model, tokenizer, tmp_path):
    searches = {"translate": Search(), "first": Search("first_piece", repeats=2)}
    module = TranslationModule(model, tokenizer, searches)
    assert module.signature_names[:2] == ("translate", "first")
    assert module.searches["first"].limits == OutputLimits(model.max_sequence_length)
    sentences = tf.constant(["Guten Morgen.", ""])
    first = tokenizer.tokenize(sentences[:1])[0, 0]
    expected = tokenizer.detokenize(tf.stack([first, first])[tf.newaxis]).numpy()[0]
    assert module.first(sentences)["translations"].numpy().tolist() == [expected, b""]
    write_savedmodel(module, tmp_path / "first" / "1")
    loaded = tf.saved_model.load(str(tmp_path / "first" / "1"))
    served = loaded.signatures["first"](source=sentences)["translations"]
    assert served.numpy().tolist() == [expected, b""]
