"""`tfscones train` on two logical CPUs, for tests of `training.strategy=mirrored`.

Run as a script with the command's arguments: the logical devices must be configured before
TensorFlow starts.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from tfscones.commands import train  # noqa: E402

train.main(sys.argv[1:])
