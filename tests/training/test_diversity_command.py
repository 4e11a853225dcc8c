import json

import pytest

from tfscones.commands import diversity as diversity_command
from tfscones.data.demo import DEMO_DIR
from tfscones.evaluation import diversity
from tfscones.training import runner
from tfscones.training.config import CONFIG_DIR as CONFIGS
from tfscones.training.config import load_config

K = 2
SEED = "[0, 9223372036854775807]"


def trained_run(overrides, config_name, folder):
    config = load_config(
        CONFIGS / config_name,
        [*overrides, f"output_dir={folder}", "training.steps=2", "training.steps_per_epoch=2"],
    )
    runner.train(config)
    return folder


@pytest.mark.slow  # 22 s: trains a hard MoE from a config, then runs the command
def test_hard_moe_trains_from_a_config_and_the_command_compares_it(tiny_overrides, tmp_path):
    moe = trained_run(
        tiny_overrides + [f"model.num_experts={K}"], "demo_moe_k5.yaml", tmp_path / "moe"
    )
    history = (moe / "history.csv").read_text().splitlines()[0].split(",")
    assert {"expert_0_share", "expert_1_share", "expert_perplexity"} <= set(history)
    plain = trained_run(tiny_overrides, "demo_softmax.yaml", tmp_path / "plain")
    multiref = tmp_path / "multiref.jsonl"
    lines = (DEMO_DIR / "multiref-dev.de-en.jsonl").read_text(encoding="utf-8").splitlines()[:6]
    multiref.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "report"

    diversity_command.main(
        ["--moe-run", str(moe), "--baseline-run", str(plain), "--multiref", str(multiref)]
        + ["--k", str(K), "--out", str(out)]
    )

    table = (out / "diversity.md").read_text(encoding="utf-8").splitlines()
    assert len(table) == 2 + 5 + 1  # header, 5 methods, human
    assert table[2].startswith(f"| hard-MoE, {K} experts |")
    results = json.loads((out / "diversity.json").read_text())
    assert len(results) == 5
    for report in results.values():
        assert report["num_hypotheses"] == K
        assert 0.0 <= report["pairwise_bleu"] <= 100.0
        assert 0.0 <= report["references_covered"] <= 2.0
    references = [json.loads(line)["refs"] for line in lines]
    human = diversity.human_pairwise_bleu(references)
    assert results["sampling"]["human_pairwise_bleu"] == pytest.approx(human)
    assert (out / "diversity.png").stat().st_size > 0


def test_bad_multi_reference_files_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"src": "a", "refs": ["b"]}\n{"src": "c"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a JSON line with 'src' and 'refs'"):
        diversity_command.read_multiref(path)
    source, reference = tmp_path / "s.de", tmp_path / "r.en"
    source.write_text("a\nb\n", encoding="utf-8")
    reference.write_text("x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="r.en has 1 lines but .*s.de has 2"):
        diversity_command.read_references(source, [reference])


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--seed", "99999999999999999999", f"must be a whole number in {SEED} (got {10**20 - 1})"),
        ("--seed", "-1", f"must be a whole number in {SEED} (got -1)"),
        ("--diversity-strength", "1e308", "must be a finite number in [0, 1000] (got 1e+308)"),
        ("--diversity-strength", "nan", "must be a finite number in [0, 1000] (got nan)"),
        ("--k", "99999999999", "must be a whole number in [1, 2147483647] (got 99999999999)"),
        ("--top-k", "0", "must be a whole number in [1, 2147483647] (got 0)"),
    ],
)
def test_numeric_flags_are_refused_with_the_decoders_ranges(tmp_path, capsys, flag, value, message):
    arguments = ["--baseline-run", str(tmp_path), "--multiref", str(tmp_path / "m.jsonl")]
    with pytest.raises(SystemExit) as refused:
        diversity_command.parse_arguments([*arguments, flag, value])
    assert refused.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f": error: argument {flag}: {message}")
