"""Shared fixtures: databases in a temporary directory, one per GIL mode."""

from __future__ import annotations

import pathlib
from typing import Iterator

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
