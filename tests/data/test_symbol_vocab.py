"""Symbol vocabularies: characters and language tags in, labels out, in the graph and back."""

import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from tests.g2p_words import WORDS
from tfscones.data import translation_dataset
from tfscones.data.symbol_vocab import (
    SymbolTokenizer,
    SymbolVocabularyError,
    count_unknown,
    language_tag,
    split_source,
    tagged_source,
)
from tfscones.data.tokenizer import load_tokenizer
from tfscones.data.vocab_ids import EOS_ID, UNK_ID


@pytest.fixture(scope="module")
def tokenizer():
    sources = [tagged_source(word, language) for language, (word, _) in WORDS.items()]
    targets = [phones for _, phones in WORDS.values()]
    return SymbolTokenizer.build(sources, targets, sorted(WORDS), normalization="NFD")


def expected_source_ids(tokenizer, language, word):
    ids = {symbol: index + 4 for index, symbol in enumerate(tokenizer.symbols)}
    characters = unicodedata.normalize("NFD", word)
    return [ids[language_tag(language)]] + [ids.get(c, UNK_ID) for c in characters]


@pytest.mark.parametrize("language", sorted(WORDS))
def test_a_word_of_every_script_becomes_its_tag_and_its_characters(tokenizer, language):
    word, phones = WORDS[language]
    source = tf.constant([tagged_source(word, language)])
    expected = expected_source_ids(tokenizer, language, word) + [EOS_ID]
    assert tokenizer.tokenize(source, add_eos=True).to_list() == [expected]
    graph = tf.function(lambda strings: tokenizer.tokenize(strings, add_eos=True))
    assert graph(source).to_list() == [expected]
    target = tokenizer.tokenize_target(tf.constant([phones]))
    assert len(target.to_list()[0]) == len(phones.split())  # `d͡z`, `˧˧`: one label each
    assert tokenizer.detokenize(target).numpy().tolist() == [phones.encode()]


def test_nfd_splits_hangul_into_jamo_and_nfc_keeps_syllables():
    source = tagged_source("가게", "kor")
    decomposed = SymbolTokenizer.build([source], ["k"], ["kor"], normalization="NFD")
    composed = SymbolTokenizer.build([source], ["k"], ["kor"], normalization="NFC")
    assert decomposed.tokenize(tf.constant(source)).shape == [1 + 4]  # tag, ᄀ ᅡ ᄀ ᅦ
    assert composed.tokenize(tf.constant(source)).shape == [1 + 2]  # tag, 가 게


def test_unknown_characters_labels_and_languages_become_the_unknown_symbol(tokenizer):
    sources = tf.constant(["fre\tœzf", "xyz\tœuf", "œuf"])
    ids = tokenizer.tokenize(sources)
    assert count_unknown(ids).numpy().tolist() == [1, 1, 1]  # z; language xyz; no language
    assert ids.to_list()[0][2] == UNK_ID
    targets = tokenizer.tokenize_target(tf.constant(["œ q f"]))
    assert count_unknown(targets).numpy().tolist() == [1]
    assert tokenizer.detokenize(targets).numpy().tolist() == ["œ <unk> f".encode()]


def test_detokenize_cuts_at_eos_and_drops_padding_and_bos(tokenizer):
    ids = tokenizer.tokenize_target(tf.constant(["œ f"])).to_list()[0]
    rows = tf.constant([[3, *ids, EOS_ID, ids[0], 0], [0] * (len(ids) + 4)])
    assert tokenizer.detokenize(rows).numpy().tolist() == [b"\xc5\x93 f", b""]


def test_the_vocabulary_file_round_trips_and_a_damaged_one_is_named(tokenizer, tmp_path):
    path = tmp_path / "symbols.json"
    tokenizer.save(path)
    loaded = load_tokenizer(path)
    assert isinstance(loaded, SymbolTokenizer)
    assert (loaded.symbols, loaded.languages, loaded.normalization) == (
        tokenizer.symbols,
        tokenizer.languages,
        "NFD",
    )
    assert [p.name for p in tmp_path.iterdir()] == ["symbols.json"]
    path.write_text(path.read_text(encoding="utf-8")[:40], encoding="utf-8")
    with pytest.raises(SymbolVocabularyError, match=r"symbols\.json is not a symbol vocabulary"):
        load_tokenizer(path)
    path.write_text('{"format": "tfscones-symbols", "symbols": []}', encoding="utf-8")
    with pytest.raises(SymbolVocabularyError, match="has no field 'languages'"):
        load_tokenizer(path)


@pytest.mark.parametrize(
    ("symbols", "languages", "normalization", "message"),
    [
        (["a", "a"], [], "NFC", "given twice"),
        (["<unk>"], [], "NFC", "special"),
        ([""], [], "NFC", "non-empty"),
        (["a"], ["fre"], "NFC", "no tag symbol for language"),
        (["a"], [], "NFX", "normalization must be one of"),
    ],
)
def test_vocabularies_that_cannot_work_are_refused(symbols, languages, normalization, message):
    with pytest.raises(SymbolVocabularyError, match=message):
        SymbolTokenizer(symbols, languages, normalization)


def test_a_source_of_an_unlisted_language_is_refused_when_building():
    with pytest.raises(SymbolVocabularyError, match="names language 'ice', not one of fre"):
        SymbolTokenizer.build(["ice\tá"], ["a"], ["fre"])
    assert split_source("fre\tabat") == ("fre", "abat")
    assert split_source("abat") == (None, "abat")


def test_training_batches_hold_the_words_and_pronunciations_of_every_script(tokenizer):
    pairs = tf.data.Dataset.from_tensor_slices(
        (
            [tagged_source(word, language) for language, (word, _) in WORDS.items()],
            [phones for _, phones in WORDS.values()],
        )
    )
    batches = translation_dataset(
        pairs, tokenizer, tokens_per_batch=256, max_length=32, shuffle_buffer_size=0
    )
    seen = {}
    for features, target_out in batches.as_numpy_iterator():
        for source, target in zip(features["source_ids"], target_out, strict=True):
            language = tokenizer.symbols[source[0] - 4].strip("<>")
            seen[language] = (source[source > 0].tolist(), target[target > 0])
    for language, (word, phones) in WORDS.items():
        source, target = seen[language]
        assert source == expected_source_ids(tokenizer, language, word) + [EOS_ID]
        assert tokenizer.detokenize(target[np.newaxis]).numpy()[0].decode() == phones


@pytest.mark.parametrize("language", sorted(WORDS))
def test_python_encode_and_decode_give_the_graphs_ids_and_text(tokenizer, language):
    word, phones = WORDS[language]
    source = tagged_source(word, language)
    assert tokenizer.encode(source) == tokenizer.tokenize(tf.constant(source)).numpy().tolist()
    assert (
        tokenizer.encode("xyz\tœzf") == tokenizer.tokenize(tf.constant("xyz\tœzf")).numpy().tolist()
    )
    labels = tokenizer.tokenize_target(tf.constant(phones)).numpy().tolist()
    assert tokenizer.decode([3, *labels, EOS_ID, labels[0]]) == phones
