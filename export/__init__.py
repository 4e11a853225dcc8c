"""The export program (`python -m export.savedmodel`), the TF Serving config and the client.

Every program here imports TensorFlow without its native start-up log lines.
"""

from tfscones.native_logs import import_tensorflow_quietly

import_tensorflow_quietly()
