"""Translating with a CTranslate2 export exactly as the tfscones SavedModel translates.

    translator = CTranslate2Translator("ct2/demo-scones")
    translator.translate(["Guten Morgen."])  # [Hypothesis(text="Good morning.", ...)]

`CTranslate2Translator` runs a folder that `tfscones export --format ctranslate2` wrote under the
rules of `tfscones.serving.TranslationModule`, so its outputs equal the SavedModel's token for
token:
- sentences are checked as the library's `tfscones.decoding.translate` checks them, in its
  words (one string, or anything but strings, is a `TypeError`), and tokenised as the SavedModel
  does (invalid UTF-8 repaired to U+FFFD, text cut to `max_source_characters`, pieces cut to
  `max_source_tokens - 1`, then EOS, which the export adds); a source without pieces translates
  to the empty string with score 0;
- ids are checked as the SavedModel's `translate_ids` checks them: each in the vocabulary, a row
  read up to its first EOS or PAD, at most `max_source_tokens - 1` ids before it; an error
  names the sentence and position (`sources[1][4] must be a whole number in [0, 400) ...`);
- a sentence produces at most `min(floor(max_length_a * source_tokens + max_length_b),
  max_output_tokens)` tokens, EOS included (`tfscones.decoding.common`); CTranslate2 takes one
  limit per call, so greedy search decodes a batch at its largest limit and decodes again, at
  their own limits, the few sentences that ran past theirs (a greedy output is the same at any
  limit up to its length, so this is exact), and beam search, whose best hypothesis can change
  with the limit, decodes a batch in one call per distinct limit;
- EOS may come first (`min_decoding_length=0`), with no length penalty, as in our decoders;
- greedy search is exact for every head; beam search only for softmax models, and refused for
  others (CTranslate2 would rank by log-softmax). Scores are sums of log-softmax over the output
  tokens, EOS included, so a score is given for softmax models only (None otherwise); CTranslate2's
  log-softmax is approximate, up to about 3e-5 off the exact sum;
- beam search stops by CTranslate2's rule (the top beam ends, or `beam_size` hypotheses have
  ended: patience 1), ours when no live beam can still win, so in rare cases their best
  hypotheses could differ.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path
from typing import NamedTuple

import ctranslate2
import numpy as np
import sentencepiece
import tensorflow as tf

from tfscones import heads
from tfscones.data.symbol_vocab import SymbolTokenizer
from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.decoding.confidence import EMPTY, EOS_LABEL, Confidence, confidence_of
from tfscones.decoding.translate import sentence_tensor
from tfscones.ranges import SEARCH_COUNT, Range
from tfscones.serving.ctranslate2_export import (
    BEAM,
    SENTENCEPIECE_MODEL,
    SYMBOL_VOCABULARY,
    CTranslate2Info,
    read_json,
)
from tfscones.serving.module import RequestLimits

THREADS = Range(0, 1024, integer=True)
"""CTranslate2's `intra_threads`: 0 lets it choose (one per core)."""
WORKERS = Range(1, 1024, integer=True)
"""CTranslate2's `inter_threads`: the batches it translates side by side."""
VOCABULARY_FILE = "shared_vocabulary.json"


class Hypothesis(NamedTuple):
    """One decoded sentence.

    Attributes:
        ids: The output token ids, EOS included when the sentence produced it.
        score: The sum of the tokens' log-probabilities for a softmax model; None for other
            heads, whose scores CTranslate2 cannot compute.
    """

    ids: list[int]
    score: float | None
    token_log_scores: tuple[float, ...] | None = None


class Translation(NamedTuple):
    """One translated sentence: its text, `Hypothesis.score`, and its confidence if asked.

    `confidence` is the `tfscones.decoding.Confidence` of the library's paths, from the logits
    CTranslate2 returns for the chosen tokens, scored by the model's own head.
    """

    text: str
    score: float | None
    confidence: Confidence | None = None


