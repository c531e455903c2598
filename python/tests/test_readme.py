"""The README's Python example runs as written."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(monkeypatch):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it from Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {})
