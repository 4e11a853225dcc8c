"""A closed-loop load generator: concurrent clients sending requests to an in-process decoder.

    result = drive_load(translate, requests, clients=4, max_requests=400, max_seconds=30)
    result.sentences_per_second, result.latency(50), result.latency(99)

Each client is a thread that sends one request, waits for its answer, and sends the next, as
the clients of a server do that wait for their translation: with `clients` of them, at most
`clients` requests are in flight at once. The generator stops by itself: after `max_requests`
requests, or once `max_seconds` have passed (a request already sent is still answered and
counted). It calls the function it is given and nothing else: no socket, no server address.
"""

from __future__ import annotations

import itertools
import resource
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import NamedTuple

import numpy as np


class LoadResult(NamedTuple):
    """What one load gave.

    Attributes:
        requests: Requests answered.
        sentences: Sentences in them.
        seconds: From the first request sent to the last answer.
        latencies: Seconds from sending to answer, per request, in the order they were answered.
    """

    requests: int
    sentences: int
    seconds: float
    latencies: tuple[float, ...]

    @property
    def sentences_per_second(self) -> float:
        """Throughput."""
        return self.sentences / self.seconds if self.seconds else 0.0

    def latency(self, percent: float) -> float:
        """The latency below which `percent` % of the requests were answered (linear between).

        Raises:
            ValueError: If no request was answered.
        """
        if not self.latencies:
            raise ValueError("no request was answered: no latency to give")
        return float(np.percentile(self.latencies, percent))


def drive_load(
    translate: Callable[[list[str]], object],
    requests: Sequence[list[str]],
    clients: int,
    max_requests: int,
    max_seconds: float,
    clock: Callable[[], float] = time.perf_counter,
) -> LoadResult:
    """Sends `requests` (again from the first when all are sent) from `clients` threads.

    Args:
        translate: Answers one request (a list of sentences); its answer is not kept.
        requests: The requests, in the order they are sent.
        clients: Concurrent clients, at least 1.
        max_requests: Requests sent in all, at least 1.
        max_seconds: No request is sent once this many seconds have passed.
        clock: Seconds, for the deadline and the latencies.

    Returns:
        The `LoadResult`.

    Raises:
        ValueError: If `requests` is empty or a bound is below its least value.
    """
    if not requests:
        raise ValueError("no requests to send")
    if clients < 1 or max_requests < 1 or max_seconds <= 0:
        raise ValueError(
            f"clients and max_requests must be >= 1 and max_seconds > 0 "
            f"(got {clients}, {max_requests}, {max_seconds})"
        )
    tickets = itertools.count()
    lock = threading.Lock()
    answered: list[tuple[float, int]] = []
    start = clock()
    deadline = start + max_seconds

    def client() -> None:
        while True:
            with lock:
                ticket = next(tickets)
            if ticket >= max_requests or clock() >= deadline:
                return
            request = requests[ticket % len(requests)]
            sent = clock()
            translate(request)
            with lock:
                answered.append((clock() - sent, len(request)))

    with futures.ThreadPoolExecutor(max_workers=clients, thread_name_prefix="client") as pool:
        for running in [pool.submit(client) for _ in range(clients)]:
            running.result()
    seconds = clock() - start
    latencies = tuple(latency for latency, _ in answered)
    return LoadResult(len(answered), sum(size for _, size in answered), seconds, latencies)


def peak_memory_bytes() -> int:
    """This process's peak resident memory so far (Linux gives `ru_maxrss` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
