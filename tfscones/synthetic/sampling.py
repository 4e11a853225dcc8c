"""Sampling translations from IBM-3 by its generative story (Stahlberg & Kumar 2022, App. B).

Stahlberg & Kumar (2022, §5) make synthetic language pairs of controlled ambiguity: an IBM-3
model trained on German-English samples English-like translations of the German sentences,
with every categorical draw from the fertility table n, the lexical table t and the distortion
table d sharpened or flattened by a temperature γ (their Appendix B, eq. 10;
`tempering.tempered`). `sample_translation` draws one translation, `synthesize` one for every
sentence of a corpus.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from tfscones.synthetic.parameters import NULL_WORD_ID, IBM3Parameters
from tfscones.synthetic.tempering import TemperedTables, check_temperature, softmax

MAX_EMPTY_RESAMPLES = 10


@dataclasses.dataclass(frozen=True)
class SampledTranslation:
    """One draw of the generative story.

    Attributes:
        words: The target sentence (step 7), m = Σ_{i=0}^{|x|} φ_i words.
        fertilities: φ_0 (NULL), φ_1, ..., φ_|x|.
        alignment: For each output word, the source position that generated it (0 is NULL).
    """

    words: tuple[str, ...]
    fertilities: tuple[int, ...]
    alignment: tuple[int, ...]


def sample_translation(
    parameters: IBM3Parameters,
    source_words: Sequence[str],
    temperature: float,
    rng: np.random.Generator,
) -> SampledTranslation:
    """Samples a translation by the IBM-3 generative story (Appendix B, steps 1-7) at γ.

    n, t and d are tempered by eq. 10; p1 is not (the paper tempers n, t and d only), and
    `temperature=1` samples the estimated model as it is.

    1. φ_i ~ n_γ(·|x_i) for i = 1..|x| (unknown words use `<unk>`). If all φ_i are 0 the output
       would be empty: step 1 is drawn again, up to `MAX_EMPTY_RESAMPLES` times, which samples
       the story conditioned on a non-empty output; after that, the word least likely to have
       fertility 0 gets φ = 1 and the others 0.
    2. φ_0 ~ Binomial(Σ_{i≥1} φ_i, p1).
    3. m = Σ_{i=0}^{|x|} φ_i.
    4. τ_ik ~ t_γ(·|x_i) for i = 0..|x| (NULL's row for i = 0), k = 1..φ_i.
    5. π_ik ~ d_γ(·|i, |x|, m) for i ≥ 1. IBM-3 is deficient (two words may draw the same
       position), so words are placed one at a time, in order of i and k, each from d_γ
       restricted to the positions still vacant and renormalised.
    6. The φ_0 NULL words fill the remaining vacant positions in a uniformly random order (each
       of the φ_0! orders with probability 1/φ_0!).
    7. The words τ_ik in positions π_ik are the output.

    Args:
        parameters: The model.
        source_words: The source sentence x as words.
        temperature: γ, finite and > 0.
        rng: The random generator.

    Returns:
        The sampled translation with its fertilities and alignment.

    Raises:
        ValueError: On a bad temperature or an empty source sentence.
    """
    tables = parameters.tempered_tables(temperature)
    if not source_words:
        raise ValueError("the source sentence has no words")
    source_ids = parameters.source_ids(source_words)
    fertilities = _sample_fertilities(tables, source_ids, rng)
    null_fertility = int(rng.binomial(fertilities.sum(), parameters.p1))
    fertilities = np.concatenate([[null_fertility], fertilities])
    alignment = np.repeat(np.arange(len(fertilities)), fertilities)
    rows = np.concatenate([[NULL_WORD_ID], source_ids])
    targets = np.concatenate(
        [
            parameters.t_row(row)[0][_draw(tables.t_cdfs[row], rng.random(phi))]
            for row, phi in zip(rows, fertilities, strict=True)
        ]
    )
    positions = _sample_positions(parameters, len(source_ids), alignment, tables.temperature, rng)
    order = np.argsort(positions)
    return SampledTranslation(
        words=tuple(parameters.target_vocabulary[target] for target in targets[order]),
        fertilities=tuple(int(phi) for phi in fertilities),
        alignment=tuple(int(i) for i in alignment[order]),
    )


def synthesize(
    parameters: IBM3Parameters,
    source_sentences: Sequence[str],
    temperature: float,
    seed: int | Sequence[int],
) -> list[str]:
    """Samples one translation of every sentence (`sample_translation`), words joined by spaces.

    Args:
        parameters: The model.
        source_sentences: Source sentences, whitespace-tokenised.
        temperature: γ of eq. 10, finite and > 0.
        seed: Seeds the corpus's own `np.random.Generator` (an int, or ints such as
            `(seed, split)`): the same seed gives the same corpus.

    Returns:
        The sampled target sentences.

    Raises:
        ValueError: On a bad temperature or a sentence without words (naming its number).
    """
    check_temperature(temperature)
    rng = np.random.default_rng(seed)
    outputs = []
    for number, sentence in enumerate(source_sentences, start=1):
        words = sentence.split()
        if not words:
            raise ValueError(f"source sentence {number} has no words")
        outputs.append(" ".join(sample_translation(parameters, words, temperature, rng).words))
    return outputs


def _draw(cdf: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: the categories of `uniforms` (in [0, 1)) under cumulative `cdf`."""
    indices = np.searchsorted(cdf, np.asarray(uniforms) * cdf[-1], side="right")
    return np.minimum(indices, len(cdf) - 1)


def _sample_fertilities(tables: TemperedTables, source_ids: np.ndarray, rng) -> np.ndarray:
    """Step 1, with the resampling of an empty output (see `sample_translation`)."""
    cdf = tables.fertility_cdf[source_ids]
    for _ in range(MAX_EMPTY_RESAMPLES + 1):
        uniforms = rng.random(len(source_ids))[:, None] * cdf[:, -1:]
        fertilities = np.minimum((cdf <= uniforms).sum(axis=1), cdf.shape[1] - 1)
        if fertilities.sum() > 0:
            return fertilities
    fertilities[np.argmin(tables.fertility[source_ids, 0])] = 1
    return fertilities


def _sample_positions(parameters, source_length: int, alignment, temperature, rng) -> np.ndarray:
    """Steps 5 and 6: the target position (0-based) of each word, given its source position."""
    m = len(alignment)
    log_d = parameters.log_distortion(source_length, m)
    vacant = np.ones(m, bool)
    positions = np.empty(m, np.int64)
    for word in np.flatnonzero(alignment > 0):
        candidates = np.flatnonzero(vacant)
        probabilities = softmax(log_d[alignment[word] - 1, candidates] / temperature)
        positions[word] = candidates[_draw(np.cumsum(probabilities), rng.random())]
        vacant[positions[word]] = False
    positions[alignment == 0] = rng.permutation(np.flatnonzero(vacant))
    return positions
