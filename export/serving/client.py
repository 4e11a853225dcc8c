"""Translate or score a text file with a model served by TF Serving, over REST or gRPC.

    python -m export.serving.client --input in.de > out.en
    python -m export.serving.client --input in.de --signature nbest --output out.nbest
    python -m export.serving.client --input in.de --target hyp.en --signature score
    python -m export.serving.client --grpc localhost:8500 --input in.de --signature translate_beam

One sentence a line in. Out, one line per input line, in order: the translation (`translate`,
`translate_beam`), the score of the target line (`score`), or for `nbest` Moses-style lines
`index ||| translation ||| score`, best first. Lines are sent `--batch-size` at a time, which must
not exceed the export's `max_batch_size`.

REST needs only the standard library. gRPC needs the `serving` extra (tensorflow-serving-api),
imported only when `--grpc` is used.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

DEFAULT_REST = "http://localhost:8501"
DEFAULT_MODEL = "tfscones"
SIGNATURE_INPUTS = {
    "translate": ("source",),
    "translate_beam": ("source",),
    "nbest": ("source",),
    "score": ("source", "target"),
}
MAX_GRPC_MESSAGE_BYTES = 64 * 1024 * 1024

Columns = dict[str, list[Any]]
Predict = Callable[[str, Columns], Columns]


class ServingError(Exception):
    """The server refused or failed a request; the message is the server's."""


def json_value(value: bytes | str) -> Any:
    """A string input in TF Serving's JSON: text as is, other bytes as `{"b64": ...}`."""
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(value).decode("ascii")}


def from_json(value: Any) -> Any:
    """Decodes TF Serving's `{"b64": ...}` values, in nested lists too, into bytes."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [from_json(item) for item in value]
    return value


def model_path(model: str, version: int | None) -> str:
    """`/v1/models/NAME[/versions/N]`, TF Serving's REST path of a model (version)."""
    return f"/v1/models/{model}" + (f"/versions/{version}" if version else "")


