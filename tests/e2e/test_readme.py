"""The README's Python example runs as written (on a scratch store in a temporary folder)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_python_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has no Python example"
    example = blocks[0]
    ran = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "CANON_EMBEDDER": "hashing",
                              "PYTHONPATH": str(README.parent)})
    assert ran.returncode == 0, ran.stderr
    packet_id, ok = ran.stdout.split()
    assert packet_id.startswith("pkt_") and ok == "True"
    assert (tmp_path / "example.db").exists()
