"""A config's splits (`train`, `dev`, `test`): where their pairs come from and how they read.

`data.source` names the reader: `text` (aligned sentence files, `tfscones.data.parallel_text`),
`tfds` (a TensorFlow Datasets translation set) or `tsv` (pronunciation dictionaries,
`tfscones.data.pronunciation_tsv`, one file a language). Every reader gives the same thing, a
`tf.data.Dataset` of `(source, target)` strings, so training, evaluation and the reproduction
plans never ask which one they have. `split_languages` gives each source's language (for a
macro-averaged metric) or None.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tfscones.data import load_tfds_pairs, read_parallel_text, read_reference_streams
from tfscones.data.pronunciation_tsv import (
    Pronunciations,
    language_of_file,
    read_pronunciation_files,
)
from tfscones.data.symbol_vocab import split_source
from tfscones.training.config import ConfigError, ExperimentConfig, data_path

LANGUAGE_FIELD = "{language}"


def pairs_dataset(config: ExperimentConfig, split: str) -> tf.data.Dataset:
    """The `(source, target)` string pairs of a split (`train`, `dev` or `test`).

    Raises:
        ConfigError: If the config does not say where the split is.
    """
    data = config.data
    if data.source == "tsv":
        return pronunciations(config, split).dataset()
    if data.source == "text":
        pairs = None
        for source, target in text_files(config, split):
            corpus = read_parallel_text(source, target, on_bad_line=data.on_bad_line).dataset()
            pairs = corpus if pairs is None else pairs.concatenate(corpus)
        return pairs
    if data.source == "tfds":
        if not (data.tfds_name and data.source_language and data.target_language):
            raise ConfigError(
                "data.tfds_name, source_language and target_language must be set.", "data.source"
            )
        tfds_split = {"train": "train", "dev": data.dev_split, "test": data.test_split}[split]
        return load_tfds_pairs(
            data.tfds_name,
            data.source_language,
            data.target_language,
            split=tfds_split,
            data_dir=data.tfds_data_dir,
        )
    raise ConfigError(f"must be text, tfds or tsv (got {data.source!r}).", "data.source")


def text_files(config: ExperimentConfig, split: str) -> list[tuple[str, str]]:
    """The `(source, target)` file pairs of a split of a `source: text` config.

    Raises:
        ConfigError: If the files are not set, or the two sides list different numbers of files.
    """
    source = getattr(config.data, f"{split}_source")
    target = getattr(config.data, f"{split}_target")
    if not source or not target:
        raise ConfigError(
            f"data.{split}_source and data.{split}_target must be set.", f"data.{split}_source"
        )
    sources = [source] if isinstance(source, str) else source
    targets = [target] if isinstance(target, str) else target
    if len(sources) != len(targets) or not all(isinstance(f, str) for f in sources + targets):
        raise ConfigError(
            f"data.{split}_source and data.{split}_target must be two file names or two lists "
            f"of as many file names (got {source!r} and {target!r}).",
            f"data.{split}_source",
        )
    return [
        (str(data_path(source)), str(data_path(target)))
        for source, target in zip(sources, targets, strict=True)
    ]


def sentence_pairs(config: ExperimentConfig, split: str, limit: int | None = None):
    """The pairs of a split as two lists of Python strings (for BLEU)."""
    pairs = pairs_dataset(config, split)
    if limit:
        pairs = pairs.take(limit)
    sources, targets = [], []
    for source, target in pairs.as_numpy_iterator():
        sources.append(source.decode("utf-8"))
        targets.append(target.decode("utf-8"))
    return sources, targets


def scored_test_set(config: ExperimentConfig, limit: int | None = None):
    """The test sources and their reference streams, as lists of Python strings.

    Example:
    ```python
    sources, streams = scored_test_set(config)
    metrics.corpus_bleu(hypotheses, streams)  # Against every reference at once.
    ```

    Args:
        config: The experiment; `data.test_references` may name further references.
        limit: The first this many sentences only (None: all).

    Returns:
        `(sources, streams)`: `streams[0]` holds the test targets, then one stream a file of
        `data.test_references`, each as long as `sources`.

    Raises:
        tfscones.data.ParallelTextError: If a reference file's line count differs from the
            source's, or one of its lines is bad (naming the file and line).
    """
    data = config.data
    if not data.test_references:
        sources, targets = sentence_pairs(config, "test", limit)
        return sources, [targets]
    references = [data_path(path) for path in (data.test_target, *data.test_references)]
    sources, streams = read_reference_streams(data_path(data.test_source), references)
    return sources[:limit], [stream[:limit] for stream in streams]


def tsv_files(config: ExperimentConfig, split: str) -> list[tuple[Path, str | None]]:
    """The `(file, language)` pairs of a split of a `source: tsv` config.

    A file name holding `{language}` stands for one file of each of `data.languages`; another
    is of the language its name begins with (`fre_train.tsv`), or of none when
    `data.language_tags` is false.

    Raises:
        ConfigError: If the split names no file, a `{language}` pattern has no
            `data.languages`, or a file's language cannot be told from its name.
    """
    data = config.data
    key = f"data.{split}_tsv"
    named = getattr(data, f"{split}_tsv")
    if not named:
        raise ConfigError("must name the split's TSV file(s) for data.source: tsv.", key)
    patterns = [named] if isinstance(named, str) else named
    if not all(isinstance(pattern, str) for pattern in patterns):
        raise ConfigError(f"must be a file name or a list of them (got {named!r}).", key)
    files = []
    for pattern in patterns:
        if LANGUAGE_FIELD in pattern:
            if not data.languages:
                raise ConfigError(f"{pattern} holds {LANGUAGE_FIELD}: set data.languages.", key)
            files += [
                (data_path(pattern.replace(LANGUAGE_FIELD, str(language))), str(language))
                for language in data.languages
            ]
        elif not data.language_tags:
            files.append((data_path(pattern), None))
        else:
            files.append((data_path(pattern), _language_of(data_path(pattern), key)))
    if not data.language_tags:
        return [(path, None) for path, _ in files]
    return files


def _language_of(path: Path, key: str) -> str:
    try:
        return language_of_file(path)
    except ValueError as error:
        raise ConfigError(str(error), key) from None


def pronunciations(config: ExperimentConfig, split: str) -> Pronunciations:
    """The checked words of a split of a `source: tsv` config."""
    files = tsv_files(config, split)
    paths = [path for path, _ in files]
    languages = [language for _, language in files]
    return read_pronunciation_files(paths, languages, config.data.on_bad_line)


def split_languages(config: ExperimentConfig, sources: list[str]) -> list[str | None] | None:
    """Each source's language, for a macro average over languages; None for one group."""
    if config.data.source != "tsv" or not config.data.language_tags:
        return None
    return [split_source(source)[0] for source in sources]


def split_files(config: ExperimentConfig, split: str) -> list[Path]:
    """Every file a split of a `text` or `tsv` config reads (nothing for TFDS)."""
    if config.data.source == "tsv":
        return [path for path, _ in tsv_files(config, split)]
    if config.data.source == "text":
        files = [Path(path) for pair in text_files(config, split) for path in pair]
        return files + (test_reference_files(config) if split == "test" else [])
    return []


def test_reference_files(config: ExperimentConfig) -> list[Path]:
    """The files of `data.test_references`: the test set's further references."""
    return [data_path(path) for path in config.data.test_references or []]
