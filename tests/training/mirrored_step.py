"""One training step under MirroredStrategy (two logical CPUs) and under the default strategy.

Run as a script (logical devices must be configured before TensorFlow starts): prints one JSON
line per head with both losses, both steps' head metrics (each model is compiled with
`head.metrics()`, as `tfscones train` does) and the largest weight difference after the step.
"""

import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tfscones.models import Seq2SeqTransformer  # noqa: E402

VOCABULARY = 40
# Four examples; the two replicas get two each: 7 target tokens on one, 5 on the other.
SOURCE = np.array([[5, 6, 7, 1], [8, 9, 1, 0], [10, 11, 12, 1], [13, 1, 0, 0]], np.int32)
TARGET = np.array([[6, 7, 8, 9, 1], [9, 1, 0, 0, 0], [11, 12, 1, 0, 0], [14, 1, 0, 0, 0]], np.int32)
TARGET_IN = np.concatenate([np.full((4, 1), 3, np.int32), TARGET[:, :-1]], axis=1)


def one_step(strategy, head, initial_weights):
    with strategy.scope():
        model = Seq2SeqTransformer.from_preset(
            "tiny",
            vocabulary_size=VOCABULARY,
            head=head,
            dropout=0.0,
            num_encoder_layers=1,
            num_decoder_layers=1,
        )
        model({"source_ids": SOURCE, "target_in_ids": TARGET_IN})
        if initial_weights is not None:
            model.set_weights(initial_weights)
        model.compile(
            optimizer=keras.optimizers.SGD(1.0),
            loss=model.head.loss(),
            metrics=model.head.metrics(),
        )
    inputs = {"source_ids": SOURCE, "target_in_ids": TARGET_IN}
    batch = tf.data.Dataset.from_tensors((inputs, TARGET))
    weights = [w.copy() for w in model.get_weights()]
    history = model.fit(batch, epochs=1, verbose=0).history
    metrics = {name: values[0] for name, values in history.items() if name != "loss"}
    return history["loss"][0], metrics, weights, model.get_weights()


def main():
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    for head in ("softmax", "sigmoid", "sparsemax"):
        keras.utils.set_random_seed(0)
        default_loss, default_metrics, initial, default_after = one_step(
            tf.distribute.get_strategy(), head, None
        )
        mirrored_loss, mirrored_metrics, _, mirrored_after = one_step(mirrored, head, initial)
        moved = max(np.abs(a - b).max() for a, b in zip(default_after, initial, strict=True))
        difference = max(
            np.abs(a - b).max() for a, b in zip(default_after, mirrored_after, strict=True)
        )
        print(
            json.dumps(
                {
                    "head": head,
                    "replicas": mirrored.num_replicas_in_sync,
                    "default_loss": default_loss,
                    "mirrored_loss": mirrored_loss,
                    "default_metrics": default_metrics,
                    "mirrored_metrics": mirrored_metrics,
                    "weights_moved": float(moved),
                    "max_weight_difference": float(difference),
                }
            )
        )


if __name__ == "__main__":
    main()
