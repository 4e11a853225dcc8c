"""The pieces of a run folder are checked against each other wherever they are loaded together.

A vocabulary cut short (a copy interrupted) or of another run loads as a tokenizer of other
ids; every loader refuses it the same way, naming the file and both sizes.
"""

import shutil

import pytest
import sentencepiece

from tfscones.models import load_run
from tfscones.serving.export import ExportError, ExportSettings, build_module
from tfscones.training.resume_check import RunFolderError
from tfscones.training.runner import reused_sentencepiece

from .conftest import VOCABULARY_SIZE

FITS_NOT = (
    rf"spm.model has \d+ entries but (the model's vocabulary|data.vocabulary_size) has "
    rf"{VOCABULARY_SIZE}: it is another run's, or damaged"
)


@pytest.fixture
def cut_run(run_dir, tmp_path):
    """A copy of the run whose spm.model is cut short where it still loads, with fewer pieces."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    data = (run_dir / "spm.model").read_bytes()
    for size in range(100, len(data)):
        (copy / "spm.model").write_bytes(data[:size])
        try:
            pieces = sentencepiece.SentencePieceProcessor(model_file=str(copy / "spm.model"))
        except RuntimeError:
            continue
        assert pieces.vocab_size() < VOCABULARY_SIZE
        return copy
    pytest.fail("no cut of spm.model loads")


def test_a_run_with_a_cut_vocabulary_is_refused_when_loaded(cut_run):
    with pytest.raises(ValueError, match=rf"{cut_run}/{FITS_NOT}"):
        load_run(cut_run)


def test_an_export_of_a_model_and_a_cut_vocabulary_is_refused(cut_run):
    with pytest.raises(ExportError, match=FITS_NOT):
        build_module(ExportSettings(), cut_run / "model.keras", cut_run / "spm.model")


def test_a_resumed_run_refuses_its_cut_vocabulary(cut_run):
    with pytest.raises(RunFolderError, match=rf"{FITS_NOT}; the run cannot go on with it: delete"):
        reused_sentencepiece(cut_run / "spm.model", VOCABULARY_SIZE)
    (cut_run / "spm.model").write_bytes(b"garbage")
    with pytest.raises(RunFolderError, match=r"spm.model.*the run cannot go on with it"):
        reused_sentencepiece(cut_run / "spm.model", VOCABULARY_SIZE)
