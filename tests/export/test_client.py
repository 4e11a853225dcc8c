"""The serving client against a fake TF Serving (REST) and an in-process gRPC PredictionService."""

import base64
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from export.serving import client


def write_lines(path, lines: list[bytes]):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


@pytest.fixture
def source_lines(sentences) -> list[bytes]:
    """Sentences, an empty line and a line of invalid UTF-8 (sent as {"b64": ...} over REST)."""
    return [s.encode("utf-8") for s in sentences] + [b"", b"Guten \xff Morgen"]


def expected(loaded, run_signature, signature, **inputs):
    """The SavedModel's outputs, computed directly, a few rows at a time (the batch limit)."""
    rows = len(next(iter(inputs.values())))
    parts = [
        run_signature(loaded, signature, {k: v[i : i + 4] for k, v in inputs.items()})
        for i in range(0, rows, 4)
    ]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def decoded(values) -> list[str]:
    return [value.decode("utf-8") for value in values]


def test_rest_client_translates_a_file_in_batches(
    rest_server, loaded, run_signature, source_lines, tmp_path
):
    source = write_lines(tmp_path / "in.de", source_lines)
    output = tmp_path / "out.en"
    rest_server.requests.clear()

    client.main(
        [
            "--input",
            str(source),
            "--output",
            str(output),
            "--rest",
            rest_server.url,
            "--batch-size",
            "4",
        ]
    )

    translations = expected(loaded, run_signature, "translate", source=source_lines)["translations"]
    assert output.read_text(encoding="utf-8").splitlines() == decoded(translations)
    sizes = [len(body["inputs"]["source"]) for _, body in rest_server.requests]
    assert sizes == [len(source_lines[i : i + 4]) for i in range(0, len(source_lines), 4)]
    assert {path for path, _ in rest_server.requests} == {"/v1/models/tfscones:predict"}
    invalid = {"b64": base64.b64encode(source_lines[-1]).decode("ascii")}
    assert invalid in rest_server.requests[-1][1]["inputs"]["source"]


def test_rest_client_writes_nbest_lists_and_scores(
    rest_server, loaded, run_signature, source_lines, targets, tmp_path
):
    source = write_lines(tmp_path / "in.de", source_lines[:3])
    nbest_file, score_file = tmp_path / "out.nbest", tmp_path / "out.scores"
    common = ["--input", str(source), "--rest", rest_server.url, "--version", "1"]

    client.main([*common, "--signature", "nbest", "--output", str(nbest_file)])
    target = write_lines(tmp_path / "hyp.en", [t.encode() for t in targets[:3]])
    client.main(
        [*common, "--signature", "score", "--target", str(target), "--output", str(score_file)]
    )

    nbest = expected(loaded, run_signature, "nbest", source=source_lines[:3])
    lines = [line.split(" ||| ") for line in nbest_file.read_text(encoding="utf-8").splitlines()]
    n = nbest["translations"].shape[1]
    assert [int(index) for index, _, _ in lines] == [i for i in range(3) for _ in range(n)]
    assert [text for _, text, _ in lines] == decoded(nbest["translations"].reshape(-1))
    np.testing.assert_allclose(
        [float(s) for _, _, s in lines], nbest["scores"].reshape(-1), rtol=1e-6
    )
    scores = expected(
        loaded,
        run_signature,
        "score",
        source=source_lines[:3],
        target=[t.encode() for t in targets[:3]],
    )
    np.testing.assert_allclose(np.loadtxt(score_file), scores["scores"], rtol=1e-6)
    assert rest_server.requests[-1][0] == "/v1/models/tfscones/versions/1:predict"


def test_rest_errors_carry_the_server_message(rest_server, module, source_lines, tmp_path):
    predict = client.rest_predictor(rest_server.url)
    too_many = module.limits.max_batch_size + 1
    with pytest.raises(client.ServingError, match=r"(?s)HTTP 400: .*max_batch_size"):
        client.run_signature(predict, "translate", {"source": ["Hallo."] * too_many}, too_many)
    with pytest.raises(client.ServingError, match="HTTP 404"):
        client.rest_predictor(rest_server.url, model="other")("translate", {"source": ["a"]})

    source = write_lines(tmp_path / "in.de", source_lines)
    with pytest.raises(SystemExit, match="(?s)client error: .*at most"):
        client.main(
            ["--input", str(source), "--rest", rest_server.url, "--batch-size", str(too_many)]
        )


