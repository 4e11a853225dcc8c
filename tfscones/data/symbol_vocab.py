"""Vocabularies of symbols, not pieces: characters in, space-separated labels out (G2P).

A grapheme-to-phoneme model reads a word as its characters and writes its pronunciation as
labels (phones such as `d͡z` or `aː`, one label whatever its code points). `SymbolTokenizer`
is the `Tokenizer` of such a task, in the graph as the SentencePiece one is, so that the
SavedModel takes a word and returns phones:

- a source string is a word, or, for a multilingual vocabulary, `LANGUAGE<TAB>word`
  (`fre<TAB>abject`): the language becomes the tag symbol `<fre>` before the word's characters,
  as the multilingual models of the SIGMORPHON 2020 task (Peters & Martins 2021, §4.1) read it;
- the word is optionally Unicode-normalised (`NFD` decomposes Hangul syllables into their
  jamo and accented letters into letter and mark), then split into code points;
- a target string is split at whitespace into labels, and `detokenize` joins labels with one
  space, the shared task's format.

One id space holds the special ids (pad 0, eos 1, unk 2, bos 3), the language tags, the
characters and the labels (a grapheme `a` and a phone `a` share an id, as a joint SentencePiece
vocabulary shares pieces). A character, label or language outside the vocabulary becomes the
unknown symbol (id 2, `<unk>`), never a dropped one: `count_unknown` counts them, and
`tfscones translate` reports the count.

The vocabulary is a JSON file (`symbols.json` in a run folder), written by `save` and read by
`SymbolTokenizer.from_file`.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text

from tfscones.data.preprocessing import append_eos, padding_mask
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tfscones.written_aside import write_text_aside

SPECIAL_SYMBOLS = ("<pad>", "</s>", "<unk>", "<s>")
"""The symbols of ids 0-3 (`tfscones.data.vocab_ids`)."""
NORMALIZATIONS = ("NFC", "NFD", "NFKC", "NFKD", "none")
FILE_FORMAT = "tfscones-symbols"
LANGUAGE_SEPARATOR = "\t"


class SymbolVocabularyError(ValueError):
    """A symbol vocabulary that cannot be built or read; the message names the problem."""


def language_tag(language: str) -> str:
    """The tag symbol of a language: `<fre>` for `fre`."""
    return f"<{language}>"


def tagged_source(word: str, language: str | None) -> str:
    """The source string of a word: `LANGUAGE<TAB>word`, or the word alone without a language."""
    return word if language is None else f"{language}{LANGUAGE_SEPARATOR}{word}"


def split_source(source: str) -> tuple[str | None, str]:
    """`(language, word)` of a source string (language None if it carries none)."""
    language, separator, word = source.partition(LANGUAGE_SEPARATOR)
    return (language, word) if separator else (None, source)


class SymbolTokenizer(tf.Module):
    """Turns words into character ids and label ids back into pronunciations, in the graph.

    Example:
    ```python
    source = tagged_source("abat", "fre")  # the language, a tab, the word
    tokenizer = SymbolTokenizer.build(sources=[source], targets=["a b a"], languages=["fre"])
    ids = tokenizer.tokenize(tf.constant([source]), add_eos=True)  # <fre> a b a t </s>
    tokenizer.detokenize(tokenizer.tokenize_target(tf.constant(["a b a"])))  # [b"a b a"]
    ```

    Args:
        symbols: Every symbol after the four special ones, each once: language tags,
            characters and labels, in id order (id 4 first).
        languages: The languages whose tags are among `symbols`; empty for a vocabulary
            without language tags (its sources are words alone).
        normalization: The Unicode normalisation of source words before they are split
            (`NFC`, `NFD`, `NFKC`, `NFKD`, or `none`).
        name: Name of the `tf.Module`.

    Raises:
        SymbolVocabularyError: If a symbol is empty, repeats, or is a special symbol (a
            source character may be a space: Vietnamese words hold them); if a language's
            tag is missing; or if `normalization` is unknown.
    """

    def __init__(
        self,
        symbols: Sequence[str],
        languages: Sequence[str] = (),
        normalization: str = "NFC",
        name: str = "tokenizer",
    ):
        super().__init__(name=name)
        _check_symbols(symbols, languages, normalization)
        self.symbols = tuple(symbols)
        self.languages = tuple(languages)
        self.normalization = normalization
        every_symbol = SPECIAL_SYMBOLS + self.symbols
        self._id_to_symbol = tf.constant(every_symbol)
        self._symbol_to_id = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(every_symbol), tf.range(len(every_symbol), dtype=tf.int32)
            ),
            default_value=UNK_ID,
        )

    @classmethod
    def build(
        cls,
        sources: Iterable[str],
        targets: Iterable[str],
        languages: Sequence[str] = (),
        normalization: str = "NFC",
    ) -> SymbolTokenizer:
        """The vocabulary of a training set: its languages' tags, characters and labels.

        Args:
            sources: Source strings (`LANGUAGE<TAB>word`, or words when `languages` is empty).
            targets: Their pronunciations, labels separated by spaces.
            languages: The languages to tag, in the order their tags get ids.
            normalization: As for the constructor.

        Raises:
            SymbolVocabularyError: If a source names a language outside `languages`, or a
                symbol of the data is one of the special symbols.
        """
        characters: set[str] = set()
        for source in sources:
            language, word = split_source(source) if languages else (None, source)
            if languages and language not in languages:
                raise SymbolVocabularyError(
                    f"source {source!r} names language {language!r}, not one of "
                    f"{', '.join(languages)}"
                )
            characters.update(_normalized(word, normalization))
        labels = {label for target in targets for label in target.split()}
        tags = [language_tag(language) for language in languages]
        return cls(tags + sorted((characters | labels) - set(tags)), languages, normalization)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> SymbolTokenizer:
        """Reads a vocabulary that `save` wrote.

        Raises:
            FileNotFoundError: If `path` does not exist.
            SymbolVocabularyError: If it is not such a file (naming the file and the problem).
        """
        try:
            content = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise SymbolVocabularyError(
                f"{path} is not a symbol vocabulary (not JSON: {error})"
            ) from None
        if not isinstance(content, dict) or content.get("format") != FILE_FORMAT:
            raise SymbolVocabularyError(
                f'{path} is not a symbol vocabulary (no "format": "{FILE_FORMAT}")'
            )
        try:
            return cls(content["symbols"], content["languages"], content["normalization"])
        except KeyError as error:
            raise SymbolVocabularyError(f"{path} has no field {error}") from None
        except (SymbolVocabularyError, TypeError) as error:
            raise SymbolVocabularyError(f"{path}: {error}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Writes the vocabulary as JSON, aside and then renamed into place."""
        path = Path(path)
        content = {
            "format": FILE_FORMAT,
            "normalization": self.normalization,
            "languages": list(self.languages),
            "symbols": list(self.symbols),
        }
        write_text_aside(path, json.dumps(content, ensure_ascii=False, indent=1) + "\n")

    @property
    def vocab_size(self) -> int:
        """Number of symbols, special ones included."""
        return len(SPECIAL_SYMBOLS) + len(self.symbols)

    def tokenize(self, strings: tf.Tensor, add_eos: bool = False) -> tf.Tensor | tf.RaggedTensor:
        """Source ids: the language's tag (multilingual vocabularies), then the characters.

        Args:
            strings: A scalar or 1-D string tensor of sources (see the module docstring). A
                source without a language, for a multilingual vocabulary, gets the unknown
                symbol as its tag.
            add_eos: Append EOS (id 1).

        Returns:
            int32 ids: 1-D for a scalar, else a `tf.RaggedTensor` `[batch, None]`.
        """
        return self._per_string(strings, self._source_ids, add_eos)

    def tokenize_target(
        self, strings: tf.Tensor, add_eos: bool = False
    ) -> tf.Tensor | tf.RaggedTensor:
        """Target ids: the whitespace-separated labels of each pronunciation."""
        return self._per_string(strings, self._target_ids, add_eos)

    def id_to_piece(self, ids: tf.Tensor) -> tf.Tensor:
        """Each id's symbol: a character, a label, a language tag or a special symbol."""
        return tf.gather(self._id_to_symbol, tf.cast(ids, tf.int32))

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
        """Labels joined by spaces, each sequence cut at its first EOS, PAD and BOS dropped.

        Args:
            ids: Integer ids `[..., length]`, dense or ragged.

        Returns:
            A string tensor of shape `ids.shape[:-1]`.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(ids, tf.int32)
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
        keep = before_eos & padding_mask(ids) & tf.not_equal(ids, BOS_ID)
        symbols = tf.gather(self._id_to_symbol, tf.where(keep, ids, PAD_ID))
        return tf.strings.reduce_join(tf.ragged.boolean_mask(symbols, keep), axis=-1, separator=" ")

    def encode(self, source: str) -> list[int]:
        """`tokenize` of one source in Python, without EOS: the same ids as the graph's.

        For runtimes that run no TensorFlow ops, such as the CTranslate2 translator.
        """
        language, word = split_source(source) if self.languages else (None, source)
        ids = {symbol: index for index, symbol in enumerate(SPECIAL_SYMBOLS + self.symbols)}
        characters = [ids.get(c, UNK_ID) for c in _normalized(word, self.normalization)]
        if not self.languages:
            return characters
        tag = UNK_ID if language is None else ids.get(language_tag(language), UNK_ID)
        return [tag, *characters]

    def decode(self, ids: Sequence[int]) -> str:
        """`detokenize` of one row in Python: labels joined by spaces, up to the first EOS."""
        every_symbol = SPECIAL_SYMBOLS + self.symbols
        labels = []
        for index in ids:
            if index == EOS_ID:
                break
            if index not in (PAD_ID, BOS_ID):
                labels.append(every_symbol[index])
        return " ".join(labels)

    def _per_string(self, strings, ids_of, add_eos: bool):
        strings = tf.convert_to_tensor(strings, tf.string)
        if strings.shape.rank not in (0, 1):
            raise ValueError(f"strings must be a scalar or 1-D, got shape {strings.shape}")
        ids = ids_of(tf.reshape(strings, [-1]))
        if add_eos:
            ids = append_eos(ids)
        return ids[0] if strings.shape.rank == 0 else ids

    def _source_ids(self, strings: tf.Tensor) -> tf.RaggedTensor:
        words = strings
        if self.languages:
            has_language = tf.strings.regex_full_match(strings, "(?s)[^\t]*\t.*")
            words = tf.where(has_language, tf.strings.regex_replace(strings, "^[^\t]*\t", ""), "")
            words = tf.where(has_language, words, strings)
        if self.normalization != "none":
            words = tf_text.normalize_utf8(words, self.normalization)
        characters = tf.strings.unicode_split(words, "UTF-8", errors="replace")
        ids = tf.ragged.map_flat_values(self._symbol_to_id.lookup, characters)
        if not self.languages:
            return ids
        languages = tf.strings.regex_replace(strings, "(?s)\t.*", "")
        tags = self._symbol_to_id.lookup(tf.strings.join(["<", languages, ">"]))
        tags = tf.where(has_language, tags, UNK_ID)
        return tf.concat([tf.RaggedTensor.from_tensor(tags[:, tf.newaxis]), ids], axis=1)

    def _target_ids(self, strings: tf.Tensor) -> tf.RaggedTensor:
        return tf.ragged.map_flat_values(self._symbol_to_id.lookup, tf.strings.split(strings))


def count_unknown(ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor:
    """How many unknown symbols (id 2) each row of ids holds: int32 `ids.shape[:-1]`."""
    unknown = tf.cast(tf.equal(ids, UNK_ID), tf.int32)
    return tf.reduce_sum(unknown, axis=-1)


def _normalized(word: str, normalization: str) -> str:
    """The word as `SymbolTokenizer` normalises it before splitting (in Python)."""
    return word if normalization == "none" else unicodedata.normalize(normalization, word)


def _check_symbols(symbols: Sequence[str], languages: Sequence[str], normalization: str):
    if normalization not in NORMALIZATIONS:
        raise SymbolVocabularyError(
            f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {normalization!r}"
        )
    seen: set[str] = set()
    for symbol in symbols:
        if not isinstance(symbol, str) or not symbol:
            raise SymbolVocabularyError(f"symbol {symbol!r} must be a non-empty string")
        if symbol in SPECIAL_SYMBOLS or symbol in seen:
            raise SymbolVocabularyError(f"symbol {symbol!r} is special or given twice")
        seen.add(symbol)
    missing = [language for language in languages if language_tag(language) not in seen]
    if missing:
        raise SymbolVocabularyError(f"no tag symbol for language(s) {', '.join(missing)}")
