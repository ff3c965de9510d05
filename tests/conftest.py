"""Shared fixtures: the repository root and the website, built once per session."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE_DIR = ROOT / "test-artifacts" / "site"


@pytest.fixture
def one_thread():
    """Run a test on one torch thread, as the chapters do for their tiny models.

    On a shared 2-core CPU tiny recurrent and attention models train several
    times faster on one thread, and the results repeat exactly.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def built_book() -> tuple[Path, str]:
    """Build the book strictly into test-artifacts/site; return (html folder, build log).

    The build runs once per test session; it fails the dependent tests, with
    the log, when jupyter-book exits non-zero (any warning, with -W).
    """
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb), "build", str(ROOT), "-W", "-n", "--keep-going", "--path-output", str(SITE_DIR)]
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["PYTHONHASHSEED"] = "0"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1500)
    log = proc.stdout + proc.stderr
    (SITE_DIR).mkdir(parents=True, exist_ok=True)
    (SITE_DIR / "build.log").write_text(log, encoding="utf-8")
    if proc.returncode != 0:
        pytest.fail(f"strict book build failed (exit {proc.returncode}); log tail:\n{log[-6000:]}")
    return SITE_DIR / "_build" / "html", log