def test_the_fake_server_answers_tf_serving_row_requests(
    rest_server, loaded, run_signature, sentences
):
    body = {
        "signature_name": "score",
        "instances": [{"source": s, "target": s} for s in sentences[:2]],
    }
    request = urllib.request.Request(
        rest_server.url + "/v1/models/tfscones:predict",
        data=json.dumps(body).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        predictions = json.loads(response.read())["predictions"]

    scores = expected(loaded, run_signature, "score", source=sentences[:2], target=sentences[:2])[
        "scores"
    ]
    np.testing.assert_allclose([p["scores"] for p in predictions], scores, rtol=1e-6)


def test_grpc_client_translates_like_the_savedmodel(
    grpc_server, loaded, run_signature, source_lines, tmp_path
):
    source = write_lines(tmp_path / "in.de", source_lines)
    output = tmp_path / "out.en"

    client.main(
        [
            "--input",
            str(source),
            "--output",
            str(output),
            "--grpc",
            grpc_server,
            "--signature",
            "translate_beam",
            "--batch-size",
            "3",
        ]
    )

    translations = expected(loaded, run_signature, "translate_beam", source=source_lines)[
        "translations"
    ]
    assert output.read_text(encoding="utf-8").splitlines() == decoded(translations)


def test_grpc_errors_carry_the_server_message(grpc_server, module):
    predict = client.grpc_predictor(grpc_server)
    too_many = module.limits.max_batch_size + 1
    with pytest.raises(client.ServingError, match="(?s)INVALID_ARGUMENT: .*max_batch_size"):
        predict("nbest", {"source": ["Hallo."] * too_many})


def test_client_checks_its_arguments(tmp_path):
    with pytest.raises(SystemExit):
        client.parse_arguments(["--signature", "score"])
    with pytest.raises(SystemExit):
        client.parse_arguments(["--target", "x"])
    with pytest.raises(ValueError, match="same number of lines"):
        client.run_signature(lambda *_: {}, "score", {"source": ["a"], "target": []})
    assert (
        client.run_signature(lambda *_: pytest.fail("no request"), "translate", {"source": []})
        == {}
    )


def test_no_server_ends_in_one_line_naming_the_endpoint(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = write_lines(tmp_path / "in.de", [b"Hallo."])
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(SystemExit) as ended:
        client.main(["--input", str(source), "--rest", url, "--timeout", "5"])
    message = str(ended.value.code)
    assert message.startswith(f"client error: {url}/v1/models/") and "no answer" in message


def test_lines_end_at_newlines_only(tmp_path):
    source = tmp_path / "in.de"
    source.write_bytes("eins\u2028zwei\r\ndrei\x0cvier\nfünf".encode())
    assert client.read_lines(source) == [
        "eins\u2028zwei".encode(),
        b"drei\x0cvier",
        "fünf".encode(),
    ]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--batch-size", "0"], "--batch-size: must be a whole number in [1, inf) (got 0)"),
        (["--batch-size", "1.5"], "--batch-size: must be a whole number in [1, inf) (got '1.5')"),
        (["--version", "0"], "--version: must be a whole number in [1, inf) (got 0)"),
        (["--timeout", "-1"], "--timeout: must be a finite number in (0, 86400] (got -1.0)"),
        (["--timeout", "0"], "--timeout: must be a finite number in (0, 86400] (got 0.0)"),
        (["--timeout", "inf"], "--timeout: must be a finite number in (0, 86400] (got inf)"),
        (["--timeout", "nan"], "--timeout: must be a finite number in (0, 86400] (got nan)"),
        (["--timeout", "1e300"], "(0, 86400] (got 1e+300)"),
    ],
)
def test_out_of_range_flags_end_in_one_line(flags, message, capsys):
    with pytest.raises(SystemExit) as ended:
        client.parse_arguments(flags)
    assert ended.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_input_file_is_named(tmp_path):
    with pytest.raises(SystemExit) as ended:
        client.main(["--input", str(tmp_path / "absent.de")])
    message = str(ended.value.code)
    assert message.startswith("client error: ") and "absent.de" in message


