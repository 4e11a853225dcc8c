"""The `tfscones` console command: subcommands dispatch to their modules."""

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from tfscones import cli
from tfscones.commands import demo


def test_help_lists_every_subcommand(capsys):
    cli.main(["--help"])
    shown = capsys.readouterr().out
    assert all(f"  {name} " in shown for name in cli.SUBCOMMANDS)


def test_an_unknown_subcommand_is_named():
    with pytest.raises(SystemExit, match="tfscones: unknown subcommand 'trian'"):
        cli.main(["trian", "--config", "demo_softmax"])


@pytest.mark.parametrize("name", cli.SUBCOMMANDS)
def test_every_subcommand_parses_its_arguments_under_its_own_name(name, capsys):
    module = importlib.import_module(f"tfscones.commands.{cli.SUBCOMMANDS[name][0]}")
    assert "prog" in inspect.signature(module.main).parameters
    with pytest.raises(SystemExit) as exit_info:
        cli.main([name, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: tfscones {name}")


def ctrl_c(*arguments, **keywords):
    raise KeyboardInterrupt


def test_ctrl_c_while_tensorflow_loads_ends_in_one_line_and_status_130(monkeypatch, capsys):
    monkeypatch.setattr(cli, "import_tensorflow_quietly", ctrl_c)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "docs/reproduction"])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "tfscones report: interrupted\n"


def test_ctrl_c_in_a_command_without_its_own_message_ends_the_same_way(monkeypatch, capsys):
    monkeypatch.setattr(importlib.import_module("tfscones.commands.report"), "main", ctrl_c)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "docs/reproduction"])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "tfscones report: interrupted\n"


def test_translate_help_names_each_setting_by_its_flag(capsys):
    with pytest.raises(SystemExit):
        cli.main(["translate", "--help"])
    usage = capsys.readouterr().out
    assert "[--beam BEAM]" in usage and "[--length-penalty LENGTH_PENALTY]" in usage
    assert "BEAM_SIZE" not in usage


def test_train_lists_the_shipped_configs(capsys):
    cli.main(["train", "--list-configs"])
    assert {"demo_softmax", "demo_scones_a0.5", "multi30k_softmax"} <= set(
        capsys.readouterr().out.split()
    )


def test_the_installed_console_script_runs_a_subcommand(tmp_path):
    script = Path(sys.executable).parent / "tfscones"
    if not script.exists():
        pytest.skip("tfscones is not installed with its console script in this environment")
    finished = subprocess.run(
        [str(script), "export", "--out", str(tmp_path / "exports" / "1")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 1
    assert (
        finished.stderr.splitlines()[-1]
        == "export error: give --run, or both --checkpoint and --spm"
    )


def test_the_demo_names_a_tfscones_command_that_runs():
    command = demo.tfscones_command().split()
    finished = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0 and "subcommands:" in finished.stdout


def test_python_dash_m_tfscones_is_the_command():
    finished = subprocess.run(
        [sys.executable, "-m", "tfscones", "--help"], capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0 and "  train " in finished.stdout
