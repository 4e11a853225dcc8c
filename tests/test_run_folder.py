"""The run folder's layout as one value, and the flag type that checks a run can be decoded."""

import argparse
import os
import signal

import pytest

from tests.holder import hold_in_child
from tfscones.commands.argument_types import decodable_run
from tfscones.run_folder import RunFolder, RunFolderBusy, distinct_names


def test_a_run_folder_names_its_files_inside_it(tmp_path):
    run = RunFolder(str(tmp_path))
    paths = [run.config, run.tokenizer, run.model, run.history, run.results, run.test_hypotheses]
    paths += [run.last_checkpoint, run.backup, run.logs, run.evaluation, run.analysis]
    assert len(set(paths)) == len(paths)
    assert all(tmp_path in path.parents for path in paths)
    assert run.tokenizer == run.tokenizer_prefix.with_suffix(".model")
    assert run.last_checkpoint.parent == run.checkpoints


def test_a_run_is_decodable_with_its_model_and_tokenizer_only(tmp_path):
    run = RunFolder(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        run.check_decodable()
    run.path.mkdir()
    run.model.write_text("")
    with pytest.raises(FileNotFoundError, match=r"has no spm\.model: a training run folder holds"):
        run.check_decodable()
    with pytest.raises(argparse.ArgumentTypeError, match=r"has no spm\.model"):
        decodable_run(str(run.path))
    run.tokenizer.write_text("")
    run.check_decodable()
    assert decodable_run(str(run.path)) == run.path


def test_a_held_run_folder_refuses_a_second_process_naming_the_holder(tmp_path):
    child = hold_in_child(tmp_path)
    try:
        with pytest.raises(RunFolderBusy, match=rf"in use by another process \(pid {child.pid}\)"):
            with RunFolder(tmp_path).hold():
                pass
    finally:
        child.kill()
        child.wait()


def test_a_sigkilled_holder_leaves_the_run_folder_free(tmp_path):
    child = hold_in_child(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait()
    with RunFolder(tmp_path).hold():
        assert RunFolder(tmp_path).lock.read_text() == f"{os.getpid()}\n"
    with RunFolder(tmp_path).hold():  # released at the end of the block
        pass


def test_runs_of_one_name_are_told_apart_by_as_many_parents_as_it_takes():
    runs = ["runs/a/base", "runs/b/base", "other/base", "runs/other"]
    assert distinct_names(runs) == ["a/base", "b/base", "other/base", "other"]
    assert distinct_names(["x/base", "y/base"]) == ["x/base", "y/base"]
    assert distinct_names(["base"]) == ["base"]


def test_one_folder_given_twice_by_any_name_is_refused(tmp_path):
    (tmp_path / "runs" / "base").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    twice = [tmp_path / "runs" / "base", tmp_path / "link" / "base"]
    with pytest.raises(ValueError, match=f"one folder is given twice: {twice[0]} and {twice[1]}"):
        distinct_names(twice)
