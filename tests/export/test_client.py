"""The serving client against a fake TF Serving (REST) and an in-process gRPC PredictionService."""

import base64
import json
import socket
import urllib.request

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
        (["--batch-size", "0"], "--batch-size must be at least 1 (got 0)"),
        (["--version", "0"], "--version must be at least 1"),
        (["--timeout", "-1"], "--timeout must be a positive number"),
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
