"""Expert decoding lives in decoding: the models' former names still resolve, without a cycle."""

import os
import pathlib
import subprocess
import sys

import pytest

import tfscones.decoding
import tfscones.decoding.experts
import tfscones.models


def test_former_import_path_gives_the_same_objects():
    from tfscones.models import ExpertStates, ParallelExperts, decode_experts

    assert decode_experts is tfscones.decoding.experts.decode_experts
    assert decode_experts is tfscones.decoding.decode_experts
    assert ParallelExperts is tfscones.decoding.experts.ParallelExperts
    assert ExpertStates is tfscones.decoding.experts.ExpertStates
    assert "decode_experts" in tfscones.models.__all__


def test_importing_the_models_does_not_import_decoding():
    code = (
        "import sys, tfscones.models; "
        "print(sorted(m for m in sys.modules if m.startswith('tfscones.decoding')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=pathlib.Path(tfscones.models.__file__).parents[2],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"},
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_names_still_raise_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        tfscones.models.no_such_name  # noqa: B018