class CTranslate2Translator:
    """A CTranslate2 `Translator` that decodes ids and text like the tfscones SavedModel.

    Args:
        model_dir: A folder written by `tfscones export --format ctranslate2`.
        limits: Request limits (default: the SavedModel's defaults for the model's positions;
            `max_batch_size` is not enforced). Token limits must fit the model's positions.
        compute_type: CTranslate2's compute type: "default" (the export's weights), "float32",
            "int8" (weights quantised when the model loads), ...
        threads: CTranslate2's `intra_threads`, the threads one batch runs on (`THREADS`; 0
            lets CTranslate2 choose).
        workers: CTranslate2's `inter_threads`, the batches translated at once (`WORKERS`):
            calls from that many threads of the caller run side by side, each on `threads`
            threads, with a copy of the model's state each; more calls wait in a queue.

    Raises:
        FileNotFoundError: If `model_dir` is not a tfscones CTranslate2 export.
        ValueError: If `threads` is not in `THREADS` or `workers` not in `WORKERS`, a token
            limit exceeds the model's positions, or a file of the export is damaged (naming
            it, and the field), all before the model loads.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike,
        limits: RequestLimits | None = None,
        compute_type: str = "default",
        threads: int = 1,
        workers: int = 1,
    ):
        THREADS.check("threads", threads, "0 lets CTranslate2 choose (one per core).")
        WORKERS.check("workers", workers)
        self.info = CTranslate2Info.read(model_dir)
        self.limits = (limits or RequestLimits()).for_model(self.info.positions)
        self.pieces = read_pieces(Path(model_dir) / VOCABULARY_FILE)
        self.piece_ids = {piece: i for i, piece in enumerate(self.pieces)}
        self.source_id = Range(0, len(self.pieces), high_open=True, integer=True)
        self.codec = vocabulary_codec(Path(model_dir), len(self.pieces))
        self.translator = load_translator(model_dir, compute_type, threads, workers)
        self.head = heads.get(self.info.head_config) if self.info.head_config else None

    def check_beam_size(self, beam_size: int) -> int:
        """`beam_size` if it is a search exact for this model.

        Raises:
            ValueError: If it is not a whole number >= 1, or above 1 for a head other than
                softmax.
        """
        SEARCH_COUNT.check("beam_size", beam_size)
        if beam_size > 1 and BEAM not in self.info.exact_searches:
            raise ValueError(
                f"beam search on CTranslate2 ranks hypotheses by log-softmax, and this model's "
                f"head is {self.info.head}: only greedy search (beam_size=1) is its own. "
                "Serve the SavedModel (tfscones export) for its beam search."
            )
        return beam_size

    def output_limit(self, source_length: int) -> int:
        """Most tokens a source of `source_length` tokens (EOS included) may produce."""
        limits = self.limits
        length = np.floor(
            np.float32(limits.output.max_length_a) * np.float32(source_length)
            + np.float32(limits.output.max_length_b)
        )
        return int(min(max(length, 1), limits.max_output_tokens))

    def decode_ids(
        self, sources: Iterable[Iterable[int]], beam_size: int = 1, scored: bool = False
    ) -> list[Hypothesis]:
        """Decodes one batch of source pieces' ids (greedy at `beam_size=1`).

        Args:
            sources: Each source's piece ids (lists, or the rows of an array) without EOS: the
                export adds it. A row ends at its first EOS or PAD (0), as the SavedModel's
                `translate_ids` reads it, so rows with EOS or padding may be given too; a row
                may have at most `max_source_tokens - 1` ids before its end, and one with none
                decodes to no ids (score 0 for a softmax model).
            beam_size: Beams; the best hypothesis is returned.
            scored: Whether each hypothesis gets its `token_log_scores` (greedy search only).

        Returns:
            One `Hypothesis` per source.

        Raises:
            TypeError: If a source is not a sequence of ids.
            ValueError: If an id is not a whole number in [0, vocabulary size) or a source is
                too long, naming the source (and the position), or as `check_beam_size`.
        """
        self.check_beam_size(beam_size)
        self._check_scored(scored, beam_size)
        rows = [self._source_row(index, source) for index, source in enumerate(sources)]
        return self._decode_sources(rows, beam_size, scored)

    def _source_row(self, index: int, source: Iterable[int]) -> list[int]:
        """`decode_ids`'s source `index`, its ids checked, up to its first EOS or PAD."""
        if isinstance(source, (str, bytes)) or not isinstance(source, Iterable):
            raise TypeError(
                f"sources[{index}] must be a sequence of ids, not {type(source).__name__}."
            )
        hint = f"Ids index the export's vocabulary of {len(self.pieces)} pieces."
        ids = [
            self.source_id.check(f"sources[{index}][{position}]", token, hint)
            for position, token in enumerate(source)
        ]
        end = next((i for i, token in enumerate(ids) if token in (EOS_ID, PAD_ID)), len(ids))
        limit = self.limits.max_source_tokens
        if end > limit - 1:
            raise ValueError(
                f"sources[{index}] has {end} ids before its end: at most {limit - 1} "
                f"(max_source_tokens is {limit}, EOS included)."
            )
        return ids[:end]

    def _decode_sources(
        self, sources: list[list[int]], beam_size: int, scored: bool = False
    ) -> list[Hypothesis]:
        """Decodes checked sources; one without pieces gets no ids (score 0 for softmax)."""
        empty_score = 0.0 if BEAM in self.info.exact_searches else None
        hypotheses = [Hypothesis([], empty_score, (0.0,) if scored else None) for _ in sources]
        texts = [i for i, source in enumerate(sources) if source]
        if not texts:
            return hypotheses
        batch = [sources[i] for i in texts]
        decoded = self._decode_batch(batch, beam_size, scored)
        for i, hypothesis in zip(texts, decoded, strict=True):
            hypotheses[i] = hypothesis
        return hypotheses

    def _decode_batch(
        self, sources: list[list[int]], beam_size: int, scored: bool = False
    ) -> list[Hypothesis]:
        """Decodes sources of at least one piece, in as few CTranslate2 calls as is exact."""
        limits = [self.output_limit(len(source) + 1) for source in sources]
        if beam_size > 1:
            hypotheses = [None] * len(sources)
            self._decode_by_limit(sources, limits, range(len(sources)), beam_size, hypotheses)
            return hypotheses
        hypotheses = self._decode(sources, 1, max(limits), scored)
        too_long = [i for i, hypothesis in enumerate(hypotheses) if len(hypothesis.ids) > limits[i]]
        self._decode_by_limit(sources, limits, too_long, 1, hypotheses, scored)
        return hypotheses

    def _decode_by_limit(
        self,
        sources: list[list[int]],
        limits: list[int],
        indices: Iterable[int],
        beam_size: int,
        hypotheses: list[Hypothesis | None],
        scored: bool = False,
    ) -> None:
        """Decodes the sources at `indices` into `hypotheses`, one call per distinct limit."""
        by_limit = collections.defaultdict(list)
        for i in indices:
            by_limit[limits[i]].append(i)
        for limit, group in by_limit.items():
            batch = [sources[i] for i in group]
            decoded = self._decode(batch, beam_size, limit, scored)
            for i, hypothesis in zip(group, decoded, strict=True):
                hypotheses[i] = hypothesis

    def _decode(
        self, sources: list[list[int]], beam_size: int, limit: int, with_logits: bool = False
    ) -> list[Hypothesis]:
        """One CTranslate2 call: every source decoded with output limit `limit`.

        Scores are asked for from softmax models only: without them CTranslate2's greedy search
        takes the argmax of the logits and skips the log-softmax over the vocabulary each step.
        With `with_logits`, CTranslate2 also returns each step's logits over the vocabulary,
        which the model's head turns into the chosen tokens' log scores (`_token_log_scores`).
        """
        scored = BEAM in self.info.exact_searches
        results = self.translator.translate_batch(
            [[self.pieces[i] for i in source] for source in sources],
            beam_size=beam_size,
            length_penalty=0.0,
            max_decoding_length=limit,
            min_decoding_length=0,
            max_input_length=0,
            return_end_token=True,
            return_scores=scored,
            return_logits_vocab=with_logits,
        )
        hypotheses = []
        for result in results:
            ids = [self.piece_ids[piece] for piece in result.hypotheses[0]]
            tokens = self._token_log_scores(result.logits[0], ids) if with_logits else None
            hypotheses.append(Hypothesis(ids, result.scores[0] if scored else None, tokens))
        return hypotheses

    def _token_log_scores(self, logits: list, ids: list[int]) -> tuple[float, ...]:
        """The head's log score of each chosen token, from the logits of its step."""
        rows = np.asarray([np.asarray(step, np.float32) for step in logits[: len(ids)]])
        if not len(ids):
            return ()
        scores = self.head.log_scores(tf.constant(rows)).numpy()
        return tuple(float(value) for value in scores[np.arange(len(ids)), ids])

    def _check_scored(self, scored: bool, beam_size: int) -> None:
        """Confidences need greedy search and an export that names its head's config."""
        if not scored:
            return
        if beam_size != 1:
            raise ValueError(
                "confidences come from greedy search (beam_size=1): CTranslate2 returns the "
                "logits of its best hypothesis's steps for greedy search alone."
            )
        if self.head is None:
            raise ValueError(
                "this export predates confidences (its info file has no head_config): export "
                "the model again (tfscones export --format ctranslate2)."
            )

    def source_pieces(self, sentence: str) -> list[int]:
        """A sentence's piece ids as the SavedModel makes them: text cut, pieces cut."""
        text = sentence[: self.limits.max_source_characters]
        return self.codec.encode(text)[: self.limits.max_source_tokens - 1]

    def translate(
        self, sentences: Iterable[str] | tf.Tensor, beam_size: int = 1, confidence: bool = False
    ) -> list[Translation]:
        """Translates one batch of sentences.

        Args:
            sentences: The batch, as the library's `translate` takes it: strings (or bytes,
                whose invalid UTF-8 is repaired as the SavedModel repairs it) in any iterable,
                or a 1-D string tensor; an empty or blank line translates to the empty string.
            beam_size: Beams (1: greedy search).
            confidence: Whether each translation gets its `Confidence` (greedy search only);
                CTranslate2 then returns each step's logits over the vocabulary, which costs a
                copy of `vocabulary` floats a token.

        Returns:
            One `Translation` per sentence.

        Raises:
            TypeError: If `sentences` is one string, or holds something other than strings.
            ValueError: If a sentence is not Unicode text (a lone surrogate), `sentences` is not
                one-dimensional, or as `check_beam_size`.
        """
        self.check_beam_size(beam_size)
        self._check_scored(confidence, beam_size)
        texts = [
            text.decode("utf-8", errors="replace") for text in sentence_tensor(sentences).numpy()
        ]
        sources = [self.source_pieces(text) for text in texts]
        return [
            Translation(
                self.codec.decode(_without_end(hypothesis.ids)),
                hypothesis.score,
                self._confidence(hypothesis) if confidence else None,
            )
            for hypothesis in self._decode_sources(sources, beam_size, confidence)
        ]

    def _confidence(self, hypothesis: Hypothesis) -> Confidence:
        """The hypothesis's `Confidence`; an empty source's is `EMPTY`, as on every path."""
        if not hypothesis.ids:
            return EMPTY
        pieces = [EOS_LABEL if token == EOS_ID else self.pieces[token] for token in hypothesis.ids]
        return confidence_of(hypothesis.token_log_scores, pieces)


