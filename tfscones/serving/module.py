"""The `tf.Module` whose `tf.function`s become the signatures of an exported SavedModel.

`TranslationModule(model, tokenizer, searches, limits)` holds a `Seq2SeqTransformer` (or any
`Decodable` model) and the `Tokenizer` of its vocabulary, and makes a signature of each named
`tfscones.decoding.Search`. Its signatures take and return whole sentences, so a server needs
nothing but TensorFlow and tensorflow-text (whose ops stock TF Serving links) to run them;
SentencePiece runs inside the graph.

Signatures (all take a batch; "string" is UTF-8 text; the first search's is the default):
- one per search, `NAME(source: string [b])`: `translations` string, `scores` (the search's
  ranking score, with any length penalty), `log_scores` (the sum of the head's log scores),
  `confidence` (exp of `log_scores`: the translation's probability, or under SCONES its
  probability of being adequate; `tfscones.decoding.confidence`), `token_confidence` float32
  `[..., T]` (each token's, the score the search gave it, 0 after the end) and
  `source_truncated` bool `[b]` and `source_unknown` int32 `[b]` (every signature that takes
  text returns both: `source_unknown` counts the source's symbols or pieces outside the
  vocabulary, each read as the unknown symbol, never dropped); `[b]` for a
  search of one hypothesis a sentence, `[b, n]` (best first) for one of n. By default
  (`standard_searches`): `translate` (greedy), `translate_beam` (beam 4) and `nbest` (its 4
  best).
- `translate_ids(source_ids: int32 [b, L])`: greedy; `ids` `[b, T]`, `lengths`, `scores` `[b]`.
- `score(source, target: string [b])`: `scores` `[b]` (sum of the head's log scores of the
  target's tokens, EOS included; NaN for a target over the limits, with `target_truncated`
  true), `token_scores` `[b, T]`, `confidence` and `token_confidence` (their exp, 0 after the
  end) and `lengths` `[b]`.
- `translate_experts(source)`, added for a model with latent experts: every expert's greedy
  translation in one batched call (Shen et al. 2019); `translations` `[b, K]`, in expert order.

Request limits (`RequestLimits`), fixed when the module is built:
- Sentences per request: at most `max_batch_size`; a larger request fails with an
  `InvalidArgumentError` that names the limit. Nothing is decoded for it.
- Source length: sentences are tokenised as in training (pieces, then EOS) and cut to
  `max_source_tokens` tokens, EOS kept last, and `source_truncated` is true for each source
  cut (by tokens or characters): its beginning is translated, and the response says so.
  Before tokenising, text is cut to `max_source_characters` characters (by default 32 a token),
  which bounds the tokeniser's work on huge inputs; ordinary text loses no token to it.
- Output length (`output`, one `OutputLimits` for every search): at most `output.max_length`
  tokens, EOS included, and at most `floor(max_length_a * source_tokens + max_length_b)` (see
  `tfscones.decoding.common`).
  `max_source_tokens` and `max_output_tokens` cannot exceed the model's positions.
- Memory: the decoder state of a full request (`max_batch_size` sentences, each with its beams
  or experts, at the longest lengths; `decoder_state_bytes`) must fit `max_request_bytes`
  (2 GiB by default, stated in the export's info); larger settings are refused when the module
  is built, so no request can ask for more.

XLA (`jit_compile=True`, `tfscones export --xla`): every search runs inside a
`tf.function(jit_compile=True)` on the request's source ids padded with PAD to a multiple of 8
tokens (at most `max_source_tokens`), so XLA compiles once per batch size and source-length
bucket: the first request of each shape waits for its compilation (seconds), later ones run
the compiled search. Its outputs equal the uncompiled module's up to float32 rounding; the
per-token outputs (`token_confidence`, `translate_ids`'s `ids`) then have `max_output_tokens`
columns, 0 (PAD) after each translation's end. TF Serving runs such a SavedModel only when
started with `--xla_cpu_compilation_enabled=true` on CPUs; tokenising, `score` and the checks
run outside XLA as in the default export.

Defined results for odd inputs: invalid UTF-8 is repaired first (each bad byte sequence becomes
U+FFFD), so it tokenises like any text; an empty or whitespace-only source translates to the
empty string with score 0 in every signature, as in `tfscones translate` and the library
(`Search.decode` decides it for all of them: `tfscones.decoding.search.blank_empty_sources`);
in an n-best signature its other slots are empty, with score -inf, as a sparse head's unfilled
slots are. `translate_ids` reads a row up to its first EOS (included) or its first PAD, so
whatever follows (padding added by a batching server, for example) is ignored, and a row that
starts with either is empty: ids EOS alone, score 0. An input of another rank than its layout
(a `source` of `[[...]]`, a `source_ids` row alone) fails with an `InvalidArgumentError`
naming the input and its shape, whoever runs the signature (a loaded SavedModel and TF Serving
feed any shape).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from tfscones import ranges
from tfscones.data.preprocessing import append_eos
from tfscones.data.symbol_vocab import count_unknown
from tfscones.data.vocab_ids import EOS_ID, PAD_ID
from tfscones.decoding.common import OutputLimits
from tfscones.decoding.registry import NBest
from tfscones.decoding.scoring import teacher_forced
from tfscones.decoding.search import Search
from tfscones.decoding.translate import SOURCE_LENGTH_MULTIPLE

DEFAULT_MAX_BATCH_SIZE = 64
DEFAULT_MAX_REQUEST_BYTES = 2 * 2**30
CHARACTERS_PER_TOKEN = 32

# Inputs are declared of any rank and their rank is checked when a request runs
# (`_of_rank`): a loaded signature takes a tensor of any shape, and so does TF Serving, so a
# declared `[None]` would only be assumed, and a check against it folded away.
_STRINGS = tf.TensorSpec(None, tf.string)
_IDS = tf.TensorSpec(None, tf.int32)


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """The bounds a `TranslationModule` puts on each request.

    A limit left None takes its default when the module is built (`for_model`).

    Attributes:
        max_batch_size: Most sentences (or sentence pairs) in one request.
        max_source_tokens: Most source tokens, EOS included; longer sources are truncated
            (default: the model's positions).
        max_source_characters: Characters kept of each input string before tokenising
            (default: `CHARACTERS_PER_TOKEN` per source token).
        output: The output length limits of every search (`OutputLimits`; `max_length`, by
            default the model's positions, is the decoders' cache length). Targets given to
            `score` are truncated to `output.max_length` too.
        max_request_bytes: The memory a request's decoder state may take
            (`decoder_state_bytes` of a full request); settings that exceed it are refused
            when the module is built.
    """

    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_source_tokens: int | None = None
    max_source_characters: int | None = None
    output: OutputLimits = OutputLimits()
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    def __post_init__(self):
        for name in ("max_batch_size", "max_request_bytes"):
            ranges.AT_LEAST_ONE.check(name, getattr(self, name))
        for name in ("max_source_tokens", "max_source_characters"):
            if getattr(self, name) is not None:
                ranges.AT_LEAST_ONE.check(name, getattr(self, name))

    @classmethod
    def from_dict(cls, record: dict) -> RequestLimits:
        """The limits `dataclasses.asdict` wrote (an export's info holds them)."""
        return cls(**{**record, "output": OutputLimits(**record["output"])})

    @property
    def max_output_tokens(self) -> int | None:
        """Most output tokens, EOS included (`output.max_length`)."""
        return self.output.max_length

    def for_model(self, positions: int) -> RequestLimits:
        """The limits with every default filled in for a model of `positions` positions.

        Raises:
            ValueError: If a token limit exceeds the positions, naming it and the range.
        """
        source_tokens = positions if self.max_source_tokens is None else self.max_source_tokens
        output_tokens = positions if self.output.max_length is None else self.output.max_length
        characters = self.max_source_characters or CHARACTERS_PER_TOKEN * source_tokens
        limits = dataclasses.replace(
            self,
            max_source_tokens=source_tokens,
            max_source_characters=characters,
            output=dataclasses.replace(self.output, max_length=output_tokens),
        )
        limits.check_fits(positions)
        return limits

    def check_fits(self, positions: int) -> None:
        """Refuses token limits beyond a model's position table (`positions` entries).

        Raises:
            ValueError: Naming the limit, its value and the allowed range.
        """
        fits = ranges.Range(1, positions, integer=True)
        for name, value in (
            ("max_source_tokens", self.max_source_tokens),
            ("max_output_tokens", self.max_output_tokens),
        ):
            fits.check(name, value, f"The model has {positions} positions.")

    def check_memory(self, model: Any, rows_per_sentence: int) -> None:
        """Refuses limits whose full request needs more than `max_request_bytes`.

        Raises:
            ValueError: Naming the estimate, the budget and the limits that make it.
        """
        needed = decoder_state_bytes(
            model,
            self.max_batch_size * rows_per_sentence,
            self.max_source_tokens,
            self.max_output_tokens,
        )
        if needed > self.max_request_bytes:
            raise ValueError(
                f"a full request ({self.max_batch_size} sentences x {rows_per_sentence} beams "
                f"or experts, {self.max_source_tokens} source and {self.max_output_tokens} "
                f"output tokens) needs about {needed / 2**30:.2f} GiB of decoder state, over "
                f"max_request_bytes ({self.max_request_bytes / 2**30:.2f} GiB): lower "
                "max_batch_size or the beam, or raise the budget."
            )


def standard_searches(
    beam_size: int = 4, nbest: int = 4, length_penalty: float = 0.0
) -> dict[str, Search]:
    """An export's searches by default: greedy `translate`, `translate_beam` and `nbest`.

    `translate` is the default signature; `translate_beam` returns the best of `beam_size`
    beams, `nbest` their `nbest` best.

    Raises:
        ValueError: If a beam setting is out of range (`nbest` above `beam_size`, say).
    """
    ranges.AT_LEAST_ONE.check("beam_size", beam_size)
    ranges.Range(1, beam_size, integer=True).check("nbest", nbest)
    beam = {"beam_size": beam_size, "length_penalty": length_penalty}
    return {
        "translate": Search(),
        "translate_beam": Search("beam", num_hypotheses=1, **beam),
        "nbest": Search("beam", num_hypotheses=nbest, **beam),
    }


def decoder_state_bytes(model: Any, rows: int, source_tokens: int, output_tokens: int) -> int:
    """Bytes of the float32 state a search keeps for `rows` hypotheses at once.

    Every decoder layer's keys and values of self-attention (`output_tokens`) and of
    cross-attention (`source_tokens`), and one step's scores over the vocabulary, per row: the
    largest tensors of greedy, beam and expert decoding.
    """
    caches = 2 * model.num_decoder_layers * model.hidden_dim * (source_tokens + output_tokens)
    return 4 * rows * (caches + model.vocabulary_size)


class TranslationModule(tf.Module):
    """Signatures of a model and its SentencePiece tokenizer: one per search, ids and scoring.

    Every signature is a `tf.function` with a fixed input signature and a batch axis of any size
    up to `limits.max_batch_size`; see the module docstring for inputs, outputs and limits.
    Each `Search` in `searches` becomes a signature of its name (an attribute of the module),
    taking strings and returning `translations`, `scores`, `log_scores` and `source_truncated`:
    `[batch]` for a search of one hypothesis a sentence, `[batch, n]` for one of n. A model
    with latent experts also gets `translate_experts` (`Search("experts")`) unless a search
    of that name is given. `translate_ids` (greedy search on ids) and `score` are always there.

    Example:
    ```python
    module = TranslationModule(model, Tokenizer.from_file("spm.model"))
    module.translate(tf.constant(["Guten Morgen."]))["translations"]  # [b"Good morning."]
    module.score(tf.constant(["Danke."]), tf.constant(["Thanks."]))["scores"]
    sampler = TranslationModule(model, tokenizer, {"sample": Search("sample", top_p=0.9)})
    ```

    Args:
        model: A `Seq2SeqTransformer`, or any `tfscones.models.stepping.Decodable` model.
        tokenizer: The `tfscones.data.Tokenizer` of the model's vocabulary.
        searches: Signature names and their searches, the default signature first (default:
            `standard_searches()`). Their output limits are `limits.output`, so a search may
            not set its own.
        limits: The request limits (default: `RequestLimits()`, filled in for the model).
        freeze_step_weights: Whether the searches step `model.stepper(frozen_weights=True)`:
            what its steps prepare (a `Seq2SeqTransformer`'s transposed tied table) is then
            made once, here, and saved with the module, instead of once per request
            (`export_run` does this: greedy search on one sentence runs about 1.1x faster for
            the small preset). The model's weights must not change
            afterwards, or the searches use stale copies.
        jit_compile: Whether the searches run compiled with XLA, on sources padded to a
            multiple of 8 tokens (see the module docstring; `export_run` does this for
            `ExportSettings(xla=True)`).
        name: Name of the module.

    Raises:
        ValueError: If the tokenizer's vocabulary size differs from the model's, a limit is
            invalid, a search sets its own limits, cannot decode the model or takes more
            memory than `limits.max_request_bytes`, or a search is named like a fixed signature.
    """

    FIXED_SIGNATURES = ("translate_ids", "score")

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        searches: Mapping[str, Search] | None = None,
        limits: RequestLimits | None = None,
        freeze_step_weights: bool = False,
        jit_compile: bool = False,
        name: str = "translation",
    ):
        super().__init__(name=name)
        if tokenizer.vocab_size != model.vocabulary_size:
            raise ValueError(
                f"the tokenizer has {tokenizer.vocab_size} pieces but the model's vocabulary "
                f"has {model.vocabulary_size} entries: they must come from the same run."
            )
        self.limits = (limits or RequestLimits()).for_model(model.max_sequence_length)
        self.model = model
        self.decoding_model = model.stepper(frozen_weights=freeze_step_weights)
        self.searches = self._checked_searches(
            standard_searches() if searches is None else searches
        )
        rows = max(
            search.rows_per_sentence(self.decoding_model) for search in self.searches.values()
        )
        self.limits.check_memory(model, rows)
        self.tokenizer = tokenizer
        self.jit_compile = jit_compile
        self._greedy = self._decoder(Search(limits=self.limits.output))
        for signature, search in self.searches.items():
            setattr(self, signature, self._search_signature(search))

    @property
    def signature_names(self) -> tuple[str, ...]:
        """Names of the signatures, the first search's (the default one) first."""
        return (*self.searches, *self.FIXED_SIGNATURES)

    @property
    def endpoints(self) -> dict[str, tf.types.experimental.PolymorphicFunction]:
        """Each signature's name and `tf.function`, the default signature first."""
        return {name: getattr(self, name) for name in self.signature_names}

    def _checked_searches(self, searches: Mapping[str, Search]) -> dict[str, Search]:
        """The searches with the request's output limits, the experts' added for such models."""
        searches = dict(searches)
        if not searches:
            raise ValueError("a TranslationModule needs at least one search.")
        experts = self.decoding_model.capabilities.latent_experts
        if experts and "translate_experts" not in searches:
            searches["translate_experts"] = Search("experts")
        checked = {}
        for signature, search in searches.items():
            if signature in self.FIXED_SIGNATURES or not signature.isidentifier():
                raise ValueError(
                    f"a search cannot be called {signature!r}: signature names are Python "
                    f"names other than {', '.join(self.FIXED_SIGNATURES)}."
                )
            if search.limits != OutputLimits():
                raise ValueError(
                    f"search {signature!r} sets its own output limits; set them once for every "
                    "search in RequestLimits.output."
                )
            search.hypotheses(self.decoding_model)
            checked[signature] = search.with_limits(self.limits.output)
        return checked

    def _decoder(self, search: Search) -> Callable[[tf.Tensor], NBest]:
        """`search.decode` on the module's model: as it is, or compiled with XLA.

        Under `jit_compile`, the source ids are padded to a multiple of
        `SOURCE_LENGTH_MULTIPLE` tokens (at most `max_source_tokens`) before the compiled
        search, so that XLA compiles for few shapes.
        """
        if not self.jit_compile:
            return lambda source_ids: search.decode(self.decoding_model, source_ids)
        compiled = tf.function(
            lambda source_ids: search.decode(self.decoding_model, source_ids, jit_compile=True),
            jit_compile=True,
            autograph=False,
        )
        width_limit = self.limits.max_source_tokens
        return lambda source_ids: compiled(_padded_to_bucket(source_ids, width_limit))

    def _search_signature(self, search: Search) -> tf.types.experimental.PolymorphicFunction:
        """A signature running `search` on strings (see the class docstring for its outputs)."""
        single = search.hypotheses(self.decoding_model) == 1
        decode = self._decoder(search)

        @tf.function(input_signature=[_STRINGS], autograph=False)
        def signature(source: tf.Tensor) -> dict[str, tf.Tensor]:
            sources = self._source_ids(_of_rank(source, "source", 1))
            output = decode(sources.ids)
            if single:
                output = NBest(*(tensor[:, 0] for tensor in output))
            return {
                "translations": self._texts(output.ids),
                "scores": output.scores,
                "log_scores": output.log_scores,
                "confidence": tf.exp(output.log_scores),
                "token_confidence": _token_confidence(output),
                "source_truncated": sources.truncated,
                "source_unknown": sources.unknown,
            }

        return signature

    @tf.function(input_signature=[_IDS], autograph=False)
    def translate_ids(self, source_ids: tf.Tensor) -> dict[str, tf.Tensor]:
        """Greedy decoding of token ids, for clients that tokenise themselves.

        Args:
            source_ids: int32 `[batch, length]`, each row the source's pieces then EOS; a row
                ends at its first EOS or PAD (0), whatever follows is ignored. `length` must not
                exceed `max_source_tokens`, and every id must be in the vocabulary.

        Returns:
            `ids` int32 `[batch, T]` (EOS included, then PAD; `T` at most
            `max_output_tokens`, exactly that under XLA), `lengths` int32
            `[batch]` (tokens produced, EOS included) and `scores` float32 `[batch]`.
        """
        source_ids = _of_rank(source_ids, "source_ids", 2)
        with tf.control_dependencies(self._check_ids(source_ids)):
            source_ids = _cut_after_end(source_ids)
        output = self._greedy(source_ids)
        return {
            "ids": output.ids[:, 0],
            "lengths": output.lengths[:, 0],
            "scores": output.scores[:, 0],
        }

    @tf.function(input_signature=[_STRINGS, _STRINGS], autograph=False)
    def score(self, source: tf.Tensor, target: tf.Tensor) -> dict[str, tf.Tensor]:
        """How well each target translates its source, with one teacher-forced model call.

        A target is tokenised like a training target (pieces, then EOS). One longer than
        `max_output_tokens` tokens (or `max_source_characters` characters) is not scored: its
        score is NaN and `target_truncated` says why, never the score of its beginning. A
        score is the sum over the target's tokens, EOS included, of the head's log scores
        (`model.head.log_scores`): the log-probability under softmax, log P(z=1 | x, y)
        summed over tokens under the SCONES sigmoid head, -inf for a token outside an entmax
        head's support. Rank or filter candidates with it.

        Args:
            source: string `[batch]`.
            target: string `[batch]`, the candidate translation of each source.

        Returns:
            `scores` float32 `[batch]`, `token_scores` float32 `[batch, T]` (0 after each
            target's end), `confidence` and `token_confidence` (their exp; 0 after the end),
            `lengths` int32 `[batch]`, the target tokens scored, and
            `source_truncated` and `target_truncated` bool `[batch]`: a source is translated
            from its beginning (as in `translate`), a cut target gets score NaN; and
            `source_unknown` int32 `[batch]`, as in the search signatures.
        """
        source = _of_rank(source, "source", 1)
        target = _of_rank(target, "target", 1)
        check = tf.debugging.assert_equal(
            tf.size(source),
            tf.size(target),
            message="score needs as many targets as sources",
        )
        with tf.control_dependencies([check]):
            sources = self._source_ids(source)
            targets = self._tokenised(target, self.limits.max_output_tokens, target=True)
        forced = teacher_forced(self.model, sources.ids, targets.ids.to_tensor(PAD_ID))
        scores = tf.where(targets.truncated, math.nan, forced.scores)
        return {
            "scores": scores,
            "token_scores": forced.token_scores,
            "confidence": tf.exp(scores),
            "token_confidence": tf.where(forced.is_token, tf.exp(forced.token_scores), 0.0),
            "lengths": forced.lengths,
            "source_truncated": sources.truncated,
            "source_unknown": sources.unknown,
            "target_truncated": targets.truncated,
        }

    def _check_batch_size(self, batch_size: tf.Tensor) -> tf.Operation:
        limit = self.limits.max_batch_size
        return tf.debugging.assert_less_equal(
            batch_size,
            tf.cast(limit, batch_size.dtype),
            message=(
                f"a request may hold at most {limit} sentences (max_batch_size); "
                "split it into smaller requests"
            ),
        )

    def _check_ids(self, source_ids: tf.Tensor) -> list[tf.Operation]:
        limit = self.limits.max_source_tokens
        vocabulary_size = self.tokenizer.vocab_size
        return [
            self._check_batch_size(tf.shape(source_ids)[0]),
            tf.debugging.assert_less_equal(
                tf.shape(source_ids)[1],
                limit,
                message=f"source_ids may have at most {limit} columns (max_source_tokens)",
            ),
            tf.debugging.assert_non_negative(source_ids, message="source_ids must be >= 0"),
            tf.debugging.assert_less(
                source_ids,
                vocabulary_size,
                message=f"source_ids must be < {vocabulary_size} (the vocabulary size)",
            ),
        ]

    def _source_ids(self, source: tf.Tensor) -> Sources:
        """Dense source ids `[batch, length]` and whether each source was cut."""
        with tf.control_dependencies([self._check_batch_size(tf.size(source))]):
            tokenised = self._tokenised(source, self.limits.max_source_tokens)
        ids = tokenised.ids.to_tensor(default_value=PAD_ID)
        return Sources(ids, tokenised.truncated, tokenised.unknown)

    def _tokenised(self, strings: tf.Tensor, max_tokens: int, target: bool = False) -> Sources:
        """Ragged ids (pieces then EOS, at most `max_tokens`) and whether a string was cut.

        A string is cut if it has more than `max_source_characters` characters or more
        pieces than `max_tokens - 1`. Targets (`target`) are split as the tokenizer splits
        targets (`tokenize_target`: labels, for a symbol vocabulary).
        """
        text, characters_cut = _clean_text(strings, self.limits)
        tokenize = self.tokenizer.tokenize_target if target else self.tokenizer.tokenize
        pieces = tokenize(text)
        tokens_cut = pieces.row_lengths() > max_tokens - 1
        ids = append_eos(pieces, max_tokens)
        return Sources(ids, characters_cut | tokens_cut, count_unknown(pieces))

    def _texts(self, ids: tf.Tensor) -> tf.Tensor:
        """Detokenised ids `[batch, ..., length]`."""
        rows = self.tokenizer.detokenize(tf.reshape(ids, [-1, tf.shape(ids)[-1]]))
        return tf.reshape(rows, tf.shape(ids)[:-1])


# What an input of each rank holds: strings (rank 1) or ids (rank 2).
_LAYOUTS = {
    1: "a vector of strings, one a sentence: shape [batch]",
    2: "a matrix of ids, one row a sentence: shape [batch, length]",
}


def _token_confidence(output: NBest) -> tf.Tensor:
    """Each token's confidence, exp of the log score the search gave it, 0 after the end.

    The search's own scores, so no second pass over the model: they are the teacher-forced
    scores of the same tokens (`score`) up to float32 rounding. An empty source's empty
    translation (EOS alone, score 0) gets 1 for its EOS, as its confidence is exp(0)
    (`tfscones.decoding.common.has_text`).
    """
    positions = tf.range(tf.shape(output.ids)[-1])
    is_token = positions < output.lengths[..., tf.newaxis]
    return tf.where(is_token, tf.exp(output.token_log_scores), 0.0)


def _of_rank(tensor: tf.Tensor, name: str, rank: int) -> tf.Tensor:
    """`tensor` once a check at run time has found it of rank `rank` (1 or 2, `_LAYOUTS`).

    A request of another rank (`[["a", "b"]]` for `source`) fails with an
    `InvalidArgumentError` naming the input and its layout, instead of giving outputs of
    shapes no caller expects.
    """
    check = tf.debugging.assert_equal(
        tf.rank(tensor), rank, message=f"{name} must be {_LAYOUTS[rank]}; got another rank"
    )
    with tf.control_dependencies([check]):
        checked = tf.identity(tensor)
    # Not `tf.ensure_shape`: its kernel ran before the check, with a message naming neither.
    checked.set_shape([None] * rank)
    return checked


class Sources(NamedTuple):
    """Tokenised strings of a request.

    Attributes:
        ids: int32 ids, pieces then EOS (dense `[batch, length]` or ragged).
        truncated: bool `[batch]`, whether a string was longer than the limits and cut.
        unknown: int32 `[batch]`, how many of its symbols are outside the vocabulary.
    """

    ids: tf.Tensor | tf.RaggedTensor
    truncated: tf.Tensor
    unknown: tf.Tensor


def _clean_text(strings: tf.Tensor, limits: RequestLimits) -> tuple[tf.Tensor, tf.Tensor]:
    """Valid UTF-8 (bad bytes become U+FFFD) cut to `max_source_characters` characters.

    Returns:
        The strings, and bool `[batch]`: whether each was cut.
    """
    valid = tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    limit = limits.max_source_characters
    cut = tf.strings.length(valid, unit="UTF8_CHAR") > limit
    return tf.strings.substr(valid, 0, limit, unit="UTF8_CHAR"), cut


def _padded_to_bucket(source_ids: tf.Tensor, width_limit: int) -> tf.Tensor:
    """`source_ids` padded with PAD to a multiple of `SOURCE_LENGTH_MULTIPLE` columns.

    At most `width_limit` columns (the model reads no more), so a source of the full length
    keeps its own width.
    """
    width = tf.shape(source_ids)[1]
    buckets = (width + SOURCE_LENGTH_MULTIPLE - 1) // SOURCE_LENGTH_MULTIPLE
    padded = tf.minimum(buckets * SOURCE_LENGTH_MULTIPLE, tf.maximum(width, width_limit))
    return tf.pad(source_ids, [[0, 0], [0, padded - width]], constant_values=PAD_ID)


def _cut_after_end(source_ids: tf.Tensor) -> tf.Tensor:
    """Replaces by PAD every id after a row's first EOS or first PAD."""
    ends = tf.cast(tf.equal(source_ids, EOS_ID) | tf.equal(source_ids, PAD_ID), tf.int32)
    keep = tf.equal(tf.cumsum(ends, axis=1, exclusive=True), 0)
    return tf.where(keep, source_ids, PAD_ID)
