from pathlib import Path

import pytest

from training.config import ConfigError, load_config

CONFIGS = Path(__file__).resolve().parents[2] / "training" / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert config.name
    if "_scones_" in path.stem:
        assert config.model.head == "sigmoid"
        assert config.loss.alpha == float(path.stem.split("_a")[-1])


def test_base_files_and_overrides_combine(tmp_path):
    (tmp_path / "corpus.yaml").write_text("name: c\ndata: {vocabulary_size: 100, max_length: 9}\n")
    (tmp_path / "head.yaml").write_text("base: corpus.yaml\nmodel: {head: sigmoid}\n")
    config = load_config(tmp_path / "head.yaml", ["data.max_length=12", "training.steps=3"])
    assert (config.data.vocabulary_size, config.data.max_length) == (100, 12)
    assert (config.model.head, config.training.steps) == ("sigmoid", 3)
    assert config.run_dir == Path("runs") / "c"


def test_unknown_keys_are_named_with_file_and_allowed_keys(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("training: {stpes: 3}\n")
    with pytest.raises(
        ConfigError, match=r"typo.yaml.*training.stpes.*allowed in training:.*steps"
    ):
        load_config(path)
    (tmp_path / "ok.yaml").write_text("name: ok\n")
    with pytest.raises(ConfigError, match="unknown config key.*data.vocab"):
        load_config(tmp_path / "ok.yaml", ["data.vocab=8000"])


def test_wrong_types_and_malformed_overrides_are_errors(tmp_path):
    (tmp_path / "ok.yaml").write_text("name: ok\n")
    with pytest.raises(ConfigError, match="data.vocabulary_size must be int"):
        load_config(tmp_path / "ok.yaml", ["data.vocabulary_size=many"])
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(tmp_path / "ok.yaml", ["training.steps"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
