"""The programs, as `python -m training.NAME`: each is the `tfscones NAME` command.

train, translate, demo, analyze, diversity, synthetic; the configs they name live in
`tfscones/configs/` (`training/configs` points there). Every program here imports TensorFlow
without its native start-up log lines.
"""

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()
