"""Gradescope's ``setup.sh`` builds on the base images the guide names (issue 34, item 6).

Ubuntu 22.04's python3 is 3.10 and 24.04's is 3.12; the pinned numpy, scipy, matplotlib and
scikit-learn need 3.11 or newer. The archive's own ``setup.sh`` is run here, step by step as far
as this machine allows: ``python3`` is the base image's interpreter (a real 3.10 or 3.12),
``apt-get`` a stand-in that records what it is asked and, for ``python3.11``, provides a real
3.11 as Ubuntu's package would; the script stops after building the virtual environment
(``COURSE_SETUP_STOP=venv``: the pinned wheels come from indexes this machine cannot reach).
The environment's Python must be one every pin installs on, by the pins' own
``Requires-Python`` (read from the course's environment, where the same versions are installed).
"""

from __future__ import annotations

import importlib.metadata
import os
import stat
import subprocess
from pathlib import Path

import pytest
from helpers_skips import INTERPRETER_SKIP
from packaging.specifiers import SpecifierSet

from coursetools.grade import gradescope

pytestmark = pytest.mark.grader

ROOT = Path(__file__).resolve().parents[3]


def _interpreter(minor: int) -> Path | None:
    """A real CPython 3.<minor> on this machine (pyenv's, or the system's), or None."""
    pyenv = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser() / "versions"
    found = sorted(pyenv.glob(f"3.{minor}.*/bin/python3.{minor}")) + [Path(f"/usr/bin/python3.{minor}")]
    return next((p for p in found if p.is_file() and os.access(p, os.X_OK)), None)


def _pins() -> dict[str, str]:
    pins = {}
    for line in gradescope._requirements(ROOT).splitlines():
        if "==" in line and not line.startswith(("#", "-")):
            name, version = line.split("==")
            pins[name.strip()] = version.strip()
    return pins


def _installs_on(minor: int) -> dict[str, bool]:
    """``{pin: whether its Requires-Python admits 3.<minor>}`` (the course's environment holds the pins)."""
    admits = {}
    for name in _pins():
        meta = importlib.metadata.metadata(name)
        admits[name] = SpecifierSet(meta.get("Requires-Python") or "").contains(f"3.{minor}")
    return admits


def test_the_pins_need_the_python_setup_sh_asks_for():
    assert all(_installs_on(gradescope.MIN_PYTHON[1]).values())
    assert not all(_installs_on(10).values())  # why 22.04's own python3 cannot build it
    assert all(_installs_on(12).values())  # 24.04's can


@pytest.mark.slow
@pytest.mark.parametrize("image, base_minor", [("ubuntu-22.04", 10), ("ubuntu-24.04", 12)])
def test_setup_sh_builds_the_environment_with_a_python_every_pin_installs_on(tmp_path, image, base_minor):
    base, py311 = _interpreter(base_minor), _interpreter(11)
    if base is None or py311 is None:
        pytest.skip(f"{INTERPRETER_SKIP} {image} (Python 3.{base_minor} and 3.11 wanted)")
    bin_dir = tmp_path / "bin"  # the image's PATH: its python3, and apt-get
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(base)
    log = tmp_path / "apt.log"
    apt = bin_dir / "apt-get"
    apt.write_text(
        "#!/bin/bash\n"
        f'echo "apt-get $*" >> "{log}"\n'
        f'case " $* " in *" python3.11 "*) /bin/ln -sf "{py311}" "{bin_dir}/python3.11" ;; esac\n'
        "exit 0\n"
    )
    apt.chmod(apt.stat().st_mode | stat.S_IXUSR)
    source = tmp_path / "source"
    source.mkdir()
    setup = tmp_path / "setup.sh"
    setup.write_text(gradescope.script("setup.sh"))
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "COURSE_SETUP_SOURCE": str(source),
        "COURSE_SETUP_VENV": str(tmp_path / "venv"),
        "COURSE_SETUP_STOP": "venv",
    }
    proc = subprocess.run(["/bin/bash", str(setup)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    venv_python = tmp_path / "venv" / "bin" / "python"
    minor = int(
        subprocess.run(
            [str(venv_python), "-c", "import sys; print(sys.version_info[1])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert (3, minor) >= gradescope.MIN_PYTHON
    assert all(_installs_on(minor).values()), _installs_on(minor)
    asked = log.read_text()
    if base_minor < gradescope.MIN_PYTHON[1]:
        assert "install -y --no-install-recommends python3.11 python3.11-venv" in asked
        assert minor == 11
    else:
        assert "python3.11" not in asked and minor == base_minor  # the image's own python3
    # the venv works: pip runs in it (what the rest of setup.sh uses)
    subprocess.run([str(venv_python), "-m", "pip", "--version"], check=True, capture_output=True)


def test_the_archive_carries_this_setup_sh():
    assert gradescope.script("setup.sh").startswith("#!/usr/bin/env bash\n")
    assert subprocess.run(["bash", "-n"], input=gradescope.script("setup.sh"), text=True).returncode == 0
