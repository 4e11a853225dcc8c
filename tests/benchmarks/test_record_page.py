"""Benchmark records and the page made from them."""

import json

import pytest

import tfscones
from benchmarks.page import write_page
from benchmarks.record import record, record_name

FAKE_BENCHMARK = '''"""Seconds per step of nothing at all."""
import sys

print("| step | ms |")
print("|---|---|")
print(f"| {sys.argv[1]} | 1.5 |")
'''


@pytest.fixture
def fake_module(tmp_path, monkeypatch):
    (tmp_path / "fake_benchmark.py").write_text(FAKE_BENCHMARK)
    (tmp_path / "failing_benchmark.py").write_text("raise SystemExit(3)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fake_benchmark"


def test_a_record_keeps_the_output_the_command_and_the_machine(fake_module, tmp_path):
    path = record(fake_module, ["--size", "8"], tmp_path / "records")

    entry = json.loads(path.read_text())
    assert path.name == "fake_benchmark--size-8.json"
    assert entry["command"] == "python -m fake_benchmark --size 8"
    assert entry["output"] == "| step | ms |\n|---|---|\n| --size | 1.5 |\n"
    assert entry["machine"]["cores"] >= 1 and entry["machine"]["description"]
    assert entry["code"]["tfscones"] == tfscones.__version__


def test_a_failed_benchmark_writes_no_record(fake_module, tmp_path):
    assert record("failing_benchmark", [], tmp_path / "records") is None
    assert not list((tmp_path / "records").glob("*.json"))


def test_the_page_shows_each_record_and_is_the_same_bytes_again(fake_module, tmp_path):
    records = tmp_path / "records"
    record(fake_module, ["--size", "8"], records)
    out = tmp_path / "benchmarks.md"

    page = write_page(records, out)

    assert "## `fake_benchmark`\n\nSeconds per step of nothing at all." in page
    assert "```bash\npython -m fake_benchmark --size 8\n```" in page
    assert "| --size | 1.5 |" in page
    assert write_page(records, out) == page


def test_a_page_without_records_says_so(tmp_path):
    assert "No benchmark has been recorded yet." in write_page(tmp_path, tmp_path / "page.md")


@pytest.mark.parametrize(
    ("module", "arguments", "name"),
    [
        ("benchmarks.loss_speed", [], "loss_speed"),
        (
            "benchmarks.decoding_speed",
            ["--run", "runs/a b", "--count", "64"],
            "decoding_speed--run-runs-a-b-count-64",
        ),
    ],
)
def test_record_names_say_which_benchmark_with_which_arguments(module, arguments, name):
    assert record_name(module, arguments) == name


def test_long_arguments_make_a_short_name_that_still_tells_commands_apart():
    runs = ["--softmax", "docs/reproduction/multi30k-softmax-seed1", "--source", "x" * 200]
    names = {record_name("benchmarks.ctranslate2_heads", [*runs, "--threads", t]) for t in "12"}
    assert len(names) == 2
    for name in names:
        assert name.startswith("ctranslate2_heads--softmax-docs-reproduction-multi30k")
        assert len(name) <= len("ctranslate2_heads--") + 120
