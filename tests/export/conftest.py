"""A tiny run folder (SentencePiece model + untrained tiny model), its export, and fake servers.

The model is untrained: its translations are nonsense, but deterministic, which is all the
export tests need (the SavedModel must reproduce the in-process decoders). Everything is built
once per session; each fixture is cheap after the first use.
"""

import base64
import itertools
import json
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfscones.commands import export as export_command
from tfscones.data import Tokenizer, train_sentencepiece
from tfscones.data.demo import demo_file
from tfscones.models import Seq2SeqTransformer
from tfscones.serving import RequestLimits, TranslationModule, standard_searches

SPM_LINES = 1500
VOCABULARY_SIZE = 400
MAX_SEQUENCE_LENGTH = 32
MAX_BATCH_SIZE = 8
BEAM_SIZE = 3
NBEST = 2
MODULE_SEARCHES = standard_searches(beam_size=BEAM_SIZE, nbest=NBEST)
MODULE_LIMITS = RequestLimits(max_batch_size=MAX_BATCH_SIZE)


def demo_sentences(split: str, count: int, language: str = "de") -> list[str]:
    with demo_file(split, language).open(encoding="utf-8") as lines:
        return [line.rstrip("\n") for line in itertools.islice(lines, count)]


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """A run folder as training writes it: spm.model and model.keras (SCONES head)."""
    folder = tmp_path_factory.mktemp("run")
    for language in ("de", "en"):
        text = "".join(line + "\n" for line in demo_sentences("train", SPM_LINES, language))
        (folder / f"train.{language}").write_text(text, encoding="utf-8")
    train_sentencepiece(
        [folder / "train.de", folder / "train.en"], folder / "spm", vocab_size=VOCABULARY_SIZE
    )
    save_tiny_model(folder / "model.keras", seed=7, head="sigmoid")
    return folder


def save_tiny_model(path: Path, seed: int, **arguments) -> None:
    """An untrained one-layer model of the run's vocabulary, saved as a `.keras` file."""
    keras.utils.set_random_seed(seed)
    model = Seq2SeqTransformer.from_preset(
        "tiny",
        vocabulary_size=VOCABULARY_SIZE,
        num_encoder_layers=1,
        num_decoder_layers=1,
        hidden_dim=64,
        intermediate_dim=128,
        max_sequence_length=MAX_SEQUENCE_LENGTH,
        **arguments,
    )
    model.save(path)


@pytest.fixture(scope="session")
def tied_checkpoint(tmp_path_factory) -> Path:
    """A softmax model of the run's vocabulary whose embeddings and output layer are tied."""
    path = tmp_path_factory.mktemp("tied") / "model.keras"
    save_tiny_model(path, seed=3, tie_embeddings=True)
    return path


@pytest.fixture(scope="session")
def model(run_dir):
    return keras.models.load_model(run_dir / "model.keras")


@pytest.fixture(scope="session")
def tokenizer(run_dir) -> Tokenizer:
    return Tokenizer.from_file(run_dir / "spm.model")


@pytest.fixture(scope="session")
def module(model, tokenizer) -> TranslationModule:
    return TranslationModule(model, tokenizer, MODULE_SEARCHES, MODULE_LIMITS)


@pytest.fixture(scope="session")
def export_dir(run_dir, tmp_path_factory) -> Path:
    """The run exported by the export program, as BASE/tfscones/1."""
    out = tmp_path_factory.mktemp("exports") / "tfscones" / "1"
    export_command.main(
        [
            "--run",
            str(run_dir),
            "--out",
            str(out),
            "--max-batch-size",
            str(MAX_BATCH_SIZE),
            "--beam-size",
            str(BEAM_SIZE),
            "--nbest",
            str(NBEST),
        ]
    )
    return out


@pytest.fixture(scope="session")
def loaded(export_dir):
    return tf.saved_model.load(str(export_dir))


@pytest.fixture(scope="session")
def sentences() -> list[str]:
    """Source sentences of varied lengths, among them a one-word and a long one."""
    return demo_sentences("dev", 5) + ["Ja.", "Tom hat es mir gesagt, aber ich glaube es nicht."]


