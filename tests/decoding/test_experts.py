"""Expert decoding lives in decoding: importing the models does not import the decoders."""

import os
import pathlib
import subprocess
import sys

import tfscones.models


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
