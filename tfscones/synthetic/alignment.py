"""Word alignments for IBM-3 estimation: IBM Model 1 EM for t, then Viterbi alignments.

1. IBM Model 1 EM for t(e|f), NULL included, from uniform t (Brown et al. 1993): every iteration
   is a few numpy passes over one flat array of all (target word, source position) links of the
   corpus (`word_corpus.alignment_links`).
2. Viterbi alignments: each target word aligns to the source position i maximising
   t(e_j|x_i) · exp(-λ|i/l - j/m|) for real words and t(e_j|NULL) for NULL (which has no
   position). The diagonal preference λ is kept small (0.1 by default): it changes a decision
   only where two t values are within a factor exp(λ), chiefly a word that occurs twice in the
   sentence, which would otherwise take every link to its first copy and get fertility 2 and 0
   instead of 1 and 1.
"""

from __future__ import annotations

import logging

import numpy as np

from tfscones.synthetic.word_corpus import Links, WordCorpus

logger = logging.getLogger(__name__)


def model1_em(
    corpus: WordCorpus, links: Links, target_vocabulary_size: int, iterations: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """IBM Model 1 EM for t(e|f) over the distinct (f, e) pairs that co-occur.

    Logs the log-likelihood per target word of every iteration.

    Returns:
        pair_source, pair_target (the pairs), link_pair (each link's pair), t (of each pair).
    """
    keys = links.source * target_vocabulary_size + corpus.target_ids[links.token]
    pairs, link_pair = np.unique(keys, return_inverse=True)
    pair_source, pair_target = np.divmod(pairs, target_vocabulary_size)
    t = np.full(len(pairs), 1.0 / target_vocabulary_size)
    num_tokens = len(corpus.target_ids)
    links_per_token = corpus.source_lengths[corpus.target_sentence] + 1
    for iteration in range(1, iterations + 1):
        link_t = t[link_pair]
        normaliser = np.bincount(links.token, weights=link_t, minlength=num_tokens)
        posterior = link_t / normaliser[links.token]
        counts = np.bincount(link_pair, weights=posterior, minlength=len(pairs))
        t = counts / np.bincount(pair_source, weights=counts)[pair_source]
        log_likelihood = np.mean(np.log(normaliser / links_per_token))
        logger.info(
            "Model 1 EM iteration %d: log-likelihood %.4f per target word",
            iteration,
            log_likelihood,
        )
    return pair_source, pair_target, link_pair, t


def viterbi_alignment(
    corpus: WordCorpus, links: Links, link_t: np.ndarray, preference: float
) -> np.ndarray:
    """The best source position (0 = NULL) of every target word (module docstring, step 2).

    Ties go to the first link: the leftmost real word, and NULL only if no real word ties.

    Args:
        corpus: The corpus.
        links: Its links.
        link_t: t(e|f) of every link.
        preference: λ, the diagonal preference.
    """
    sentence = corpus.target_sentence[links.token]
    relative_i = links.position / corpus.source_lengths[sentence]
    relative_j = corpus.target_position[links.token] / corpus.target_lengths[sentence]
    diagonal = np.exp(-preference * np.abs(relative_i - relative_j))
    score = link_t * np.where(links.position == 0, 1.0, diagonal)
    best = np.flatnonzero(score == np.maximum.reduceat(score, links.starts)[links.token])
    first = np.concatenate([[True], links.token[best[1:]] != links.token[best[:-1]]])
    return links.position[best[first]]