def load_translator(
    model_dir: str | os.PathLike, compute_type: str, threads: int, workers: int = 1
) -> ctranslate2.Translator:
    """A `ctranslate2.Translator` of `workers` workers of `threads` threads, loaded aside.

    It is loaded on a thread of its own, which ends when loading returns. Loading int8
    weights runs an OpenMP team on the loading thread, and the team lives as long
    as that thread. Left on the caller's thread, it adds to the translator's own team, and once
    a process holds more OpenMP threads than cores GNU OpenMP (which the CTranslate2 wheel ships)
    all but stops its threads from spin-waiting between the many small parallel regions of a
    decoding step (GOMP_SPINCOUNT's documentation): on a 2-core AMD EPYC, int8 greedy search of
    single sentences at 2 threads ran 29 sentences/s loaded on the caller's thread and 168
    loaded on a thread that then ended, ending its team.
    """
    with futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctranslate2-load") as pool:
        loading = pool.submit(
            ctranslate2.Translator,
            str(model_dir),
            compute_type=compute_type,
            intra_threads=threads,
            inter_threads=workers,
        )
        return loading.result()


def read_pieces(path: Path) -> list[str]:
    """The export's vocabulary, piece `i` being token id `i`.

    Raises:
        ValueError: If the file is not JSON, or not a list of strings, naming it.
    """
    pieces = read_json(path)
    if not isinstance(pieces, list) or not all(isinstance(piece, str) for piece in pieces):
        raise ValueError(f"{path}: must hold a JSON list of the vocabulary's pieces.")
    return pieces


