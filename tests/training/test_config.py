from pathlib import Path

import pytest

from tfscones.training.config import (
    CONFIG_DIR,
    PACKAGE_DIR,
    ConfigError,
    data_path,
    load_config,
    shipped_configs,
)
from tfscones.training.resume_check import RunFolderError, check_run_folder

CONFIGS = CONFIG_DIR


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_config_loads(path):
    config = load_config(path)
    assert config.name
    if "_scones_" in path.stem:
        assert config.model.head == "sigmoid"
        assert config.loss.alpha == float(path.stem.split("_a")[-1].split("_")[0])
    if path.stem.endswith("_dropout0.1"):
        assert config.model.dropout == 0.1


def test_shipped_configs_load_by_name_with_their_demo_corpus_inside_the_package():
    config = load_config("demo_softmax", ["training.steps=7"])
    assert config == load_config(CONFIGS / "demo_softmax.yaml", ["training.steps=7"])
    assert config.training.steps == 7 and "demo_softmax" in shipped_configs()
    files = [data_path(path) for path in config.data.train_source + [config.data.test_target]]
    assert all(path.is_file() and PACKAGE_DIR in path.parents for path in files)
    assert data_path("corpus/train.de") == Path("corpus/train.de")


def test_an_unknown_config_name_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match="no shipped config is named 'demo_sofmax'.*demo_softmax"):
        load_config("demo_sofmax")
    with pytest.raises(ConfigError, match="elsewhere/demo_softmax.yaml does not exist"):
        load_config("elsewhere/demo_softmax.yaml")


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
    with pytest.raises(ConfigError, match="command line: data.vocabulary_size: must be int"):
        load_config(tmp_path / "ok.yaml", ["data.vocabulary_size=many"])
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(tmp_path / "ok.yaml", ["training.steps"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    "override, key, allowed",
    [
        ("training.steps=0", "training.steps", r"\[1, inf\)"),
        ("training.steps_per_epoch=-5", "training.steps_per_epoch", r"\[1, inf\)"),
        ("training.learning_rate=0", "training.learning_rate", r"\(0, inf\)"),
        ("training.learning_rate=-1e-3", "training.learning_rate", r"\(0, inf\)"),
        ("data.tokens_per_batch=0", "data.tokens_per_batch", r"\[1, inf\)"),
        ("data.tokens_per_batch=20", "data.tokens_per_batch", "at least 66"),
        ("model.dropout=1.0", "model.dropout", r"\[0, 1\)"),
        ("loss.label_smoothing=1.5", "loss.label_smoothing", r"\[0, 1\)"),
        ("training.optimizer=sgd", "training.optimizer", "adam, adamw, lamb"),
        ("data.on_bad_line=ignore", "data.on_bad_line", "error, skip"),
        ("training.jit_compile=yes please", "training.jit_compile", "auto, True, False"),
        ("training.ema_momentum=1", "training.ema_momentum", r"\[0, 1\)"),
        ("training.learning_rate=.nan", "training.learning_rate", r"\(0, inf\)"),
        ("training.learning_rate=.inf", "training.learning_rate", r"\(0, inf\)"),
        ("loss.alpha=.inf", "loss.alpha", r"\(0, inf\)"),
        ("loss.label_smoothing=1.0", "loss.label_smoothing", r"\[0, 1\)"),
    ],
)
def test_values_out_of_range_name_origin_key_and_what_is_allowed(tmp_path, override, key, allowed):
    (tmp_path / "ok.yaml").write_text("name: ok\ndata: {max_length: 64}\n")
    with pytest.raises(ConfigError, match=rf"^command line: {key}: .*allowed: .*{allowed}"):
        load_config(tmp_path / "ok.yaml", [override])


def test_exponents_without_a_dot_are_numbers(tmp_path):
    (tmp_path / "ok.yaml").write_text("name: ok\n")
    assert (
        load_config(tmp_path / "ok.yaml", ["training.learning_rate=3e-4"]).training.learning_rate
        == 3e-4
    )


def test_a_boolean_is_not_a_number(tmp_path):
    (tmp_path / "ok.yaml").write_text("training: {steps: true}\n")
    with pytest.raises(ConfigError, match=r"ok.yaml: training.steps: must be int \(got True\)"):
        load_config(tmp_path / "ok.yaml")
    (tmp_path / "fine.yaml").write_text("name: fine\n")
    with pytest.raises(ConfigError, match="command line: training.learning_rate: must be float"):
        load_config(tmp_path / "fine.yaml", ["training.learning_rate=false"])


def test_an_out_of_range_value_names_the_file_that_set_it(tmp_path):
    (tmp_path / "corpus.yaml").write_text("name: c\ntraining: {warmup_steps: -3}\n")
    (tmp_path / "head.yaml").write_text("base: corpus.yaml\nmodel: {head: sigmoid}\n")
    with pytest.raises(ConfigError, match=r"corpus.yaml: training.warmup_steps: -3 is out of"):
        load_config(tmp_path / "head.yaml")


def test_malformed_yaml_names_the_file(tmp_path):
    (tmp_path / "broken.yaml").write_text("training: {steps: 3\nmodel: [\n")
    with pytest.raises(ConfigError, match=r"broken.yaml: not a valid YAML file: .*line"):
        load_config(tmp_path / "broken.yaml")
    (tmp_path / "binary.yaml").write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"binary.yaml: not a valid YAML file"):
        load_config(tmp_path / "binary.yaml")


