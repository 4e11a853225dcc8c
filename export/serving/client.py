"""Translate or score a text file with a model served by TF Serving, over REST or gRPC.

    python -m export.serving.client --input in.de > out.en
    python -m export.serving.client --input in.de --signature nbest --output out.nbest
    python -m export.serving.client --input in.de --target hyp.en --signature score
    python -m export.serving.client --grpc localhost:8500 --input in.de --signature translate_beam

One sentence a line in. Out, one line per input line, in order: the translation (`translate`,
`translate_beam`), the score of the target line (`score`), or for `nbest` Moses-style lines
`index ||| translation ||| score`, best first. Lines are sent `--batch-size` at a time, which must
not exceed the export's `max_batch_size`.

REST needs only the standard library and two pure-Python modules of tfscones: `tfscones.ranges`
and `tfscones.commands.argument_types`, whose ranges check the flags as every tfscones command's
are checked (a test loads this module and sees no TensorFlow imported). gRPC needs the `serving`
extra (tensorflow-serving-api), imported only when `--grpc` is used.

`--timeout` bounds each request as a whole, connection and reply together, not each read: a
server that sends a byte a second is cut off at the deadline. A reply that is not JSON, lacks an
output the signature's lines are made of, or holds other than one row per line of the request is
an error naming the request's lines.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import socket
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tfscones.commands.argument_types import in_range
from tfscones.ranges import AT_LEAST_ONE, Range

DEFAULT_REST = "http://localhost:8501"
DEFAULT_MODEL = "tfscones"
SIGNATURE_INPUTS = {
    "translate": ("source",),
    "translate_beam": ("source",),
    "nbest": ("source",),
    "score": ("source", "target"),
}
SIGNATURE_OUTPUTS = {
    "translate": ("translations",),
    "translate_beam": ("translations",),
    "nbest": ("translations", "scores"),
    "score": ("scores",),
}
"""The outputs each signature's result lines are made of."""
MAX_GRPC_MESSAGE_BYTES = 64 * 1024 * 1024
TIMEOUT = Range(0, 24 * 60 * 60, low_open=True)
"""Seconds a request may take: more than zero, at most a day."""
REPLY_START_CHARACTERS = 80

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
        timeout: Seconds a request may take, from connecting to the reply's last byte
            (`TIMEOUT`).

    Returns:
        The function. It raises `ServingError` naming the endpoint on an HTTP error (with the
        server's message), no complete reply within `timeout`, or a reply that is not a JSON
        object of named outputs.

    Raises:
        ValueError: If `timeout` is not in `TIMEOUT`.
    """
    timeout = TIMEOUT.check("timeout", timeout)
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
        reply = _json_reply(endpoint, _post(endpoint, request, timeout))
        outputs = reply.get("outputs") if isinstance(reply, dict) else None
        if not isinstance(outputs, dict):
            raise ServingError(f"{endpoint}: expected named outputs, got {reply!r:.200}")
        return {name: from_json(value) for name, value in outputs.items()}

    return predict


def _post(endpoint: str, request: urllib.request.Request, timeout: float) -> bytes:
    """The body of the reply to `request`, read in full within `timeout` seconds.

    Raises:
        ServingError: On an HTTP error, no answer, or no complete answer in time.
    """
    with Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(
            _DeadlineHTTPHandler(deadline), _DeadlineHTTPSHandler(deadline)
        )
        try:
            with opener.open(request, timeout=timeout) as response:
                data = response.read()
        except urllib.error.HTTPError as error:
            if not deadline.expired.is_set():
                raise ServingError(f"{endpoint}: HTTP {error.code}: {_error_text(error)}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            if not deadline.expired.is_set():
                reason = getattr(error, "reason", error)
                raise ServingError(f"{endpoint}: no answer from the server ({reason})") from None
    if deadline.expired.is_set():
        raise ServingError(f"{endpoint}: no complete answer within the timeout of {timeout:g} s")
    return data


def _json_reply(endpoint: str, data: bytes) -> Any:
    """The reply decoded from JSON.

    Raises:
        ServingError: If it is not JSON, naming the endpoint and showing how the reply starts.
    """
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError as error:
        start = text[:REPLY_START_CHARACTERS]
        raise ServingError(
            f"{endpoint}: the reply is not JSON ({error}); it starts {start!r}"
        ) from None


class Deadline:
    """Shuts the sockets a request opened once `seconds` have passed since it was entered.

    A socket's timeout bounds each read, so a server that sends a byte a second would hold a
    request forever; shutting the socket ends the read that waits, whatever it is reading.
    `expired` tells the reader that it was cut off, not answered.
    """

    def __init__(self, seconds: float):
        self.expired = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._timer.cancel()

    def watch(self, connection: socket.socket) -> None:
        """Shuts `connection` at the deadline (now, if it has passed)."""
        with self._lock:
            self._sockets.append(connection)
            expired = self.expired.is_set()
        if expired:
            _shut(connection)

    def _expire(self) -> None:
        with self._lock:
            self.expired.set()
            sockets = list(self._sockets)
        for connection in sockets:
            _shut(connection)


def _shut(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _watched(connection_class: type, deadline: Deadline) -> type:
    """`connection_class` (an `http.client` connection) whose socket `deadline` watches."""

    class WatchedConnection(connection_class):
        def connect(self):
            super().connect()
            deadline.watch(self.sock)

    return WatchedConnection


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, request):
        return self.do_open(_watched(http.client.HTTPConnection, self.deadline), request)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline):
        super().__init__()
        self.deadline = deadline

    def https_open(self, request):
        return self.do_open(_watched(http.client.HTTPSConnection, self.deadline), request)


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
        ValueError: If `timeout` is not in `TIMEOUT`.
        ImportError: If tensorflow-serving-api is not installed (`pip install .[serving]`).
    """
    timeout = TIMEOUT.check("timeout", timeout)
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
        ValueError: If `batch_size` is not a whole number >= 1 or the inputs differ in length.
        ServingError: If the server fails a request, or answers it without the signature's
            outputs (`SIGNATURE_OUTPUTS`) or with other than one row per line; the message
            names the request's lines.
    """
    AT_LEAST_ONE.check("batch_size", batch_size)
    if len({len(values) for values in inputs.values()}) > 1:
        raise ValueError("every input needs the same number of lines.")
    outputs: Columns = {}
    if not any(inputs.values()):
        return outputs
    start = 0
    for batch in batches(inputs, batch_size):
        rows = len(next(iter(batch.values())))
        lines = _lines(start, rows)
        try:
            answer = predict(signature, batch)
        except ServingError as error:
            raise ServingError(f"{error} ({lines})") from None
        check_answer(signature, answer, rows, lines)
        for name, values in answer.items():
            outputs.setdefault(name, []).extend(values)
        start += rows
    return outputs


def check_answer(signature: str, answer: Columns, rows: int, lines: str) -> None:
    """Refuses an answer without the signature's outputs, or with other than `rows` rows.

    Args:
        signature: The signature's name.
        answer: The outputs of one request.
        rows: The request's lines.
        lines: The request's lines in words (`lines 1-32`), for the error.

    Raises:
        ServingError: Naming the signature, the lines and what is wrong.
    """
    problem = f"{signature} of {lines}: the server answered"
    for name in SIGNATURE_OUTPUTS.get(signature, ()):
        if name not in answer:
            raise ServingError(f"{problem} no output {name} (got {sorted(answer)})")
    for name, values in answer.items():
        if not isinstance(values, list):
            raise ServingError(f"{problem} {name} that are not a list of rows: {values!r:.80}")
        if len(values) != rows:
            row_count = f"{len(values)} row" + ("" if len(values) == 1 else "s")
            raise ServingError(f"{problem} {row_count} of {name} for {rows} lines")


def _lines(start: int, count: int) -> str:
    """Lines `start + 1` to `start + count` (numbered from 1) in words."""
    return f"line {start + 1}" if count == 1 else f"lines {start + 1}-{start + count}"


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
    defines them; the client imports no module of tfscones that needs TensorFlow, so it reads them
    itself.
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
    parser.add_argument(
        "--version", type=in_range(AT_LEAST_ONE), help="model version (default: the latest)"
    )
    parser.add_argument("--batch-size", type=in_range(AT_LEAST_ONE), default=32)
    parser.add_argument(
        "--timeout",
        type=in_range(TIMEOUT),
        default=300.0,
        help="seconds a request may take, its whole reply read (at most a day)",
    )
    arguments = parser.parse_args(argv)
    if (arguments.signature == "score") != (arguments.target is not None):
        parser.error("--target is needed by, and only by, --signature score")
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
