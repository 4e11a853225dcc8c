"""The training program's bad input: lines, configs and run folders, all before SentencePiece."""

import re

import pytest
import yaml

from tests.holder import hold_in_child
from tfscones.commands import train
from tfscones.data import ParallelTextError
from tfscones.training import runner
from tfscones.training.config import config_to_dict, load_config
from tfscones.training.resume_check import RunFolderError, check_run_folder

DEMO_CONFIG = "demo_scones_a0.5"


def corrupt_line(path, number, replacement=b"kaputt \xff\xfe"):
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = replacement
    path.write_bytes(b"\n".join(lines))


def test_skip_trains_sentencepiece_on_the_usable_pairs_only(tiny_overrides, tmp_path):
    corrupt_line(tmp_path / "corpus" / "train.de", 5)
    config = load_config(DEMO_CONFIG, tiny_overrides + ["data.on_bad_line=skip"])
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    tokenizer = runner.prepare_tokenizer(config, run_dir)

    assert tokenizer.vocab_size == 400
    written = (run_dir / "spm_source.txt").read_text(encoding="utf-8").split("\n")
    assert len(written) == 600  # 599 pairs and the final newline's empty tail
    assert not any("kaputt" in line for line in written)


def test_error_names_file_and_line_before_sentencepiece(tiny_overrides, tmp_path):
    corrupt_line(tmp_path / "corpus" / "train.en", 7)
    config = load_config(DEMO_CONFIG, tiny_overrides)
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    with pytest.raises(ParallelTextError, match=r"train\.en:7: invalid UTF-8 bytes"):
        runner.prepare_tokenizer(config, run_dir)
    assert not (run_dir / "spm.model").exists()


def test_the_program_reports_a_bad_line_in_one_line(tiny_overrides, tmp_path, capsys):
    corrupt_line(tmp_path / "corpus" / "train.de", 3)
    with pytest.raises(SystemExit) as ended:
        train.main(["--config", DEMO_CONFIG, *tiny_overrides])
    message = str(ended.value.code)
    assert message.startswith("data error: ") and "train.de:3: invalid UTF-8" in message
    assert "\n" not in message


def program_error(arguments) -> str:
    with pytest.raises(SystemExit) as ended:
        train.main(arguments)
    message = str(ended.value.code)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.steps=0", r"command line: training.steps: 0 is out of range"),
        ("model.head=softmaxx", r"command line: model.head: unknown head 'softmaxx'"),
        ("model.preset=huge", r"command line: model.preset: unknown preset 'huge'"),
        ("model.arguments={hidden_dim: 30}", r"command line: model.arguments: .*hidden_dim"),
        ("model.arguments={attention_heads: 2}", r"command line: model.arguments: .*attention"),
        ("model.head=softmax", r"demo_scones_a0.5.yaml: loss.alpha: is the SCONES weight"),
        ("data.dev_source=missing.de", r"command line: data.dev_source: no such file"),
        ("model.head={name: entmax, alpha: 0.5}", r"command line: model.head: .*alpha"),
    ],
)
def test_config_errors_end_in_one_line_before_sentencepiece(
    tiny_overrides, tmp_path, override, expected
):
    message = program_error(["--config", DEMO_CONFIG, *tiny_overrides, override])
    assert message.startswith("config error: ")
    assert re.search(expected, message), message
    assert not (tmp_path / "run" / "spm.model").exists()


def test_a_folder_of_another_config_is_refused_naming_what_differs(tiny_overrides, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    earlier = load_config(DEMO_CONFIG, tiny_overrides + ["data.vocabulary_size=300"])
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(earlier)))
    (run_dir / "spm.model").write_bytes(b"the earlier run's vocabulary")

    message = program_error(["--config", DEMO_CONFIG, *tiny_overrides])

    assert message.startswith("run folder error: ")
    assert "data.vocabulary_size: 300 there, 400 now" in message
    assert "output_dir" in message
    assert (run_dir / "spm.model").read_bytes() == b"the earlier run's vocabulary"


def test_a_longer_budget_resumes_the_same_run(tiny_overrides, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    earlier = load_config(DEMO_CONFIG, tiny_overrides + ["training.steps=3"])
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(earlier)))
    check_run_folder(load_config(DEMO_CONFIG, tiny_overrides + ["training.steps=9"]), run_dir)


def test_a_second_train_into_a_held_run_folder_is_refused_in_one_line(tiny_overrides, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = hold_in_child(run_dir)
    try:
        message = program_error(["--config", DEMO_CONFIG, *tiny_overrides])
    finally:
        holder.kill()
        holder.wait()
    assert message == (
        f"run folder error: {run_dir} is in use by another process (pid {holder.pid}): a run "
        "folder is one process's at a time; wait for it to end, or give another output_dir"
    )
    assert sorted(path.name for path in run_dir.iterdir()) == [".lock"]  # nothing else written


def test_run_files_without_a_config_are_refused(tiny_overrides, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "backup" / "chief").mkdir(parents=True)
    config = load_config(DEMO_CONFIG, tiny_overrides)
    check_run_folder(config, run_dir)  # empty folders hold no run
    (run_dir / "backup" / "chief" / "checkpoint").write_text("a backup")
    with pytest.raises(RunFolderError, match="holds backup of a run without its config.yaml"):
        check_run_folder(config, run_dir)


@pytest.mark.parametrize(
    ("size", "reason"), [(60000, "too high"), (16, "smaller than required_chars")]
)
def test_a_vocabulary_sentencepiece_cannot_build_is_refused_and_leaves_no_config(
    tiny_overrides, tmp_path, size, reason
):
    run_dir = tmp_path / "run"
    overrides = [*tiny_overrides, f"output_dir={run_dir}"]
    message = program_error(["--config", DEMO_CONFIG, *overrides, f"data.vocabulary_size={size}"])

    assert message.startswith(f"data error: SentencePiece cannot build a vocabulary of {size}")
    assert reason in message and "data.vocabulary_size" in message and "\n" not in message
    assert not (run_dir / "config.yaml").exists()
    corrected = load_config(DEMO_CONFIG, overrides)
    check_run_folder(corrected, run_dir)  # the corrected rerun is not "another config"


def test_a_run_folder_from_before_a_key_existed_resumes_with_its_default(tiny_overrides, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = load_config(DEMO_CONFIG, tiny_overrides)
    older = config_to_dict(config)
    del older["data"]["vocabulary"], older["training"]["selection_metric"]
    (run_dir / "config.yaml").write_text(yaml.safe_dump(older))
    check_run_folder(config, run_dir)
    changed = load_config(DEMO_CONFIG, tiny_overrides + ["training.selection_metric=chrf"])
    with pytest.raises(RunFolderError, match="training.selection_metric: 'bleu' there, 'chrf'"):
        check_run_folder(changed, run_dir)


def test_a_run_folder_under_a_file_is_refused_in_one_line(tiny_overrides, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    run_dir = tmp_path / "file" / "run"
    message = program_error(["--config", DEMO_CONFIG, *tiny_overrides, f"output_dir={run_dir}"])
    assert (
        message
        == f"run folder error: the run folder {run_dir}: {tmp_path / 'file'} is not a folder"
    )
