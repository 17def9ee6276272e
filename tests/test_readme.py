"""The README's in-process example runs as written."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_core_example_runs(capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None, "README lost its python example"
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    table = namespace["table"]
    centers = namespace["centers"]
    totals = [sum(len(c[g]) for c in centers) for g in (0, 1)]
    np.testing.assert_allclose(table.counts.sum(axis=1), totals)
    assert len(capsys.readouterr().out.split()) == 4
