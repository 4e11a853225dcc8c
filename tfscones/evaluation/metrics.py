"""Translation metrics: thin wrappers over sacrebleu, so every number is a standard one.

BLEU and chrF are computed by sacrebleu (never reimplemented here) on detokenised text, with
its default 13a tokenisation and mixed case. Report a score with its signature, for example
`f"{corpus_bleu(hyps, refs).score:.1f} ({bleu_signature()})"`, so that others can reproduce it.

References come as one stream (a list with one reference per hypothesis) or as several streams
(a list of such lists, for multi-reference test sets); `None` in a stream marks a missing
reference of that segment.
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF, BLEUScore, CHRFScore

from tfscones.ranges import AT_LEAST_ONE

BLEU_TOKENIZER = "13a"


def reference_streams(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str | None]]
) -> list[list[str | None]]:
    """References as a list of streams, each as long as `hypotheses`.

    Example:
    >>> reference_streams(["a b"], ["a b c"])
    [['a b c']]

    Raises:
        ValueError: If there are no hypotheses, or a stream's length differs from theirs.
        TypeError: If a hypothesis or a reference is not a string.
    """
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("hypotheses and references must be sequences of strings, not a string.")
    if len(hypotheses) == 0:
        raise ValueError("no hypotheses to score.")
    if not all(isinstance(hypothesis, str) for hypothesis in hypotheses):
        raise TypeError("every hypothesis must be a str.")
    if all(reference is None or isinstance(reference, str) for reference in references):
        streams = [list(references)]
    else:
        streams = [list(stream) for stream in references]
    for i, stream in enumerate(streams):
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"reference stream {i} has {len(stream)} lines for {len(hypotheses)} hypotheses."
            )
        if not all(reference is None or isinstance(reference, str) for reference in stream):
            raise TypeError(f"reference stream {i} holds something other than str or None.")
    return streams


def _bleu(lowercase: bool, sentence_level: bool = False) -> BLEU:
    return BLEU(lowercase=lowercase, tokenize=BLEU_TOKENIZER, effective_order=sentence_level)


def corpus_bleu(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str | None]],
    lowercase: bool = False,
) -> BLEUScore:
    """Corpus BLEU (Papineni et al. 2002) as sacrebleu computes it.

    Example:
    >>> corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]).score
    100.00000000000004

    Args:
        hypotheses: Detokenised system outputs, one per segment.
        references: One reference stream (a list of strings as long as `hypotheses`) or a list
            of such streams.
        lowercase: Whether to compare lowercased text.

    Returns:
        sacrebleu's `BLEUScore`: `.score` (0-100), `.precisions`, `.bp`, `.sys_len`,
        `.ref_len`.

    Raises:
        ValueError: If there are no hypotheses or the streams' lengths differ.
        TypeError: If an element is not a string.
    """
    streams = reference_streams(hypotheses, references)
    return _bleu(lowercase).corpus_score(list(hypotheses), streams)


def sentence_bleu(
    hypothesis: str, references: str | Sequence[str], lowercase: bool = False
) -> BLEUScore:
    """Smoothed BLEU of one sentence, as sacrebleu's `sentence_bleu` (for oracle statistics).

    Uses sacrebleu's sentence-level settings: exponential smoothing ("exp", Chen & Cherry 2014)
    and effective order, so that a hypothesis without 4-gram matches still scores above 0.

    Args:
        hypothesis: One detokenised system output.
        references: Its reference, or several.
        lowercase: Whether to compare lowercased text.

    Returns:
        sacrebleu's `BLEUScore`.

    Raises:
        TypeError: If `hypothesis` or a reference is not a string.
    """
    references = [references] if isinstance(references, str) else list(references)
    reference_streams([hypothesis], [[reference] for reference in references])
    return _bleu(lowercase, sentence_level=True).sentence_score(hypothesis, references)


def corpus_chrf(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str | None]],
    word_order: int = 0,
) -> CHRFScore:
    """Corpus chrF (Popović 2015) as sacrebleu computes it: character 6-grams, β = 2.

    Args:
        hypotheses: Detokenised system outputs, one per segment.
        references: One reference stream or a list of streams, as in `corpus_bleu`.
        word_order: Word n-gram order; 0 is chrF, 2 is chrF++ (Popović 2017).

    Returns:
        sacrebleu's `CHRFScore` (`.score`, 0-100).

    Raises:
        ValueError: If there are no hypotheses or the streams' lengths differ.
        TypeError: If an element is not a string.
    """
    streams = reference_streams(hypotheses, references)
    return CHRF(word_order=word_order).corpus_score(list(hypotheses), streams)


def sentence_chrf(hypothesis: str, references: str | Sequence[str]) -> float:
    """The chrF (0-100) of one sentence, as sacrebleu's `sentence_chrf`.

    Raises:
        TypeError: If `hypothesis` or a reference is not a string.
    """
    references = [references] if isinstance(references, str) else list(references)
    reference_streams([hypothesis], [[reference] for reference in references])
    return CHRF().sentence_score(hypothesis, references).score


def bleu_signature(num_references: int = 1, lowercase: bool = False) -> str:
    """The sacrebleu signature of `corpus_bleu` with these settings, to print beside its scores.

    Example:
    >>> bleu_signature()  # doctest: +ELLIPSIS
    'nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...'

    Args:
        num_references: References per segment.
        lowercase: As in `corpus_bleu`.

    Returns:
        The signature string.

    Raises:
        ValueError: If `num_references` is not positive.
    """
    AT_LEAST_ONE.check("num_references", num_references)
    metric = _bleu(lowercase)
    metric.corpus_score(["x"], [["x"]] * num_references)
    return metric.get_signature().format()


def chrf_signature(num_references: int = 1, word_order: int = 0) -> str:
    """The sacrebleu signature of `corpus_chrf` with these settings, to print beside its scores.

    Args:
        num_references: References per segment.
        word_order: As in `corpus_chrf`.

    Returns:
        The signature string.

    Raises:
        ValueError: If `num_references` is not positive.
    """
    AT_LEAST_ONE.check("num_references", num_references)
    metric = CHRF(word_order=word_order)
    metric.corpus_score(["x"], [["x"]] * num_references)
    return metric.get_signature().format()


__all__ = [
    "BLEU_TOKENIZER",
    "bleu_signature",
    "chrf_signature",
    "corpus_bleu",
    "corpus_chrf",
    "sentence_bleu",
]
