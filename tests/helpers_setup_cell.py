"""Run a notebook's setup cell (tools/setup_cell.py) as a learner's kernel would, without
installing anything: shared by the site tests of the repository case (test_launch) and of
the site's wheel (test_site_wheel)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def run_setup_cell(source: str, cwd: Path, monkeypatch) -> list[list[str]]:
    """Run the setup cell in ``cwd`` as if attnlib were missing; return the pip commands it ran."""
    import importlib.util

    calls = []
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "attnlib" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: calls.append(list(args)))
    monkeypatch.chdir(cwd)
    exec(compile(source, "setup-cell", "exec"), {})
    return calls