def vocabulary_codec(
    model_dir: Path, size: int
) -> sentencepiece.SentencePieceProcessor | SymbolTokenizer:
    """What turns an export's text into ids and back: its symbols or its SentencePiece model.

    Both have `encode(text) -> ids` and `decode(ids) -> text`, as the SavedModel's tokenizer
    computes them.

    Args:
        model_dir: The export.
        size: The entries of its vocabulary file, which the codec must have too.

    Raises:
        ValueError: If the codec's file is damaged, or of another size than `size`, naming it.
    """
    symbols = model_dir / SYMBOL_VOCABULARY
    if symbols.is_file():
        codec, path = SymbolTokenizer.from_file(symbols), symbols
        codec_size = codec.vocab_size
    else:
        path = model_dir / SENTENCEPIECE_MODEL
        try:
            codec = sentencepiece.SentencePieceProcessor(model_file=str(path))
        except (OSError, RuntimeError) as error:
            problem = str(error).strip().splitlines()[0]
            raise ValueError(f"{path} is not a SentencePiece model ({problem})") from None
        codec_size = len(codec)
    if codec_size != size:
        raise ValueError(
            f"{model_dir / VOCABULARY_FILE} has {size} entries, {path} {codec_size}: the "
            "export's files are not of one export."
        )
    return codec


def _without_end(ids: list[int]) -> list[int]:
    return ids[:-1] if ids and ids[-1] == EOS_ID else ids
