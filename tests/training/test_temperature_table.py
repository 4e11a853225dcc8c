import json

import pytest

from tfscones.commands import temperature_table


def write_report(folder, bleus):
    """A minimal analyze report: {run: (beam-4 BLEU, exact BLEU, beam-4 BLEU on the same)}."""
    folder.mkdir()
    analyses = {
        name: {
            "beam_curve": [{"beam_size": 1, "bleu": 0.0}, {"beam_size": 4, "bleu": beam4}],
            "exact": {"bleu": exact, "beam_bleu": same},
        }
        for name, (beam4, exact, same) in bleus.items()
    }
    (folder / "report.json").write_text(json.dumps(analyses), encoding="utf-8")
    return folder


def test_the_table_puts_exact_search_beside_softmax_beam_4(tmp_path, capsys):
    low = write_report(
        tmp_path / "synthetic-gamma0.1",
        {
            "synthetic-softmax-gamma0.1": (30.0, 20.0, 31.0),
            "synthetic-scones-a0.2-gamma0.1": (29.0, 28.5, 30.0),
        },
    )
    high = write_report(
        tmp_path / "synthetic-gamma1.0",
        {
            "synthetic-softmax-gamma1.0": (10.0, 4.0, 11.0),
            "synthetic-scones-a0.2-gamma1.0": (9.0, 8.0, 9.5),
        },
    )
    temperature_table.main([str(high), str(low)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| model | γ=0.1 beam-4 | γ=0.1 exact − softmax | γ=1.0 beam-4")
    assert lines[2] == "| synthetic-softmax | 30.0 | -11.0 | 10.0 | -7.0 |"
    assert lines[3] == "| synthetic-scones-a0.2 | 29.0 | -2.5 | 9.0 | -3.0 |"


def test_a_folder_without_a_temperature_is_named(tmp_path):
    folder = write_report(tmp_path / "report", {"run": (1.0, 1.0, 1.0)})
    with pytest.raises(ValueError, match="report: the folder name"):
        temperature_table.read_reports([folder])
