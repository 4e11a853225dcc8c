"""The export program and its SavedModel: contents, fresh-process loading, ops, saved_model_cli."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests import harness
from tests.export.conftest import BEAM_SIZE, NBEST, save_tiny_model
from tfscones.commands import export as export_command
from tfscones.decoding import (
    score_with_confidence,
    source_ids_for_model,
    translate,
    translate_with_confidence,
)
from tfscones.decoding.beam import beam_search
from tfscones.serving import TranslationModule
from tfscones.serving import export as savedmodel

REPOSITORY = Path(__file__).resolve().parents[2]
SIGNATURES = {"translate", "translate_beam", "nbest", "translate_ids", "score"}
PY_FUNCS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}

# Runs in a fresh interpreter that may import only tensorflow and tensorflow_text: it lists the
# SavedModel's op types that are not registered there, loads the SavedModel, runs every
# signature on the inputs and writes the outputs as JSON.
FRESH_PROCESS = r"""
import importlib.abc, json, sys
import numpy as np

class Forbid(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tfscones", "keras_hub", "export"):
            raise ImportError(f"the SavedModel must not need {name}")

sys.meta_path.insert(0, Forbid())
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

def text(array):
    decode = np.vectorize(lambda value: value.decode("utf-8"), otypes=[object])
    return decode(array) if array.size else array

export_dir, inputs_file, outputs_file = sys.argv[1:]
proto = saved_model_pb2.SavedModel()
with open(f"{export_dir}/saved_model.pb", "rb") as f:
    proto.ParseFromString(f.read())
graph = proto.meta_graphs[0].graph_def
functions = {function.signature.name for function in graph.library.function}
ops = {node.op for node in graph.node}
ops |= {node.op for function in graph.library.function for node in function.node_def}
unregistered = sorted(op for op in ops - functions if op_def_registry.get(op) is None)

loaded = tf.saved_model.load(export_dir)
results = {}
for name, inputs in json.load(open(inputs_file)).items():
    function = loaded.signatures[name]
    specs = function.structured_input_signature[1]
    tensors = {key: tf.constant(value, specs[key].dtype) for key, value in inputs.items()}
    results[name] = {
        key: (text(value.numpy()) if value.dtype == tf.string else value.numpy()).tolist()
        for key, value in function(**tensors).items()
    }
json.dump({
    "unregistered": unregistered,
    "ops": sorted(ops - functions),
    "outputs": results,
    "imported": sorted({m.split(".")[0] for m in sys.modules} & {"tfscones", "keras_hub"}),
}, open(outputs_file, "w"))
"""


def saved_model_ops(export_dir: Path) -> set[str]:
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    ops = {node.op for node in graph.node}
    return ops | {node.op for f in graph.library.function for node in f.node_def}


def signature_inputs(sentences, targets, module) -> dict[str, dict]:
    limit = module.limits.max_source_tokens
    ids = source_ids_for_model(module.tokenizer, tf.constant(sentences), limit).to_tensor()
    return {
        "translate": {"source": sentences},
        "translate_beam": {"source": sentences},
        "nbest": {"source": sentences},
        "translate_ids": {"source_ids": ids.numpy().tolist()},
        "score": {"source": sentences, "target": targets},
    }


def module_outputs(module, name: str, inputs: dict) -> dict[str, np.ndarray]:
    tensors = {
        key: tf.constant(value, tf.int32 if key == "source_ids" else tf.string)
        for key, value in inputs.items()
    }
    return {key: value.numpy() for key, value in getattr(module, name)(**tensors).items()}


def text(values) -> list:
    """Nested lists of str from arrays or lists of bytes or str."""
    if isinstance(values, (list, np.ndarray)):
        return [text(value) for value in values]
    return values.decode("utf-8") if isinstance(values, bytes) else values


def assert_same_outputs(actual: dict, expected: dict) -> None:
    assert set(actual) == set(expected)
    for key, value in expected.items():
        if value.dtype == object:
            assert text(actual[key]) == text(value), key
        else:
            np.testing.assert_allclose(np.asarray(actual[key]), value, rtol=1e-5, atol=1e-5)


def test_export_writes_a_servable_version_with_its_limits(export_dir, module):
    assert (export_dir / "saved_model.pb").is_file()
    assert (export_dir / "variables" / "variables.index").is_file()
    assert not [p for p in export_dir.parent.iterdir() if p.name.startswith(".")]
    info = json.loads((export_dir / savedmodel.EXPORT_INFO).read_text())
    assert set(info["signatures"]) == SIGNATURES and info["default_signature"] == "translate"
    assert info["limits"]["max_batch_size"] == module.limits.max_batch_size
    beam = module.searches["nbest"].settings
    assert info["searches"]["nbest"] == {"method": "beam", **dataclasses.asdict(beam)}
    assert info["searches"]["translate"] == {"method": "greedy"}
    # Made like any folder (not private, as a temporary folder would be): a server can read it.
    umask = os.umask(0)
    os.umask(umask)
    assert export_dir.stat().st_mode & 0o777 == 0o777 & ~umask


def test_a_tied_model_exports_its_transposed_table_and_translates_alike(
    run_dir, tied_checkpoint, tokenizer, sentences, tmp_path
):
    out = tmp_path / "tied" / "1"
    savedmodel.export_run(out, checkpoint=tied_checkpoint, spm=run_dir / "spm.model")
    model = keras.models.load_model(tied_checkpoint)

    checkpoint = str(out / "variables" / "variables")
    table = model.token_embedding.embeddings
    transposed = [table.shape[1], table.shape[0]]
    frozen = [name for name, shape in tf.train.list_variables(checkpoint) if shape == transposed]
    assert len(frozen) == 1
    np.testing.assert_array_equal(
        tf.train.load_variable(checkpoint, frozen[0]), tf.transpose(table)
    )
    loaded = tf.saved_model.load(str(out))
    module = TranslationModule(model, tokenizer)
    translations = set()
    for name in ("translate", "translate_beam"):
        outputs = loaded.signatures[name](source=tf.constant(sentences))
        outputs = {key: value.numpy() for key, value in outputs.items()}
        assert_same_outputs(outputs, module_outputs(module, name, {"source": sentences}))
        translations.update(text(outputs["translations"]))
    assert len(translations) > 1


@pytest.mark.parametrize("head", list(harness.EVERY_HEAD))
def test_every_head_exports_and_its_loaded_signatures_equal_the_module(
    head, run_dir, tokenizer, sentences, targets, tmp_path
):
    checkpoint = tmp_path / "model.keras"
    save_tiny_model(checkpoint, seed=11, head=head)
    out = tmp_path / "export" / "1"
    savedmodel.export_run(out, checkpoint=checkpoint, spm=run_dir / "spm.model")
    loaded = tf.saved_model.load(str(out))
    module = TranslationModule(keras.models.load_model(checkpoint), tokenizer)
    assert repr(module.model.head) == repr(harness.EVERY_HEAD[head])
    for name in ("translate_beam", "score"):
        inputs = signature_inputs(sentences, targets, module)[name]
        outputs = loaded.signatures[name](**{key: tf.constant(v) for key, v in inputs.items()})
        assert_same_outputs(
            {key: value.numpy() for key, value in outputs.items()},
            module_outputs(module, name, inputs),
        )


def test_loaded_signatures_equal_the_in_process_module(
    loaded, module, sentences, targets, run_signature
):
    assert set(loaded.signatures) == SIGNATURES | {"serving_default"}
    for name, inputs in signature_inputs(sentences, targets, module).items():
        assert_same_outputs(
            run_signature(loaded, name, inputs), module_outputs(module, name, inputs)
        )
    default = run_signature(loaded, "serving_default", {"source": sentences})
    assert_same_outputs(default, module_outputs(module, "translate", {"source": sentences}))


def test_loaded_signatures_equal_the_library_decoders(loaded, module, sentences, run_signature):
    model, tokenizer = module.model, module.tokenizer
    translations = run_signature(loaded, "translate", {"source": sentences})["translations"]
    assert text(translations) == translate(model, tokenizer, sentences)

    nbest = run_signature(loaded, "nbest", {"source": sentences})
    source_ids = source_ids_for_model(tokenizer, tf.constant(sentences), model.max_sequence_length)
    expected = beam_search(
        model,
        source_ids.to_tensor(),
        beam_size=BEAM_SIZE,
        num_hypotheses=NBEST,
        max_length=model.max_sequence_length,
    )
    assert text(nbest["translations"]) == text(tokenizer.detokenize(expected.ids).numpy())
    np.testing.assert_allclose(nbest["scores"], expected.scores, rtol=1e-5)


def test_loaded_confidences_equal_the_librarys(loaded, module, sentences, targets, run_signature):
    model, tokenizer = module.model, module.tokenizer
    translated = run_signature(loaded, "translate", {"source": sentences})
    expected = translate_with_confidence(model, tokenizer, sentences)
    # float32: a random tiny model's sentence probabilities underflow below 1e-38 to 0.
    np.testing.assert_allclose(
        translated["confidence"], [c.sentence for _, c in expected], rtol=1e-4, atol=1e-37
    )
    for row, (_, confidence) in zip(translated["token_confidence"], expected, strict=True):
        count = len(confidence.tokens)
        np.testing.assert_allclose(row[:count], confidence.tokens, rtol=1e-4, atol=1e-6)
        assert not row[count:].any()
    nbest = run_signature(loaded, "nbest", {"source": sentences})
    assert (
        nbest["token_confidence"].shape[:2] == nbest["confidence"].shape == (len(sentences), NBEST)
    )
    products = np.prod(np.where(nbest["token_confidence"] > 0, nbest["token_confidence"], 1), -1)
    filled = nbest["confidence"] > 0
    np.testing.assert_allclose(products[filled], nbest["confidence"][filled], rtol=1e-3, atol=1e-37)
    scored = run_signature(loaded, "score", {"source": sentences, "target": targets})
    wanted = score_with_confidence(model, tokenizer, sentences, targets)
    np.testing.assert_allclose(
        scored["confidence"], [c.sentence for c in wanted], rtol=1e-4, atol=1e-37
    )


def test_loaded_signatures_keep_the_limits(loaded, module, run_signature):
    too_many = ["Hallo."] * (module.limits.max_batch_size + 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch_size"):
        run_signature(loaded, "nbest", {"source": too_many})
    output = run_signature(loaded, "translate", {"source": [b"\xff", "", "x" * 10_000]})
    assert output["translations"][1] == b""


@pytest.mark.parametrize(
    ("signature", "inputs", "message"),
    [
        ("translate", {"source": [["Hallo.", "Gut."]]}, "source must be a vector of strings"),
        ("nbest", {"source": [["Hallo."], ["Gut."]]}, "source must be a vector of strings"),
        ("translate", {"source": "Hallo."}, "source must be a vector of strings"),
        ("score", {"source": ["a"], "target": [["b"]]}, "target must be a vector of strings"),
        ("translate_ids", {"source_ids": [5, 2]}, "source_ids must be a matrix of ids"),
    ],
)
def test_a_request_of_another_rank_is_refused_naming_the_input(loaded, signature, inputs, message):
    # A loaded signature (like TF Serving) takes any shape: at HEAD a [1, 2] source gave
    # translations [2] beside source_truncated [1, 2].
    function = loaded.signatures[signature]
    tensors = {
        name: tf.constant(value, function.structured_input_signature[1][name].dtype)
        for name, value in inputs.items()
    }
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        function(**tensors)


def test_graph_has_no_python_ops(export_dir):
    ops = saved_model_ops(export_dir)
    assert "SentencepieceOp" in ops and "SentencepieceTokenizeOp" in ops
    assert not ops & PY_FUNCS
    # No XLA op either: outside a compiled cluster one needs XLA's on-demand kernels, which a
    # TF Serving build may lack.
    assert not {op for op in ops if op.startswith("Xla")}


def test_fresh_process_with_only_tensorflow_and_text_loads_and_runs_it(
    export_dir, module, sentences, targets, tmp_path
):
    inputs = signature_inputs(sentences, targets, module)
    result = fresh_process_outputs(export_dir, inputs, tmp_path)

    assert result["unregistered"] == [] and result["imported"] == []
    assert "SentencepieceDetokenizeOp" in result["ops"]
    for name, outputs in result["outputs"].items():
        assert_same_outputs(outputs, module_outputs(module, name, inputs[name]))


def fresh_process_outputs(export_dir: Path, inputs: dict, tmp_path: Path) -> dict:
    """`FRESH_PROCESS`'s result: the SavedModel loaded and run without tfscones."""
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))
    subprocess.run(
        [
            sys.executable,
            "-c",
            FRESH_PROCESS,
            str(export_dir),
            *(str(tmp_path / n) for n in ("inputs.json", "out.json")),
        ],
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=240,
    )
    return json.loads((tmp_path / "out.json").read_text())


