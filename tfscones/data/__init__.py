"""Data for translation models: SentencePiece vocabularies, text-file and TFDS pairs, batching.

Grapheme-to-phoneme data: `read_pronunciations` reads the SIGMORPHON / WikiPron TSV format, and
`SymbolTokenizer` is a vocabulary of symbols (characters in, labels out, language tags);
`load_tokenizer` reads either kind of vocabulary file.

Data flow: `read_parallel_text(...).dataset()` or `load_tfds_pairs(...)` give string pairs;
`translation_dataset` tokenises them in graph with a `Tokenizer`, filters by length, and batches
by tokens into `({"source_ids": ..., "target_in_ids": ...}, target_out_ids)`. The sequence
conventions (EOS appended, BOS shift, truncation, pad mask) live in `preprocessing`.
Special ids: PAD_ID 0, EOS_ID 1, UNK_ID 2, BOS_ID 3.
"""

from tfscones.data.batching import batch_by_tokens, default_bucket_lengths
from tfscones.data.length_filter import filter_by_length, keep_by_length
from tfscones.data.parallel_text import (
    BadLine,
    ParallelText,
    ParallelTextError,
    read_parallel_text,
    read_reference_streams,
    read_sentence_pairs,
)
from tfscones.data.preprocessing import append_eos, padding_mask, teacher_forcing_inputs
from tfscones.data.pronunciation_tsv import (
    Pronunciations,
    read_pronunciation_files,
    read_pronunciations,
)
from tfscones.data.sentencepiece_vocab import (
    SentencePieceFiles,
    VocabularyError,
    train_sentencepiece,
)
from tfscones.data.symbol_vocab import SymbolTokenizer, SymbolVocabularyError
from tfscones.data.tfds_pairs import load_tfds_pairs
from tfscones.data.tokenizer import Tokenizer, load_tokenizer
from tfscones.data.translation_pipeline import model_example, translation_dataset
from tfscones.data.vocab_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "UNK_ID",
    "BadLine",
    "ParallelText",
    "ParallelTextError",
    "Pronunciations",
    "SentencePieceFiles",
    "SymbolTokenizer",
    "SymbolVocabularyError",
    "Tokenizer",
    "append_eos",
    "batch_by_tokens",
    "default_bucket_lengths",
    "filter_by_length",
    "keep_by_length",
    "load_tfds_pairs",
    "load_tokenizer",
    "model_example",
    "padding_mask",
    "read_parallel_text",
    "read_pronunciation_files",
    "read_pronunciations",
    "read_reference_streams",
    "read_sentence_pairs",
    "teacher_forcing_inputs",
    "VocabularyError",
    "train_sentencepiece",
    "translation_dataset",
]
