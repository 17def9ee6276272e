"""The dev extras install what the docs tell a developer to run: `jupyter nbconvert` for the
analyst notebook (docs/client.md)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_notebook_command_the_docs_give_is_installed_by_the_dev_extras() -> None:
    docs = (ROOT / "docs" / "client.md").read_text()
    assert "jupyter nbconvert --to notebook --execute examples/analyst.ipynb" in docs
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["dev"]
    names = {re.split(r"[<>=\[ ]", d, maxsplit=1)[0].lower() for d in dev}
    assert {"nbconvert", "ipykernel", "nbclient", "nbformat"} <= names
    # and this environment, installed from them, has the command
    assert importlib.util.find_spec("nbconvert") is not None
    # `jupyter nbconvert` is `jupyter` (jupyter_core) running the `jupyter-nbconvert` script
    assert shutil.which("jupyter", path=str(Path(sys.executable).parent)) is not None
    scripts = {e.name for e in importlib.metadata.entry_points(group="console_scripts")}
    assert "jupyter-nbconvert" in scripts
