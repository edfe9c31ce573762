"""The repository README's Python examples run as printed (so the README stays true)."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)


def test_readme_has_a_python_example() -> None:
    assert python_blocks(), f"no ```python block in {README}"


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(index: int, tmp_path: pathlib.Path) -> None:
    source = python_blocks()[index]
    namespace: dict[str, object] = {"__name__": "__readme__"}
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the examples open relative paths such as "data.sj"
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, f"{README}:python block {index}", "exec"), namespace)
    finally:
        os.chdir(cwd)
    # An example that opens a database in a `with` block leaves it closed.
    for name, value in namespace.items():
        if hasattr(value, "closed") and type(value).__module__.startswith("senju"):
            assert value.closed, f"README example {index} left `{name}` open"
