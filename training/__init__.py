"""The training program, its configs, the demo and the translate command.

Every program here imports TensorFlow without its native start-up log lines.
"""

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()
