"""`python -m export.savedmodel`: the `tfscones export` command (`tfscones.commands.export`)."""

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()

from tfscones.commands.export import main  # noqa: E402 (after TensorFlow's quiet import)

if __name__ == "__main__":
    main(prog="python -m export.savedmodel")