class LoopbackServer:
    """An HTTP server on 127.0.0.1 whose every POST is answered by `answer(handler)`."""

    def __init__(self, answer):
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    answer(self)
                except OSError:  # the client hung up, as it should after its timeout
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def drip_headers(handler):
    """A status line, then a header a byte every 0.25 s: never a read that waits 1 s."""
    handler.wfile.write(b"HTTP/1.0 200 OK\r\n")
    for byte in b"Content-Type: application/json\r\n\r\n{}":
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.25)


def drip_body(handler):
    """Whole headers, then the body a byte every 0.25 s."""
    body = json.dumps({"outputs": {"translations": ["a"]}}).encode()
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    for byte in body:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.25)


def reply_with(status: int, body: bytes):
    def answer(handler):
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def run_client(url: str, lines: list[bytes], tmp_path, *flags: str) -> str:
    """`client.main`'s exit message for `lines` sent to `url`; fails if it did not exit."""
    source = write_lines(tmp_path / "in.de", lines)
    with pytest.raises(SystemExit) as ended:
        client.main(["--input", str(source), "--rest", url, *flags])
    return str(ended.value.code)


@pytest.mark.parametrize("answer", [drip_headers, drip_body], ids=["headers", "body"])
def test_the_timeout_bounds_the_whole_request_not_each_read(answer, tmp_path):
    with LoopbackServer(answer) as server:
        started = time.monotonic()
        message = run_client(server.url, [b"Hallo."], tmp_path, "--timeout", "1")
        elapsed = time.monotonic() - started
    assert elapsed < 2.5
    assert message.startswith(f"client error: {server.url}/v1/models/tfscones:predict: ")
    assert "no complete answer within the timeout of 1 s" in message
    assert message.endswith("(line 1)")


@pytest.mark.parametrize(
    "outputs, problem",
    [
        ({"translations": ["only one"]}, "1 row of translations for 3 lines"),
        ({"scores": [0.0, 0.0, 0.0]}, "no output translations"),
        ({"translations": "abc"}, "translations that are not a list of rows"),
    ],
)
def test_an_answer_of_the_wrong_size_names_the_request(outputs, problem, tmp_path):
    lines = [b"eins", b"zwei", b"drei", b"vier"]
    answer = reply_with(200, json.dumps({"outputs": outputs}).encode())
    with LoopbackServer(answer) as server:
        message = run_client(server.url, lines, tmp_path, "--batch-size", "3", "--timeout", "30")
    assert message.startswith("client error: translate of lines 1-3: the server answered ")
    assert problem in message


@pytest.mark.parametrize(
    "body, start",
    [(b"<html>502 Bad Gateway</html>", "'<html>502 Bad Gateway</html>'"), (b"", "''")],
)
def test_a_reply_that_is_not_json_names_the_endpoint_and_its_start(body, start, tmp_path):
    # The server answers at once; the timeout only bounds a stalled run on a loaded machine.
    with LoopbackServer(reply_with(200, body)) as server:
        message = run_client(server.url, [b"Hallo."], tmp_path, "--timeout", "30")
    endpoint = f"{server.url}/v1/models/tfscones:predict"
    assert message.startswith(f"client error: {endpoint}: the reply is not JSON")
    assert message.endswith(f"it starts {start} (line 1)")


def test_a_json_reply_that_is_not_an_object_is_refused(tmp_path):
    with LoopbackServer(reply_with(200, b"[1, 2]")) as server:
        message = run_client(server.url, [b"Hallo."], tmp_path, "--timeout", "30")
    assert "expected named outputs, got [1, 2]" in message


def test_library_calls_check_their_numbers():
    with pytest.raises(ValueError, match=r"timeout must be a finite number in \(0, 86400\]"):
        client.rest_predictor("http://127.0.0.1:1", timeout=float("inf"))
    with pytest.raises(ValueError, match=r"batch_size must be a whole number in \[1, inf\)"):
        client.run_signature(lambda *_: {}, "translate", {"source": ["a"]}, batch_size=0)


def test_the_client_imports_no_tensorflow():
    """`python -m export.serving.client` imports its package too: neither may load TensorFlow."""
    load = (
        "import sys, export.serving.client; "
        "print(sorted(name for name in sys.modules if name.startswith(('tensorflow', 'numpy'))))"
    )
    imported = subprocess.run(
        [sys.executable, "-c", load],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(client.__file__).parents[2],
    )
    assert imported.stdout.strip() == "[]"