@pytest.fixture(scope="session")
def targets() -> list[str]:
    """English sentences to score as (unrelated) candidate translations."""
    return demo_sentences("dev", 7, "en")[::-1]


@pytest.fixture(name="demo_sentences", scope="session")
def demo_sentences_fixture():
    return demo_sentences


@pytest.fixture(name="run_signature", scope="session")
def run_signature_fixture():
    return run_signature


def run_signature(loaded, signature: str, inputs: dict) -> dict[str, np.ndarray]:
    """Runs a loaded SavedModel's signature on Python inputs; numpy outputs."""
    function = loaded.signatures[signature]
    tensors = {}
    for name, spec in function.structured_input_signature[1].items():
        tensors[name] = tf.constant(inputs[name], dtype=spec.dtype)
    return {name: value.numpy() for name, value in function(**tensors).items()}


def _from_json(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_from_json(item) for item in value]
    return value.encode("utf-8") if isinstance(value, str) else value


def _to_json(array: np.ndarray):
    if array.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()
    return array.tolist()


class FakeRestServer:
    """TF Serving's `POST /v1/models/NAME[/versions/N]:predict`, backed by a loaded SavedModel.

    Row (`instances` -> `predictions`) and columnar (`inputs` -> `outputs`) formats; errors come
    back as HTTP 400 `{"error": message}`, as TF Serving sends them. `requests` records each
    request's path and body.
    """

    def __init__(self, loaded, model_name: str = "tfscones"):
        self.loaded = loaded
        self.model_name = model_name
        self.requests: list[tuple[str, dict]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body))
                status, reply = server.predict(self.path, body)
                data = json.dumps(reply).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler

    def predict(self, path: str, body: dict) -> tuple[int, dict]:
        prefix = f"/v1/models/{self.model_name}"
        if not (path.startswith(prefix) and path.endswith(":predict")):
            return 404, {"error": f"Servable not found for request: {path}"}
        signature = body.get("signature_name", "serving_default")
        if signature not in self.loaded.signatures:
            return 400, {"error": f'Serving signature name: "{signature}" not found'}
        names = list(self.loaded.signatures[signature].structured_input_signature[1])
        if "instances" in body:
            rows = body["instances"]
            inputs = {n: [r[n] if isinstance(r, dict) else r for r in rows] for n in names}
        else:
            inputs = (
                body["inputs"] if isinstance(body["inputs"], dict) else {names[0]: body["inputs"]}
            )
        try:
            outputs = run_signature(
                self.loaded, signature, {k: _from_json(v) for k, v in inputs.items()}
            )
        except tf.errors.OpError as error:
            return 400, {"error": error.message}
        outputs = {name: _to_json(value) for name, value in outputs.items()}
        if "instances" in body:
            count = len(next(iter(outputs.values())))
            return 200, {
                "predictions": [{k: v[i] for k, v in outputs.items()} for i in range(count)]
            }
        return 200, {"outputs": outputs}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def rest_server(loaded):
    with FakeRestServer(loaded) as server:
        yield server


@pytest.fixture(scope="module")
def grpc_server(loaded):
    """An in-process gRPC PredictionService backed by the SavedModel; yields its address."""
    grpc = pytest.importorskip("grpc")
    apis = pytest.importorskip("tensorflow_serving.apis.prediction_service_pb2_grpc")
    predict_pb2 = pytest.importorskip("tensorflow_serving.apis.predict_pb2")

    class Servicer(apis.PredictionServiceServicer):
        def Predict(self, request, context):
            signature = request.model_spec.signature_name or "serving_default"
            if request.model_spec.name != "tfscones" or signature not in loaded.signatures:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no model/signature {signature}")
            inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
            try:
                outputs = run_signature(loaded, signature, inputs)
            except tf.errors.InvalidArgumentError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, error.message)
            response = predict_pb2.PredictResponse()
            response.model_spec.CopyFrom(request.model_spec)
            for name, value in outputs.items():
                response.outputs[name].CopyFrom(tf.make_tensor_proto(value))
            return response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    apis.add_PredictionServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)
