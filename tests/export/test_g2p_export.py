"""A word of every script through every path: `translate`, the SavedModel and CTranslate2.

A tiny softmax model learns the pronunciations of one word of each script of the SIGMORPHON
2020 data (Hangul, Devanagari, Georgian, Armenian, hiragana, Vietnamese with a space and tone
marks, French); each path must then give back those phones from the word and its language.
"""

import json
import subprocess
import sys

import keras
import pytest
import tensorflow as tf

from tests import harness
from tests.g2p_words import WORDS
from tfscones import decoding
from tfscones.commands import export as export_command
from tfscones.commands import translate as translate_command
from tfscones.data import translation_dataset
from tfscones.data.symbol_vocab import SymbolTokenizer, tagged_source

SOURCES = [tagged_source(word, language) for language, (word, _) in WORDS.items()]
PHONES = [phones for _, phones in WORDS.values()]


@pytest.fixture(scope="module")
def g2p_run(tmp_path_factory):
    """A run folder of a symbol vocabulary and a tiny model that has learnt the seven words."""
    folder = tmp_path_factory.mktemp("g2p-run")
    tokenizer = SymbolTokenizer.build(SOURCES, PHONES, sorted(WORDS), normalization="NFD")
    tokenizer.save(folder / "symbols.json")
    keras.utils.set_random_seed(5)
    model = harness.small_model(
        tokenizer.vocab_size,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=64,
        num_heads=4,
        intermediate_dim=128,
        max_sequence_length=32,
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=model.head.loss())
    pairs = tf.data.Dataset.from_tensor_slices((SOURCES, PHONES))
    batches = translation_dataset(
        pairs, tokenizer, tokens_per_batch=512, max_length=30, shuffle_buffer_size=0
    )
    model.fit(batches.repeat(), steps_per_epoch=150, epochs=1, verbose=0, shuffle=False)
    model.save(folder / "model.keras")
    return folder, model, tokenizer


@pytest.mark.slow  # 60 s with the fixture: a tiny model learns seven words, beam 5 compiles
def test_translate_gives_back_the_phones_of_a_word_of_every_script(g2p_run):
    _, model, tokenizer = g2p_run
    assert decoding.translate(model, tokenizer, SOURCES) == PHONES
    beam = decoding.translate(
        model, tokenizer, SOURCES, search=decoding.Search("beam", beam_size=5)
    )
    assert beam == PHONES


LOAD_AND_TRANSLATE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the text ops, as TF Serving links them
loaded = tf.saved_model.load(sys.argv[1])
sources = tf.constant(json.loads(sys.argv[2]))
greedy = loaded.signatures["translate"](source=sources)
scored = loaded.signatures["score"](source=sources, target=tf.constant(json.loads(sys.argv[3])))
print(json.dumps({
    "translations": [t.decode() for t in greedy["translations"].numpy()],
    "unknown": greedy["source_unknown"].numpy().tolist(),
    "lengths": scored["lengths"].numpy().tolist(),
}))
"""


@pytest.mark.slow  # 50 s: an export, and a process that loads it
def test_the_savedmodel_takes_a_word_and_a_language_and_returns_its_phones(g2p_run, tmp_path):
    folder, _, _ = g2p_run
    out = tmp_path / "g2p" / "1"
    export_command.main(["--run", str(folder), "--out", str(out), "--max-batch-size", "16"])
    sources = [*SOURCES, "fre\tœzf", "xyz\tœuf"]
    printed = subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_AND_TRANSLATE,
            str(out),
            json.dumps(sources),
            json.dumps([*PHONES, "œ f", "œ f"]),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result = json.loads(printed)
    assert result["translations"][: len(PHONES)] == PHONES
    assert result["unknown"] == [0] * len(PHONES) + [1, 1]  # z; the language xyz
    assert result["lengths"] == [len(phones.split()) + 1 for phones in PHONES] + [3, 3]


@pytest.mark.slow  # 10 s after the fixture
def test_the_ctranslate2_export_translates_every_script_as_the_savedmodel(g2p_run, tmp_path):
    pytest.importorskip("ctranslate2", reason="CTranslate2 is an optional dependency")
    from tfscones.serving.ctranslate2_translator import CTranslate2Translator

    folder, _, _ = g2p_run
    out = tmp_path / "ct2"
    export_command.main(["--run", str(folder), "--format", "ctranslate2", "--out", str(out)])
    assert (out / "symbols.json").is_file() and not (out / "sentencepiece.model").exists()
    translator = CTranslate2Translator(out)
    assert [t.text for t in translator.translate(SOURCES)] == PHONES
    assert [t.text for t in translator.translate(SOURCES, beam_size=5)] == PHONES
    readme = (out / "README.md").read_text(encoding="utf-8")
    code = readme.split("```python\n")[1].split("```")[0]
    words = [(language, word) for language, (word, _) in WORDS.items()]
    code = code.replace('[("fre", "abject")]', repr(words))
    printed = subprocess.run(
        [sys.executable, "-c", code], cwd=out, capture_output=True, text=True, check=True
    ).stdout
    assert eval(printed) == PHONES  # noqa: S307 -- the README's own print of a list


@pytest.mark.slow  # 10 s after the fixture
def test_translate_scores_tsv_files_by_wer_and_per_per_language(g2p_run, tmp_path, capsys):
    folder, _, _ = g2p_run
    files = []
    for language in ("kor", "vie"):
        word, phones = WORDS[language]
        wrong = "x" if language == "vie" else phones  # one wrong word: WER 50, PER 100 for vie
        path = tmp_path / f"{language}_test.tsv"
        path.write_text(f"{word}\t{phones}\n{word}\t{wrong}\n", encoding="utf-8")
        files += ["--tsv", str(path)]
    translate_command.main(["--run", str(folder), *files])
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [WORDS["kor"][1]] * 2 + [WORDS["vie"][1]] * 2
    vie_labels = len(WORDS["vie"][1].split())
    assert "| kor | 2 | 0.00 | 0.00 |" in captured.err
    assert f"| vie | 2 | 50.00 | {100 * vie_labels / (vie_labels + 1):.2f} |" in captured.err
    assert "| mean of languages | 4 | 25.00 |" in captured.err
