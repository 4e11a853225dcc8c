"""A decoder built and timed in a fresh process of its own, for the serving benchmarks.

    with DecoderProcess(build_decoder, engine, model, threads) as process:
        texts, seconds = process.time_requests(requests, beam_size=1)

A CTranslate2 translator runs its `intra_threads` as an OpenMP team, and GNU OpenMP (which the
CTranslate2 wheel ships) all but stops its threads from spin-waiting between parallel regions
once a process holds more OpenMP threads than the machine has cores (GOMP_SPINCOUNT's
documentation): each of a decoding step's many small regions then waits for threads to wake up.
Two translators at two threads on two cores are enough: on a 2-core AMD EPYC, float32 batch-1
greedy fell from ~95 to ~23 sentences/s once a second translator had run in the process. So a
benchmark gives every decoder a process, as a server would; idle, it sleeps.
"""

from __future__ import annotations

import functools
import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent import futures

_process_decoder = None


def time_requests(decoder, requests: list[list[str]], beam_size: int) -> tuple[list[str], float]:
    """The texts `decoder` translates `requests` to, one request after another, and the seconds.

    Args:
        decoder: Anything with `translate(sentences, beam_size) -> [(text, ...), ...]`.
        requests: The requests, each a list of sentences.
        beam_size: Beams (1: greedy search).
    """
    start = time.perf_counter()
    texts = [output[0] for request in requests for output in decoder.translate(request, beam_size)]
    return texts, time.perf_counter() - start


def time_passes(
    rows: dict, requests_of, batch_sizes: tuple[int, ...], repeats: int
) -> tuple[dict, dict]:
    """Texts (at the largest batch size) and median seconds per pass of every row.

    Args:
        rows: Per row key (a tuple), `(timer, beam_size)`; a timer is
            `(requests, beam_size) -> (texts, seconds)`, as `time_requests` with its decoder.
        requests_of: `batch_size -> requests`, the sentences cut into requests of that size.
        batch_sizes: The request sizes timed.
        repeats: Timed passes; each row runs once per pass at each batch size, after one
            warm-up request, so machine noise hits the rows alike.

    Returns:
        `(texts, seconds)`: per row key its texts, and per `(*row key, batch size)` the median
        seconds of one pass.
    """
    calls = {}
    for key, (timer, beam_size) in rows.items():
        for batch_size in batch_sizes:
            requests = requests_of(batch_size)
            timer(requests[:1], beam_size)
            calls[*key, batch_size] = functools.partial(timer, requests, beam_size)
    texts, seconds = {}, {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            translated, elapsed = call()
            seconds[key].append(elapsed)
            if key[-1] == max(batch_sizes):
                texts[key[:-1]] = translated
    return texts, {key: statistics.median(values) for key, values in seconds.items()}


def _build_process_decoder(build: Callable, arguments: tuple) -> None:
    global _process_decoder
    _process_decoder = build(*arguments)


def _time_process_requests(requests: list[list[str]], beam_size: int) -> tuple[list[str], float]:
    return time_requests(_process_decoder, requests, beam_size)


class DecoderProcess:
    """A decoder built by `build(*arguments)` in a fresh (spawned) process, timed there.

    Args:
        build: A module-level function that returns the decoder (it is pickled by name).
        *arguments: Its arguments, picklable.
    """

    def __init__(self, build: Callable, *arguments):
        self.pool = futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_build_process_decoder,
            initargs=(build, arguments),
        )

    def time_requests(self, requests: list[list[str]], beam_size: int) -> tuple[list[str], float]:
        """`time_requests` with this process's decoder, timed in the process."""
        return self.pool.submit(_time_process_requests, requests, beam_size).result()

    def __enter__(self) -> DecoderProcess:
        return self

    def __exit__(self, *exception) -> None:
        self.pool.shutdown()
