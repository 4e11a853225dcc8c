"""Decoding with a converted CTranslate2 model under the rules of our exported SavedModel.

`CTranslate2Decoder` runs a model directory that `benchmarks.ctranslate2_convert` wrote, so that
its outputs can be compared with the SavedModel's (`tfscones.serving.TranslationModule`) token
for token and its speed measured on the same work:
- sources are tokenised as the SavedModel does (SentencePiece pieces, cut to
  `max_source_tokens - 1`, then EOS; text first cut to `max_source_characters` characters), and a
  source without pieces translates to the empty string with score 0;
- a sentence produces at most `min(floor(max_length_a * source_tokens + max_length_b),
  max_output_tokens)` tokens, EOS included (`tfscones.decoding.common`); CTranslate2 takes one
  limit per call, so a batch gets its largest sentence's, and only at one sentence per call are
  the limits exactly the SavedModel's;
- scores are sums of log-softmax over the output tokens, EOS included: no length penalty or
  normalisation, and EOS may come first (`min_decoding_length=0`), as in our decoders;
- beam search stops by CTranslate2's rule (the top beam ends, or `beam_size` hypotheses have
  ended: patience 1), ours when no live beam can still win, so in rare cases their best
  hypotheses could differ; on the first 200 demo test sentences they are the same.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import ctranslate2
import numpy as np
import sentencepiece as spm

from tfscones.data.vocab_ids import EOS_ID
from tfscones.serving import RequestLimits


class Hypothesis(NamedTuple):
    """One decoded sentence.

    Attributes:
        ids: The output token ids, EOS included when the sentence produced it.
        score: The sum of the tokens' log-probabilities.
    """

    ids: list[int]
    score: float


class CTranslate2Decoder:
    """A CTranslate2 `Translator` that decodes ids and text like our SavedModel.

    Example:
    ```python
    limits = RequestLimits(64, 48, 48, 1536, 1.5, 10.0)
    decoder = CTranslate2Decoder("ct2/demo-softmax", limits, "runs/demo-softmax/spm.model")
    decoder.translate(["Guten Morgen."], beam_size=4)  # [("Good morning.", -1.2)]
    ```

    Args:
        model_dir: A CTranslate2 model directory written by `benchmarks.ctranslate2_convert`.
        limits: The SavedModel's request limits (`max_batch_size` is not enforced).
        sentencepiece_model: The run's `spm.model`, needed by `translate` only.
        compute_type: CTranslate2's compute type: "float32", or "int8" (weights quantised
            when the model loads).
        threads: CTranslate2's `intra_threads`, the threads one batch runs on.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike,
        limits: RequestLimits,
        sentencepiece_model: str | os.PathLike | None = None,
        compute_type: str = "float32",
        threads: int = 1,
    ):
        self.limits = limits
        self.translator = ctranslate2.Translator(
            str(model_dir), compute_type=compute_type, intra_threads=threads, inter_threads=1
        )
        vocabulary = Path(model_dir) / "shared_vocabulary.json"
        self.pieces = json.loads(vocabulary.read_text(encoding="utf-8"))
        self.piece_ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.sentencepiece = (
            None
            if sentencepiece_model is None
            else spm.SentencePieceProcessor(model_file=str(sentencepiece_model))
        )

    def output_limit(self, source_length: int) -> int:
        """Most tokens a source of `source_length` tokens (EOS included) may produce."""
        limits = self.limits
        length = np.floor(
            np.float32(limits.max_length_a) * np.float32(source_length)
            + np.float32(limits.max_length_b)
        )
        return int(min(max(length, 1), limits.max_output_tokens))

    def decode_ids(self, sources: list[list[int]], beam_size: int) -> list[Hypothesis]:
        """Decodes one batch of token ids, greedy at `beam_size=1`.

        Args:
            sources: Each source's ids, ending with EOS, without padding; at least one id
                before EOS (CTranslate2 gives a source of EOS alone an empty hypothesis).
            beam_size: Beams; the best hypothesis is returned.

        Returns:
            One `Hypothesis` per source.
        """
        results = self.translator.translate_batch(
            [[self.pieces[i] for i in source] for source in sources],
            beam_size=beam_size,
            length_penalty=0.0,
            max_decoding_length=max(self.output_limit(len(source)) for source in sources),
            min_decoding_length=0,
            max_input_length=0,
            return_end_token=True,
            return_scores=True,
        )
        return [
            Hypothesis([self.piece_ids[piece] for piece in result.hypotheses[0]], result.scores[0])
            for result in results
        ]

    def source_ids(self, sentence: str) -> list[int]:
        """A sentence's source ids as the SavedModel makes them: pieces, cut, then EOS."""
        text = sentence[: self.limits.max_source_characters]
        pieces = self.sentencepiece.encode(text)[: self.limits.max_source_tokens - 1]
        return [*pieces, EOS_ID]

    def translate(self, sentences: list[str], beam_size: int) -> list[tuple[str, float]]:
        """Translates one batch of sentences.

        Args:
            sentences: The batch.
            beam_size: Beams (1: greedy search).

        Returns:
            `(translation, score)` per sentence.
        """
        sources = [self.source_ids(sentence) for sentence in sentences]
        hypotheses = self.decode_ids(sources, beam_size)
        return [
            (self.sentencepiece.decode(_without_end(hypothesis.ids)), hypothesis.score)
            if len(source) > 1
            else ("", 0.0)
            for source, hypothesis in zip(sources, hypotheses, strict=True)
        ]


def _without_end(ids: list[int]) -> list[int]:
    return ids[:-1] if ids and ids[-1] == EOS_ID else ids
