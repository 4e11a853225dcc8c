"""Sentence pairs from TensorFlow Datasets translation builders such as `wmt19_translate`.

A TFDS translation example is a dict keyed by language code (`{"de": ..., "en": ...}` for
`wmt19_translate/de-en`); either language can be the source, so one prepared dataset serves both
directions. The SCONES paper trains on `wmt19_translate` de-en, fi-en and lt-en, both ways.
"""

import os

import tensorflow as tf
import tensorflow_datasets as tfds


def load_tfds_pairs(
    name: str,
    source_lang: str,
    target_lang: str,
    *,
    split: str = "train",
    data_dir: str | os.PathLike | None = None,
    download: bool = False,
    shuffle_files: bool = False,
    read_config: tfds.ReadConfig | None = None,
) -> tf.data.Dataset:
    """Loads a TFDS translation split as `(source, target)` string pairs.

    Empty sentences are not removed here; the length filter of `translation_dataset`
    (`min_length`) drops them.

    Example:
    ```python
    pairs = load_tfds_pairs("wmt19_translate/de-en", "en", "de", split="validation")
    ```

    Args:
        name: TFDS name with config, e.g. "wmt19_translate/fi-en".
        source_lang: Language code of the source side, a key of the examples.
        target_lang: Language code of the target side.
        split: TFDS split, slicing allowed ("train[:1%]").
        data_dir: Folder of prepared TFDS data; the TFDS default if None.
        download: Download and prepare the dataset first if it is not prepared. If False, the
            dataset must already be in `data_dir`.
        shuffle_files: Shuffle the order of the dataset's files.
        read_config: TFDS read options (seeds, interleaving).

    Returns:
        A dataset of `(source, target)` scalar `tf.string` pairs.

    Raises:
        ValueError: If the languages are equal or not both features of the dataset.
        tfds.core.registered.DatasetNotFoundError: If `name` is not a TFDS dataset.
    """
    if source_lang == target_lang:
        raise ValueError(f"source_lang and target_lang are both {source_lang!r}")
    builder = tfds.builder(name, data_dir=data_dir)
    languages = list(builder.info.features.keys())
    missing = [lang for lang in (source_lang, target_lang) if lang not in languages]
    if missing:
        raise ValueError(f"{name} has languages {languages}, not {missing}")
    if download:
        builder.download_and_prepare()
    examples = builder.as_dataset(split=split, shuffle_files=shuffle_files, read_config=read_config)
    return examples.map(
        lambda example: (example[source_lang], example[target_lang]),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
