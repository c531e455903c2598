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


def test_compare_solvers_example_writes_a_png(tmp_path):
    import subprocess
    import sys
    out = tmp_path / "compare.png"
    r = subprocess.run([sys.executable, str(ROOT / "python/examples/compare_solvers.py"),
                        str(ROOT / "mjcf_models/hopper.xml"), "--seconds", "0.3", "--out",
                        str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 10000 and out.read_bytes()[:4] == b"\x89PNG"
    for solver in ("mujoco", "ipm", "comfree", "lcp"):
        assert solver in r.stdout
