"""Training a joint SentencePiece vocabulary with the project's fixed special-token ids.

Source and target files are pooled into one model (the SCONES setup: a joint 32K vocabulary), whose
ids pad 0, eos 1, unk 2, bos 3 match `tfscones.data.vocab_ids`.

Reproducibility: when SentencePiece 0.2 samples `input_sentence_size` sentences itself, its
sample differs from run to run even after `set_random_generator_seed`, so the sampling is done
here with Python's `random.Random(seed)` and the trainer gets exactly the sampled sentences. The
trained model also depends on `num_threads`; keep it fixed.
"""

import heapq
import logging
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import sentencepiece as spm

from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tfscones.written_aside import written_aside

logger = logging.getLogger(__name__)

MODEL_TYPES = ("unigram", "bpe", "char", "word")


class SentencePieceFiles(NamedTuple):
    """Files written by `train_sentencepiece`.

    Attributes:
        model_file: `PREFIX.model`, the serialized `ModelProto`.
        vocab_file: `PREFIX.vocab`, one `piece<TAB>score` a line in id order.
    """

    model_file: Path
    vocab_file: Path


class VocabularyError(ValueError):
    """SentencePiece cannot build the vocabulary asked for.

    The size is too large for the corpus, or too small for the characters it must cover.
    """


def train_sentencepiece(
    input_files: Sequence[str | os.PathLike],
    model_prefix: str | os.PathLike,
    *,
    vocab_size: int = 32000,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    input_sentence_size: int = 0,
    seed: int = 0,
    num_threads: int = 1,
    normalization_rule_name: str = "nmt_nfkc",
    byte_fallback: bool = False,
) -> SentencePieceFiles:
    """Trains one SentencePiece model on the lines of several text files.

    Empty and whitespace-only lines are left out of training. Lines must be UTF-8.

    Example:
    ```python
    files = train_sentencepiece(["train.de", "train.en"], "out/spm", vocab_size=8000)
    tokenizer = Tokenizer.from_file(files.model_file)
    ```

    Args:
        input_files: Text files, one sentence a line (source and target files together).
        model_prefix: Output path without suffix; `PREFIX.model` and `PREFIX.vocab` are written.
            Its parent folder is created if missing.
        vocab_size: Number of pieces, the four special tokens included.
        model_type: One of "unigram", "bpe", "char", "word".
        character_coverage: Fraction of characters the pieces must cover; characters outside it
            become unk. 1.0 suits alphabetic languages; 0.9995 is usual for CJK.
        input_sentence_size: If positive and the files hold more lines, train on this many lines
            sampled uniformly with `seed`; 0 trains on every line. The lines trained on are held
            in memory: set it for corpora of millions of lines.
        seed: Seed of the line sampling.
        num_threads: Trainer threads. The model depends on it: keep it fixed to reproduce one.
        normalization_rule_name: SentencePiece normaliser ("nmt_nfkc", "nfkc", "identity", ...).
            With "nmt_nfkc", detokenised text is NFKC-normalised (for example "½" comes back
            as "1⁄2").
        byte_fallback: Encode characters outside the vocabulary as UTF-8 byte pieces instead of
            unk.

    Returns:
        The paths of the written `.model` and `.vocab` files, each written aside and renamed
        into place (`tfscones.written_aside`): a crash leaves no half-written model.

    Raises:
        ValueError: If `model_type` is unknown, `input_files` is empty, `vocab_size` is too
            small to hold the special tokens, or a line is not valid UTF-8 (naming file and line).
        FileNotFoundError: If an input file does not exist.
        VocabularyError: If SentencePiece cannot build `vocab_size` pieces from the text, with
            SentencePiece's reason (the largest or smallest size it could build).
    """
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    if not input_files:
        raise ValueError("input_files is empty: give at least one text file")
    if vocab_size <= max(PAD_ID, EOS_ID, UNK_ID, BOS_ID) + 1:
        raise ValueError(f"vocab_size={vocab_size} leaves no room beside the 4 special tokens")
    paths = [Path(p) for p in input_files]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"SentencePiece input file not found: {path}")
    prefix = Path(model_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)

    # Read (and sample) before training: the trainer turns errors of its iterator into
    # RuntimeError and holds every sentence in memory anyway.
    if input_sentence_size > 0:
        sentences = _sample_lines(_iter_lines(paths), input_sentence_size, seed)
    else:
        sentences = list(_iter_lines(paths))
    files = SentencePieceFiles(Path(f"{prefix}.model"), Path(f"{prefix}.vocab"))
    with written_aside(files.model_file) as model_file, written_aside(files.vocab_file):
        _train(
            sentences,
            model_file.with_suffix(""),
            vocab_size,
            model_type,
            character_coverage=character_coverage,
            num_threads=num_threads,
            normalization_rule_name=normalization_rule_name,
            byte_fallback=byte_fallback,
        )
    logger.info("Trained %s SentencePiece model, %d pieces: %s", model_type, vocab_size, files)
    return files


def _train(sentences: list[str], prefix: Path, vocab_size: int, model_type: str, **options):
    """Trains SentencePiece on `sentences` into `PREFIX.model` and `PREFIX.vocab`.

    Raises:
        VocabularyError: If SentencePiece cannot build `vocab_size` pieces, with its reason.
    """
    try:
        spm.SentencePieceTrainer.Train(
            sentence_iterator=iter(sentences),
            model_prefix=str(prefix),
            vocab_size=vocab_size,
            model_type=model_type,
            input_sentence_size=0,
            pad_id=PAD_ID,
            eos_id=EOS_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            pad_piece="<pad>",
            eos_piece="</s>",
            unk_piece="<unk>",
            bos_piece="<s>",
            minloglevel=2,
            **options,
        )
    except RuntimeError as error:
        reason = str(error).strip().splitlines()[-1]
        raise VocabularyError(
            f"SentencePiece cannot build a vocabulary of {vocab_size} pieces from these "
            f"{len(sentences):,} sentences: {reason} Choose a vocabulary size it can build "
            "(data.vocabulary_size in a config)."
        ) from None


def _iter_lines(paths: Sequence[Path]) -> Iterator[str]:
    """Yields the non-blank lines of `paths`, file by file, without line endings.

    Raises:
        ValueError: If a line is not valid UTF-8, naming the file and line.
    """
    for path in paths:
        with path.open("rb") as f:
            for line_number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as error:
                    bad = raw[error.start : error.end]
                    raise ValueError(
                        f"{path}:{line_number}: invalid UTF-8 bytes {bad!r}"
                    ) from error
                if line.strip():
                    yield line


def _sample_lines(lines: Iterator[str], size: int, seed: int) -> list[str]:
    """Returns `size` lines drawn uniformly without replacement, in their original order.

    Reservoir sampling with random keys (Efraimidis-Spirakis): memory is `size` lines.
    """
    rng = random.Random(seed)
    reservoir: list[tuple[float, int, str]] = []
    for index, line in enumerate(lines):
        item = (rng.random(), index, line)
        if len(reservoir) < size:
            heapq.heappush(reservoir, item)
        elif item[0] > reservoir[0][0]:
            heapq.heapreplace(reservoir, item)
    return [line for _, _, line in sorted(reservoir, key=lambda item: item[1])]