def xla_compiled_functions(export_dir: Path) -> list[str]:
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    return [
        function.signature.name
        for function in proto.meta_graphs[0].graph_def.library.function
        if function.attr["_XlaMustCompile"].b
    ]


@pytest.mark.slow  # XLA compiles every search, then a fresh process: about a minute
def test_an_xla_export_runs_without_tfscones_and_translates_as_the_default_one(
    run_dir, export_dir, module, sentences, targets, tmp_path
):
    out = tmp_path / "xla" / "1"
    export_command.main(
        ["--run", str(run_dir), "--out", str(out), "--xla", "--beam-size", str(BEAM_SIZE)]
        + ["--nbest", str(NBEST), "--max-batch-size", str(module.limits.max_batch_size)]
    )
    assert json.loads((out / savedmodel.EXPORT_INFO).read_text())["xla"] is True
    assert xla_compiled_functions(out) and not xla_compiled_functions(export_dir)
    inputs = signature_inputs(sentences, targets, module)
    result = fresh_process_outputs(out, inputs, tmp_path)

    assert result["unregistered"] == [] and result["imported"] == []
    for name, outputs in result["outputs"].items():
        expected = module_outputs(module, name, inputs[name])
        for key in ("token_confidence", "ids"):
            # Under XLA a translation's tokens fill max_output_tokens columns, PAD after the end.
            if key in expected and name != "score":
                compiled = np.asarray(outputs[key])
                width = expected[key].shape[-1]
                assert compiled.shape[-1] == module.limits.max_output_tokens
                assert not compiled[..., width:].any()
                outputs[key] = compiled[..., :width]
        assert_same_outputs(outputs, expected)