def rest_predictor(
    url: str = DEFAULT_REST,
    model: str = DEFAULT_MODEL,
    version: int | None = None,
    timeout: float = 300.0,
) -> Predict:
    """A `predict(signature, inputs) -> outputs` function over TF Serving's REST API.

    Requests use the columnar format, `{"signature_name": ..., "inputs": {...}}`.

    Args:
        url: The server's REST address, `http://HOST:PORT`.
        model: The model's name on the server.
        version: A model version; None for the latest.
        timeout: Seconds to wait for each response.

    Returns:
        The function. It raises `ServingError` with the server's message on an HTTP error.
    """
    endpoint = url.rstrip("/") + model_path(model, version) + ":predict"

    def predict(signature: str, inputs: Columns) -> Columns:
        body = {
            "signature_name": signature,
            "inputs": {name: [json_value(v) for v in values] for name, values in inputs.items()},
        }
        request = urllib.request.Request(
            endpoint,
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                reply = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            raise ServingError(f"{endpoint}: HTTP {error.code}: {_error_text(error)}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ServingError(f"{endpoint}: no answer from the server ({reason})") from None
        outputs = reply.get("outputs")
        if not isinstance(outputs, dict):
            raise ServingError(f"{endpoint}: expected named outputs, got {reply!r:.200}")
        return {name: from_json(value) for name, value in outputs.items()}

    return predict


def _error_text(error: urllib.error.HTTPError) -> str:
    """The `error` field of TF Serving's JSON error body, or the body itself."""
    body = error.read().decode("utf-8", errors="replace")
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return body or str(error.reason)


def grpc_predictor(
    target: str,
    model: str = DEFAULT_MODEL,
    version: int | None = None,
    timeout: float = 300.0,
) -> Predict:
    """A `predict(signature, inputs) -> outputs` function over TF Serving's gRPC API.

    Args:
        target: The server's gRPC address, `HOST:PORT`.
        model: The model's name on the server.
        version: A model version; None for the latest.
        timeout: Seconds to wait for each response.

    Returns:
        The function. It raises `ServingError` with the server's message on a gRPC error.

    Raises:
        ImportError: If tensorflow-serving-api is not installed (`pip install .[serving]`).
    """
    try:
        import grpc
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
    except ImportError as error:
        raise ImportError(
            "the gRPC client needs tensorflow-serving-api: pip install -e '.[serving]'"
        ) from error
    options = [
        ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
    ]
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(target, options=options)
    )

    def predict(signature: str, inputs: Columns) -> Columns:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.model_spec.signature_name = signature
        if version:
            request.model_spec.version.value = version
        for name, values in inputs.items():
            strings = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
            request.inputs[name].CopyFrom(
                tf.make_tensor_proto(strings, dtype=tf.string, shape=[len(strings)])
            )
        try:
            response = stub.Predict(request, timeout=timeout)
        except grpc.RpcError as error:
            raise ServingError(f"{target}: {error.code().name}: {error.details()}") from None
        return {name: tf.make_ndarray(proto).tolist() for name, proto in response.outputs.items()}

    return predict


def batches(columns: Columns, batch_size: int) -> Iterator[Columns]:
    """Consecutive slices of `batch_size` rows of equally long columns."""
    rows = len(next(iter(columns.values())))
    for start in range(0, rows, batch_size):
        yield {name: values[start : start + batch_size] for name, values in columns.items()}


def run_signature(
    predict: Predict, signature: str, inputs: Columns, batch_size: int = 32
) -> Columns:
    """Runs a signature over inputs of any length, `batch_size` rows per request.

    Args:
        predict: From `rest_predictor` or `grpc_predictor`.
        signature: The signature's name.
        inputs: Equally long lists of strings (or bytes), by input name.
        batch_size: Rows per request (at most the export's `max_batch_size`).

    Returns:
        Each output's rows, in input order.

    Raises:
        ValueError: If `batch_size` is not positive or the inputs differ in length.
        ServingError: If the server fails a request.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    if len({len(values) for values in inputs.values()}) > 1:
        raise ValueError("every input needs the same number of lines.")
    outputs: Columns = {}
    if not any(inputs.values()):
        return outputs
    for batch in batches(inputs, batch_size):
        for name, values in predict(signature, batch).items():
            outputs.setdefault(name, []).extend(values)
    return outputs


def as_text(value: bytes | str) -> str:
    """An output string as text."""
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def format_lines(signature: str, outputs: Columns, rows: int) -> list[str]:
    """The output lines of a signature's outputs (see the module docstring).

    Args:
        signature: The signature's name.
        outputs: From `run_signature`.
        rows: Number of input lines.

    Returns:
        The lines, without line ends.
    """
    if rows == 0:
        return []
    if signature == "score":
        return [repr(float(score)) for score in outputs["scores"]]
    if signature == "nbest":
        return [
            f"{index} ||| {as_text(text)} ||| {float(score)!r}"
            for index, (texts, scores) in enumerate(
                zip(outputs["translations"], outputs["scores"], strict=True)
            )
            for text, score in zip(texts, scores, strict=True)
        ]
    return [as_text(text) for text in outputs["translations"]]


def read_lines(path: Path | None) -> list[bytes]:
    """The lines of a file (stdin for None) as bytes.

    Lines end at newlines only and carriage returns are dropped, as `tfscones.data.text_lines`
    defines them; the client imports nothing from tfscones, so that it runs without TensorFlow.
    """
    lines = (path.read_bytes() if path else sys.stdin.buffer.read()).replace(b"\r", b"")
    lines = lines.split(b"\n")
    return lines[:-1] if lines[-1] == b"" else lines


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, help="source sentences (default: stdin)")
    parser.add_argument("--target", type=Path, help="candidate translations, for --signature score")
    parser.add_argument("--output", type=Path, help="result lines (default: stdout)")
    parser.add_argument("--signature", choices=sorted(SIGNATURE_INPUTS), default="translate")
    server = parser.add_mutually_exclusive_group()
    server.add_argument("--rest", default=DEFAULT_REST, help=f"REST address ({DEFAULT_REST})")
    server.add_argument("--grpc", help="gRPC address HOST:PORT (instead of REST)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model name on the server")
    parser.add_argument("--version", type=int, help="model version (default: the latest)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    arguments = parser.parse_args(argv)
    if (arguments.signature == "score") != (arguments.target is not None):
        parser.error("--target is needed by, and only by, --signature score")
    if arguments.batch_size < 1:
        parser.error(f"--batch-size must be at least 1 (got {arguments.batch_size})")
    if arguments.version is not None and arguments.version < 1:
        parser.error(f"--version must be at least 1 (got {arguments.version})")
    if not arguments.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds (got {arguments.timeout})")
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of `python -m export.serving.client`."""
    arguments = parse_arguments(argv)
    try:
        inputs: Columns = {"source": read_lines(arguments.input)}
        if arguments.target:
            inputs["target"] = read_lines(arguments.target)
    except OSError as error:
        sys.exit(f"client error: {error}")
    if arguments.grpc:
        predict = grpc_predictor(
            arguments.grpc, arguments.model, arguments.version, arguments.timeout
        )
    else:
        predict = rest_predictor(
            arguments.rest, arguments.model, arguments.version, arguments.timeout
        )
    try:
        outputs = run_signature(predict, arguments.signature, inputs, arguments.batch_size)
    except (ServingError, ValueError) as error:
        sys.exit(f"client error: {error}")
    text = "".join(
        line + "\n" for line in format_lines(arguments.signature, outputs, len(inputs["source"]))
    )
    if arguments.output:
        arguments.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
