import pytest

from tfscones import synthetic
from tfscones.commands import synthetic as synthetic_command


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_command_writes_corpora_parameters_and_summary(tmp_path, pairs, capsys):
    source = write(tmp_path / "train.src", [s for s, _ in pairs[:300]])
    target = write(tmp_path / "train.tgt", [t for _, t in pairs[:300]])
    dev = write(tmp_path / "dev.src", [s for s, _ in pairs[300:320]])
    out = tmp_path / "out"
    synthetic_command.main(
        [
            *("--source", str(source), "--target", str(target), "--out", str(out)),
            *("--dev-source", str(dev), "--temperatures", "0.1", "1", "--em-iterations", "3"),
        ]
    )
    for gamma in ("0.1", "1.0"):
        folder = out / f"gamma-{gamma}"
        for split, lines in (("train", 300), ("dev", 20)):
            copied = (folder / f"{split}.src").read_text(encoding="utf-8").splitlines()
            sampled = (folder / f"{split}.tgt").read_text(encoding="utf-8").splitlines()
            assert len(copied) == len(sampled) == lines and all(sampled)
        assert copied == [s for s, _ in pairs[300:320]]
        assert not (folder / "test.src").exists()
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| 0.1 |" in summary and "| 1.0 |" in summary and "| original targets |" in summary
    assert synthetic.IBM3Parameters.load(out / "ibm3").p1 >= 0
    printed = capsys.readouterr().out
    assert str(out / "gamma-1.0" / "dev.tgt") in printed and str(out / "summary.md") in printed


def test_command_names_the_file_of_mismatched_inputs(tmp_path):
    source = write(tmp_path / "short.src", ["s1 s2", "s3"])
    target = write(tmp_path / "long.tgt", ["t1a t2a", "t3a", "t4a"])
    arguments = ["--source", str(source), "--target", str(target), "--temperatures", "0.5"]
    with pytest.raises(SystemExit, match="synthetic: error: .*short.src has 2 lines.*long.tgt"):
        synthetic_command.main([*arguments, "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_command_rejects_a_bad_temperature(tmp_path, capsys):
    with pytest.raises(SystemExit):
        synthetic_command.main(
            ["--source", "a", "--target", "b", "--out", "c", "--temperatures", "-1"]
        )
    assert "temperature must be in (0, inf)" in capsys.readouterr().err
