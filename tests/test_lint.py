"""ruff is configured in pyproject.toml and the whole repository is clean: lint and format."""

import subprocess
import sys
from pathlib import Path


def test_ruff_is_clean(repo_root):
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run([str(ruff), "check", "."], cwd=repo_root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean(repo_root):
    """`ruff format --check` with the configured line length (110); notebooks are excluded there."""
    ruff = Path(sys.executable).with_name("ruff")
    proc = subprocess.run(
        [str(ruff), "format", "--check", "--output-format", "concise", "."],
        cwd=repo_root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, "run `ruff format` on:\n" + proc.stdout + proc.stderr
