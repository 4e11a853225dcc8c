"""`tfscones translate` bounds a batch's decoder memory as the export bounds a request's."""

import argparse
import io

import pytest

from tests import harness
from tfscones.commands.translate import fitted_batch_size
from tfscones.decoding import Ensemble, Search
from tfscones.serving.module import decoder_state_bytes

VOCABULARY = 1000


@pytest.fixture(scope="module")
def model():
    return harness.small_model(VOCABULARY, max_sequence_length=64)


def arguments(search: Search, batch_size: int, gib: float) -> argparse.Namespace:
    return argparse.Namespace(search=search, batch_size=batch_size, max_batch_gib=gib)


def one_sentence_bytes(model, rows: int) -> int:
    return decoder_state_bytes(model, rows, 64, 64)


def test_a_batch_within_the_budget_keeps_its_size_and_says_nothing(model):
    messages = io.StringIO()
    assert fitted_batch_size(model, arguments(Search("beam", beam_size=4), 64, 2.0), messages) == 64
    assert messages.getvalue() == ""


def test_a_batch_over_the_budget_is_lowered_to_what_fits_and_said_so(model):
    search = Search("beam", beam_size=200)
    gib = 100 * one_sentence_bytes(model, 200) / 2**30 + 1e-9  # room for exactly 100 sentences
    messages = io.StringIO()
    assert fitted_batch_size(model, arguments(search, 1000, gib), messages) == 100
    assert messages.getvalue().startswith("translate: --batch-size 1,000 would need about ")
    assert "translating 100 sentences at a time" in messages.getvalue()


def test_an_ensemble_counts_the_state_of_each_model(model):
    search = Search("sample", num_hypotheses=8)
    gib = 10 * one_sentence_bytes(model, 8) / 2**30 + 1e-9
    ensemble = Ensemble([model, model])
    assert fitted_batch_size(ensemble, arguments(search, 64, gib), io.StringIO()) == 5


def test_a_search_whose_one_sentence_is_over_the_budget_is_refused(model):
    search = Search("beam", beam_size=200)
    gib = 0.5 * one_sentence_bytes(model, 200) / 2**30
    with pytest.raises(ValueError, match=r"one sentence of this search \(200 beams or samples\)"):
        fitted_batch_size(model, arguments(search, 1, gib), io.StringIO())
