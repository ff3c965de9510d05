"""The course on a second float path (issue 23, item 6).

PyTorch picks its CPU kernels at start-up: AVX-512 or AVX2 where the CPU has
them, ``ATEN_CPU_CAPABILITY=default`` selects the portable ones that every
x86-64 machine has. Sums come out in another order there, so a result that
holds only for one kernel's rounding (or one thread count) shows up as a
failure. The root ``conftest.py`` runs every ``book/`` and ``solutions/``
notebook a second time on that path with one thread (items ending in
``[default-1thread]``); this file runs ``attnlib``'s library tests there, and
checks that the notebooks' second copy really gets that path.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root_conftest)
SECOND_PATH, SECOND_PATH_ENV = root_conftest.SECOND_PATH, root_conftest.SECOND_PATH_ENV


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def test_environment_is_restored_exactly(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    with root_conftest.environment(SECOND_PATH_ENV):
        assert os.environ["ATEN_CPU_CAPABILITY"] == "default"
        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert "ATEN_CPU_CAPABILITY" not in os.environ
    assert os.environ["OMP_NUM_THREADS"] == "7"


@pytest.mark.slow
def test_library_tests_pass_on_the_default_float_path_with_one_thread():
    """tests/library (its quick tests: every comparison with torch) under ATEN_CPU_CAPABILITY=default."""
    env = {**os.environ, **SECOND_PATH_ENV}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--no-notebooks"]
    cmd += ["-m", "not slow", "-o", "addopts=", "tests/library"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"tests/library failed with {SECOND_PATH_ENV} (exit {proc.returncode}); output tail:\n{tail(out)}"
    )
    assert " passed" in out, tail(out)


@pytest.mark.slow
def test_the_second_copy_of_a_notebook_runs_on_the_default_path(tmp_path):
    """A probe notebook, collected by the root conftest, prints its kernel's path in both copies.

    The native copy's kernel sees this process's environment; the
    ``[default-1thread]`` copy's kernel reports PyTorch's DEFAULT kernels and
    one thread, and this test process's environment is left as it was.
    """
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --nbval-current-env\n", encoding="utf-8")
    probe = nbformat.v4.new_code_cell(
        textwrap.dedent("""\
            import os
            import torch
            print(os.environ.get("ATEN_CPU_CAPABILITY"), os.environ.get("OMP_NUM_THREADS"),
                  torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())""")
    )
    for folder in ("book", "exercises"):
        (tmp_path / folder).mkdir()
        nb = nbformat.v4.new_notebook(cells=[probe])
        nbformat.write(nb, tmp_path / folder / "probe.ipynb")
    env = {k: v for k, v in os.environ.items() if k not in SECOND_PATH_ENV}
    env["COURSE_PROBE_OUT"] = str(tmp_path)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--collect-only"]
    collected = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert ids == [
        "book/probe.ipynb::Cell 0",
        f"book/probe.ipynb::Cell 0[{SECOND_PATH}]",
        "exercises/probe.ipynb::Cell 0",
    ], collected.stdout + collected.stderr

    # Run both copies; nbval-lax passes either way, so the cell also writes what it saw.
    probe.source += textwrap.dedent("""
        import pathlib
        name = "second" if os.environ.get("ATEN_CPU_CAPABILITY") == "default" else "native"
        line = f"{torch.backends.cpu.get_cpu_capability()} {torch.get_num_threads()}"
        pathlib.Path(os.environ["COURSE_PROBE_OUT"], name).write_text(line)""")
    nbformat.write(nbformat.v4.new_notebook(cells=[probe]), tmp_path / "book" / "probe.ipynb")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "book"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, tail(proc.stdout + proc.stderr)
    assert (tmp_path / "second").read_text() == "DEFAULT 1"
    native = (tmp_path / "native").read_text()
    assert (
        native.split()[0]
        == subprocess.run(
            [sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    ), native
    assert "ATEN_CPU_CAPABILITY" not in os.environ or os.environ["ATEN_CPU_CAPABILITY"] != "default"
