import pytest
import sacrebleu
from sacrebleu.metrics import BLEUScore

from tfscones.evaluation import metrics

HYPOTHESES = [
    "The cat sat on the mat.",
    "There is a dog in the garden!",
    "He reads a book every evening.",
]
REFERENCES = [
    "The cat is sitting on the mat.",
    "A dog is in the garden.",
    "Every evening he reads a book.",
]
SECOND_REFERENCES = [
    "The cat sat on the mat.",
    "There's a dog in the garden.",
    "He reads a book each evening.",
]


def test_corpus_bleu_equals_sacrebleu():
    score = metrics.corpus_bleu(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert isinstance(score, BLEUScore)
    assert score.score == pytest.approx(expected.score)
    assert score.counts == expected.counts
    assert 0 < score.score < 100


def test_identical_text_scores_100():
    assert metrics.corpus_bleu(REFERENCES, REFERENCES).score == pytest.approx(100.0)
    assert metrics.corpus_chrf(REFERENCES, REFERENCES).score == pytest.approx(100.0)
    assert metrics.sentence_bleu(REFERENCES[0], REFERENCES[0]).score == pytest.approx(100.0)


def test_multiple_reference_streams():
    streams = [REFERENCES, SECOND_REFERENCES]
    score = metrics.corpus_bleu(HYPOTHESES, streams)
    assert score.score == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, streams).score)
    # The second stream holds the first hypothesis exactly: more references, higher BLEU.
    assert score.score > metrics.corpus_bleu(HYPOTHESES, REFERENCES).score
    chrf = metrics.corpus_chrf(HYPOTHESES, streams)
    assert chrf.score == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, streams).score)
    # A missing reference (None) in one stream leaves that segment with the other's.
    partial = [REFERENCES, [None, SECOND_REFERENCES[1], None]]
    assert metrics.corpus_bleu(HYPOTHESES, partial).score == pytest.approx(
        sacrebleu.corpus_bleu(HYPOTHESES, partial).score
    )


def test_corpus_chrf_and_sentence_bleu_equal_sacrebleu():
    chrf = metrics.corpus_chrf(HYPOTHESES, REFERENCES)
    assert chrf.score == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    chrf_pp = metrics.corpus_chrf(HYPOTHESES, REFERENCES, word_order=2)
    expected_pp = sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES], word_order=2).score
    assert chrf_pp.score == pytest.approx(expected_pp)
    assert chrf_pp.score != pytest.approx(chrf.score)
    for hypothesis, reference in zip(HYPOTHESES, REFERENCES, strict=True):
        score = metrics.sentence_bleu(hypothesis, reference)
        assert score.score == pytest.approx(sacrebleu.sentence_bleu(hypothesis, [reference]).score)
    # Smoothing: no 4-gram match, still above zero.
    assert metrics.sentence_bleu("the dog ran", "the cat ran").score > 0
    both = metrics.sentence_bleu(HYPOTHESES[0], [REFERENCES[0], SECOND_REFERENCES[0]])
    assert both.score == pytest.approx(100.0)


def test_signatures_name_the_settings():
    assert metrics.bleu_signature() == (
        f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    )
    assert metrics.bleu_signature(2, lowercase=True).startswith("nrefs:2|case:lc|")
    bleu = sacrebleu.BLEU()
    bleu.corpus_score(HYPOTHESES, [REFERENCES])
    assert metrics.bleu_signature() == str(bleu.get_signature())
    assert metrics.chrf_signature(word_order=2).startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:2")


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="no hypotheses"):
        metrics.corpus_bleu([], [])
    with pytest.raises(ValueError, match="stream 0 has 2 lines"):
        metrics.corpus_bleu(HYPOTHESES, REFERENCES[:2])
    with pytest.raises(ValueError, match="stream 1 has 2 lines"):
        metrics.corpus_chrf(HYPOTHESES, [REFERENCES, SECOND_REFERENCES[:2]])
    with pytest.raises(TypeError):
        metrics.corpus_bleu("a hypothesis", "a reference")
    with pytest.raises(TypeError):
        metrics.corpus_bleu([b"bytes"], ["text"])
    with pytest.raises(ValueError, match="num_references"):
        metrics.bleu_signature(0)
