"""TensorFlow's `saved_model_cli` with tensorflow-text's ops loaded, for the exported SavedModels.

    python -m export.saved_model_cli run --dir exports/demo/1 --tag_set serve \
        --signature_def translate --input_exprs 'source=["Guten Morgen."]'

The stock `saved_model_cli` loads only TensorFlow's own ops: `show` works on an export, but
`run` fails with "Op type not registered 'SentencepieceOp'". This program imports
tensorflow_text first, which registers its ops, then runs `saved_model_cli` with the same
arguments.
"""

import sys

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()

import tensorflow_text  # noqa: E402, F401  (registers the SentencePiece ops)
from tensorflow.python.tools import saved_model_cli  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "saved_model_cli"
    sys.exit(saved_model_cli.main())
