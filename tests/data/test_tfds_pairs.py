import pytest
import tensorflow_datasets as tfds

from tfscones.data import EOS_ID, load_tfds_pairs, translation_dataset


def raw_examples(name, data_dir, split="train"):
    return list(tfds.load(name, split=split, data_dir=data_dir).as_numpy_iterator())


@pytest.mark.parametrize(("source_lang", "target_lang"), [("de", "en"), ("en", "de")])
def test_wmt19_de_en_both_directions(tmp_path, source_lang, target_lang):
    name = "wmt19_translate/de-en"
    with tfds.testing.mock_data(num_examples=6, data_dir=tmp_path):
        examples = raw_examples(name, tmp_path, split="validation")
        pairs = list(
            load_tfds_pairs(
                name, source_lang, target_lang, split="validation", data_dir=tmp_path
            ).as_numpy_iterator()
        )
    assert len(pairs) == 6
    assert examples[0]["de"] != examples[0]["en"]
    assert pairs == [(ex[source_lang], ex[target_lang]) for ex in examples]


@pytest.mark.parametrize("name", ["wmt19_translate/fi-en", "wmt19_translate/lt-en"])
def test_other_wmt19_pairs(tmp_path, name):
    language = name[-5:-3]
    with tfds.testing.mock_data(num_examples=3, data_dir=tmp_path):
        examples = raw_examples(name, tmp_path)
        pairs = list(load_tfds_pairs(name, "en", language, data_dir=tmp_path).as_numpy_iterator())
    assert pairs == [(ex["en"], ex[language]) for ex in examples]


def test_feeds_the_training_pipeline(tmp_path, synthetic_tokenizer):
    with tfds.testing.mock_data(num_examples=20, data_dir=tmp_path):
        pairs = load_tfds_pairs("wmt19_translate/de-en", "en", "de", data_dir=tmp_path)
        batches = list(
            translation_dataset(pairs, synthetic_tokenizer, tokens_per_batch=512, max_length=60)
        )
    assert sum(int(features["source_ids"].shape[0]) for features, _ in batches) > 0
    for features, target_out in batches:
        assert (features["source_ids"].numpy() == EOS_ID).sum() == features["source_ids"].shape[0]
        assert (target_out.numpy() == EOS_ID).sum() == target_out.shape[0]


def test_unknown_language_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"has languages \['de', 'en'\], not \['fr'\]"):
        load_tfds_pairs("wmt19_translate/de-en", "fr", "en", data_dir=tmp_path)
    with pytest.raises(ValueError, match="both 'en'"):
        load_tfds_pairs("wmt19_translate/de-en", "en", "en", data_dir=tmp_path)


def test_unprepared_dataset_without_download_fails_without_downloading(tmp_path):
    with pytest.raises(AssertionError, match="could not find data"):
        load_tfds_pairs("wmt19_translate/de-en", "de", "en", data_dir=tmp_path, download=False)