def test_a_key_given_twice_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("name: a\ntraining:\n  learning_rate: 0.1\n  learning_rate: 0.2\n")
    with pytest.raises(ConfigError, match=r"twice.yaml: .*'learning_rate' is given twice.*line 4"):
        load_config(path)
    (tmp_path / "ok.yaml").write_text("name: ok\n")
    with pytest.raises(ConfigError, match="'vocabulary_size' is given twice"):
        load_config(tmp_path / "ok.yaml", ["data={vocabulary_size: 100, vocabulary_size: 200}"])


@pytest.mark.parametrize("name", ["../elsewhere", "a/b", ".", "..", ".hidden", " padded", ""])
def test_a_run_name_that_is_not_one_folder_name_is_refused(name):
    with pytest.raises(ConfigError, match=r"command line: name: must be one plain folder name"):
        load_config("demo_softmax", [f"name={name!r}"])


def test_a_plain_run_name_names_its_folder_under_runs():
    assert load_config("demo_softmax", ["name=my-run.2"]).run_dir == Path("runs/my-run.2")


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    "text",
    ["name: run\ntraining: {steps: &n 5, steps_per_epoch: *n}\n", ALIAS_BOMB],
    ids=["alias", "alias bomb"],
)
def test_a_yaml_alias_is_refused_naming_file_and_line(tmp_path, text):
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    with pytest.raises(
        ConfigError, match=r"aliases.yaml: not a valid YAML file: .*alias \*\w.*line"
    ):
        load_config(path)


def test_a_yaml_alias_in_a_run_folders_config_is_refused_before_it_expands(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(ALIAS_BOMB)
    with pytest.raises(RunFolderError, match=r"config.yaml .*alias \*a is not allowed"):
        check_run_folder(load_config("demo_softmax"), run_dir)


def test_a_base_chain_that_is_a_cycle_is_an_error_naming_the_files(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\nname: a\n")
    (tmp_path / "b.yaml").write_text("base: sub/../a.yaml\n")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match=r"b.yaml: base: the base chain is a cycle: .*a.yaml -> "):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "self.yaml").write_text("base: self.yaml\n")
    with pytest.raises(ConfigError, match="self.yaml: base: the base chain is a cycle"):
        load_config(tmp_path / "self.yaml")


def test_a_package_path_may_not_leave_the_package():
    with pytest.raises(ConfigError, match=r"'tfscones:../../../etc/passwd' leads out of the"):
        data_path("tfscones:../../../etc/passwd")
    with pytest.raises(
        ConfigError, match=r"data.test_source: .*leads out of the installed package"
    ):
        load_config("demo_softmax", ["data.test_source=tfscones:../../../etc/passwd"])
    with pytest.raises(ConfigError, match=r"data.train_tsv: .*leads out of the installed package"):
        load_config("demo_softmax", ["data.train_tsv=[tfscones:configs/g2p.yaml, tfscones:../x]"])
    assert data_path("tfscones:data/../data/demo/test.de").is_file()


def test_a_source_file_that_is_its_own_target_is_refused(tmp_path):
    (tmp_path / "both.txt").write_text("Hallo.\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "both.txt")
    pair = [
        f"data.train_source={tmp_path / 'both.txt'}",
        f"data.train_target={tmp_path / 'link.txt'}",
    ]
    with pytest.raises(
        ConfigError, match=r"data.train_target: .*link.txt' is the file of data.train_source too"
    ):
        load_config("demo_softmax", pair)
    assert load_config("demo_softmax", [pair[0]]).data.train_source == str(tmp_path / "both.txt")