def test_saved_model_cli_shows_and_runs_the_signatures(export_dir, module, sentences):
    cli = Path(sys.executable).parent / "saved_model_cli"
    shown = subprocess.run(
        [
            str(cli),
            "show",
            "--dir",
            str(export_dir),
            "--tag_set",
            "serve",
            "--signature_def",
            "nbest",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    ).stdout
    assert "inputs['source']" in shown and "outputs['translations']" in shown

    source = json.dumps(sentences[:2], ensure_ascii=True)
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "export.saved_model_cli",
            "run",
            "--dir",
            str(export_dir),
            "--tag_set",
            "serve",
            "--signature_def",
            "translate",
            "--input_exprs",
            f"source={source}",
        ],
        check=True,
        capture_output=True,
        cwd=REPOSITORY,
        timeout=240,
    ).stdout
    expected = module.translate(tf.constant(sentences[:2]))["translations"].numpy()
    for translation in expected:
        assert repr(translation).encode() in ran


def export_fails(arguments: list[str], message: str) -> None:
    with pytest.raises(savedmodel.ExportError, match=message):
        export_command.export(export_command.parse_arguments(arguments))


@pytest.mark.parametrize(
    "arguments, message",
    [
        ([], "give --run, or both --checkpoint and --spm"),
        (["--run", "{tmp}/missing"], "is not a folder"),
        (["--checkpoint", "{run}/model.keras", "--spm", "{tmp}/x.model"], "x.model does not exist"),
        (["--checkpoint", "{tmp}/garbage", "--spm", "{run}/spm.model"], "cannot load the model"),
        (
            ["--checkpoint", "{run}/model.keras", "--spm", "{tmp}/garbage"],
            "cannot load the vocabulary",
        ),
        (["--run", "{run}", "--nbest", "5"], r"nbest must be a whole number in \[1, 4\] \(got 5\)"),
        (
            ["--run", "{run}", "--max-output-tokens", "1000000000"],
            r"max_output_tokens must be a whole number in \[1, \d+\] \(got 1000000000\)\. "
            r"The model has \d+ positions",
        ),
        (
            ["--run", "{run}", "--max-batch-size", "10000000", "--max-request-gib", "1"],
            r"needs about [\d.]+ GiB of decoder state, over max_request_bytes \(1.00 GiB\)",
        ),
    ],
)
def test_export_errors_name_the_problem(run_dir, tmp_path, arguments, message):
    (tmp_path / "garbage").write_bytes(b"not a model")
    arguments = [a.format(tmp=tmp_path, run=run_dir) for a in arguments]

    export_fails([*arguments, "--out", str(tmp_path / "m" / "1")], message)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    ("flag", "value", "allowed"),
    [
        ("--beam-size", "0", "a whole number in [1, 2147483647]"),
        ("--max-source-tokens", "0", "a whole number in [1, inf)"),
        ("--length-penalty", "nan", "a finite number in [0, 5]"),
        ("--length-penalty", "1e308", "a finite number in [0, 5]"),
        ("--max-length-a", "-1", "a finite number in [0, inf)"),
        ("--max-request-gib", "0", "a finite number in (0, inf)"),
    ],
)
def test_flags_out_of_range_are_refused_before_any_model_loads(
    tmp_path, capsys, flag, value, allowed
):
    missing = tmp_path / "no-run"  # nothing to load: the flag alone must be refused
    with pytest.raises(SystemExit) as ended:
        export_command.main(["--run", str(missing), "--out", str(tmp_path / "1"), flag, value])
    assert ended.value.code == 2
    assert f"{flag}: must be {allowed}" in capsys.readouterr().err


def test_export_needs_a_new_numbered_version_folder(run_dir, tmp_path):
    for version in ("v1", "0", "01", "latest"):
        export_fails(["--run", str(run_dir), "--out", str(tmp_path / version)], "positive integer")
    (tmp_path / "3").mkdir()
    (tmp_path / "3" / "saved_model.pb").write_bytes(b"")
    export_fails(["--run", str(run_dir), "--out", str(tmp_path / "3")], "not empty.*/4")
    with pytest.raises(SystemExit, match="export error: .*positive integer"):
        export_command.main(["--run", str(run_dir), "--out", str(tmp_path / "latest")])
