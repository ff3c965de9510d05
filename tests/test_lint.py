"""ruff is configured in pyproject.toml and the whole repository is clean."""

import subprocess
import sys
from pathlib import Path


def test_ruff_is_clean(repo_root):
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "."], cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
