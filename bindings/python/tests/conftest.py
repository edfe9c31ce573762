"""Shared fixtures: databases in a temporary directory, one per GIL mode."""

from __future__ import annotations

import pathlib
import sys
import threading
import time
from typing import Any, Callable, Iterator

import pytest

import senju

GIL_MODES = ["auto", "release", "hold"]


@pytest.fixture(params=GIL_MODES)
def gil(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "test.sj"


@pytest.fixture
def db(path: pathlib.Path, gil: str) -> Iterator[senju.Db]:
    with senju.open(path, gil=gil) as d:  # type: ignore[arg-type]
        yield d


# `count_gil_releases(prepare, call, attempts)`: see `_count_gil_releases`.
GilCounter = Callable[[Callable[[int], Any], Callable[[Any], None], int], int]


def _count_gil_releases(prepare: Callable[[int], Any], call: Callable[[Any], None], attempts: int) -> int:
    """Whether one of `attempts` calls `call(prepare(i))` let another thread run (1 or 0).
    With the switch interval at an hour, the counting thread runs only when this one gives
    the GIL up inside a call (or sleeps), so a count that moves across one `call` proves that
    call released it; `prepare` runs outside the count."""
    ticks = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(3600)
    counter = threading.Thread(target=count)
    counter.start()
    try:
        for i in range(attempts):
            arg = prepare(i)
            before = ticks[0]
            call(arg)
            if ticks[0] != before:
                return 1
        return 0
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        counter.join()


@pytest.fixture
def count_gil_releases() -> GilCounter:
    """Counts whether a call released the GIL (`_count_gil_releases`), without a clock."""
    return _count_gil_releases
