"""Binder and Colab run every notebook (issue 23, item 7).

Each test builds a fresh virtualenv the way the learner's platform builds it
and executes every chapter (``book/``) and every exercise notebook
(``exercises/``) in it with nbclient, from a copy of the working tree:

* **Binder**: repo2docker installs ``binder/requirements.txt`` and runs
  ``binder/postBuild`` from the repository root; nothing else of the repository
  is installed. Its base environment brings Jupyter's kernel, so the test adds
  ``ipykernel`` and ``nbclient`` (the course's pins) as that base does.
* **Colab**: the notebook starts in a folder with no checkout around it
  (``/content``), in an environment with torch, numpy, matplotlib, scipy and scikit-learn
  and without attnlib; the notebook's setup cell (``tools/setup_cell.py``, as
  the tool writes it for a known repository, here pointed at the copy) must
  install what is missing, and only attnlib's own needs.
* **A notebook downloaded from a site without a repository** (issue 38.4): the
  wheel the site ships (book/_ext/course_wheel.py), served over HTTP with the
  notebook whose setup cell the build rewrote for that address, installs in a
  fresh Colab-like environment and the notebook runs; without the address, the
  wheel saved beside the notebook installs, and without it one line says how.

pip reads binder/requirements.txt as Binder does, ``--extra-index-url`` of
PyTorch's CPU wheels included. Where that index cannot be reached (an offline
CI machine with a local wheel index) pip warns and goes on with its other
indexes; ``PIP_RETRIES=0`` and ``PIP_TIMEOUT=10`` keep that warning from
costing minutes. Both tests are ``slow``: each installs torch into a new
environment and runs every notebook once (a few minutes each).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

PIP_ENV = {
    "PIP_RETRIES": "0",  # an unreachable extra index (offline CI) fails at once, then pip goes on
    "PIP_TIMEOUT": "10",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_PROGRESS_BAR": "off",
    "PIP_NO_INPUT": "1",
}

# nbclient in the test's environment executes each notebook; a notebook's error (the cell,
# its exception) or a timeout is recorded, and the run goes on with the next notebook.
DRIVER = textwrap.dedent("""\
    import json, sys, time
    from pathlib import Path
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out, paths = Path(sys.argv[1]), sys.argv[2:]
    results = {}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        client = NotebookClient(nb, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(Path(path).parent)}})
        try:
            client.execute()
            error = None
        except CellExecutionError as exc:
            error = str(exc)[-2500:]
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[-2500:]
        results[path] = {"seconds": round(time.perf_counter() - start, 1), "error": error}
        print(path, results[path]["seconds"], "ok" if error is None else "FAILED", flush=True)
        out.write_text(json.dumps(results, indent=1))
""")


def requirement_pins() -> dict[str, str]:
    """The course's pins (requirements.txt), by lower-case name: 'numpy' -> 'numpy==2.4.6'."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            pins[line.split("==")[0].lower()] = line
    return pins


def copy_working_tree(dest: Path) -> Path:
    """The files of a fresh clone (tracked, and new files git does not ignore), copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def run(cmd, log: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("timeout", 900)
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    log.append(
        f"$ {' '.join(map(str, cmd))}  (exit {proc.returncode})\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    )
    return proc


# a download from a reachable index that stalls under load (pip's "Read timed out" with
# PIP_RETRIES=0): the network's fault, not the requirements'; the install is tried once more
NETWORK_STALL = re.compile(r"Read timed out|ReadTimeoutError|Connection reset by peer")


def pip_install(python: Path, args: list[str], log: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``python -m pip install *args``, once more with retries if a download stalled."""
    proc = run([str(python), "-m", "pip", "install", *args], log, **kwargs)
    if proc.returncode != 0 and NETWORK_STALL.search(proc.stdout + proc.stderr):
        env = {**kwargs.pop("env", os.environ), "PIP_RETRIES": "3", "PIP_TIMEOUT": "30"}
        proc = run([str(python), "-m", "pip", "install", *args], log, env=env, **kwargs)
    return proc


def fresh_venv(where: Path, log: list[str]) -> tuple[Path, dict[str, str]]:
    """A new virtualenv at ``where`` (no site packages of this one); return its python and an env."""
    proc = run([sys.executable, "-m", "venv", str(where)], log, timeout=300)
    assert proc.returncode == 0, "\n".join(log)
    env = {k: v for k, v in os.environ.items() if k not in {"MPLBACKEND", "PYTHONPATH", "VIRTUAL_ENV"}}
    env.update(PIP_ENV)
    env["PATH"] = f"{where / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(where)
    env["JUPYTER_DATA_DIR"] = str(where / "share" / "jupyter-user")  # no kernelspec of this machine's user
    env["PYTHONHASHSEED"] = "0"
    return where / "bin" / "python", env


def execute_notebooks(python: Path, env: dict[str, str], paths: list[Path], work: Path, log) -> dict:
    driver = work / "run_notebooks.py"
    driver.write_text(DRIVER, encoding="utf-8")
    out = work / "results.json"
    budget = 200 * len(paths)  # generous: each chapter is meant to run in under 60 s
    cmd = [str(python), str(driver), str(out), *map(str, paths)]
    proc = run(cmd, log, env=env, cwd=work, timeout=budget)
    assert out.is_file(), "the driver wrote no result:\n" + "\n".join(log[-2:])
    results = json.loads(out.read_text())
    assert proc.returncode == 0, "\n".join(log[-1:])
    return results


ANSI_COLOUR = re.compile("\x1b\\[[0-9;]*m")


def failures(results: dict) -> str:
    """Each failed notebook with the end of its error (the cell and the exception), without colours."""
    lines = [f"{path}: {ANSI_COLOUR.sub('', r['error'])}" for path, r in results.items() if r["error"]]
    return "\n\n".join(lines)


def notebooks(tree: Path) -> list[Path]:
    return sorted((tree / "book").glob("*.ipynb")) + sorted((tree / "exercises").glob("*.ipynb"))


def test_binder_environment_runs_every_chapter_and_exercise(tmp_path):
    """repo2docker's steps: requirements.txt, postBuild from the root; then every notebook runs."""
    log: list[str] = []
    repo = copy_working_tree(tmp_path / "repo")
    python, env = fresh_venv(tmp_path / "binder-env", log)
    start = time.perf_counter()
    proc = pip_install(python, ["-r", "binder/requirements.txt"], log, cwd=repo, env=env)
    assert proc.returncode == 0, "pip install -r binder/requirements.txt failed:\n" + log[-1]
    pins = requirement_pins()
    base = [pins["ipykernel"], pins["nbclient"]]  # repo2docker's base environment has a kernel
    proc = pip_install(python, base, log, cwd=repo, env=env)
    assert proc.returncode == 0, log[-1]
    proc = run(["bash", "binder/postBuild"], log, cwd=repo, env=env)
    assert proc.returncode == 0, "binder/postBuild failed:\n" + log[-1]
    build_seconds = time.perf_counter() - start

    paths = notebooks(repo)
    assert len(paths) >= 20, paths
    results = execute_notebooks(python, env, paths, tmp_path, log)
    timing = ", ".join(
        f"{Path(p).parent.name}/{Path(p).stem[:2]} {r['seconds']}s" for p, r in results.items()
    )
    print(f"binder: environment built in {build_seconds:.0f} s; notebooks: {timing}")
    assert not failures(results), "notebooks that fail in Binder's environment:\n" + failures(results)
    assert set(results) == set(map(str, paths))


def python_in(python: Path, env: dict[str, str], code: str) -> str:
    """Run ``code`` with the environment's python; its output.

    Run from the environment's bin/ folder: ``python -c`` puts its working folder on
    sys.path, and a checkout's ``attnlib.egg-info`` there would count as installed.
    """
    proc = subprocess.run(
        [str(python), "-c", code], env=env, cwd=python.parent, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def installed(python: Path, env: dict[str, str]) -> dict[str, str]:
    """{distribution name (normalized): version} in the environment of ``python``."""
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = python_in(python, env, code)
    return {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in json.loads(out).items()}


def requirement_closure(python: Path, env: dict[str, str], name: str) -> set[str]:
    """``name`` and every distribution it requires, transitively, as installed (markers honoured)."""
    code = textwrap.dedent(f"""\
        import importlib.metadata as m, json, re
        from packaging.requirements import Requirement
        seen, todo = set(), [{name!r}]
        while todo:
            n = re.sub(r"[-_.]+", "-", todo.pop()).lower()
            if n in seen:
                continue
            seen.add(n)
            try:
                reqs = m.requires(n) or []
            except m.PackageNotFoundError:
                continue
            for r in map(Requirement, reqs):
                if r.marker is None or r.marker.evaluate({{"extra": ""}}):
                    todo.append(r.name)
        print(json.dumps(sorted(seen)))
    """)
    return set(json.loads(python_in(python, env, code)))


def declared_packages() -> list[str]:
    """The top-level packages pyproject.toml ships in the learner's wheel (its packages.find include)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").rstrip(".").split(".")[0] for pattern in include})


def setup_cell_module():
    spec = importlib.util.spec_from_file_location("course_setup_cell", ROOT / "tools" / "setup_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_colab_setup_cell_installs_what_is_missing_and_every_notebook_runs(tmp_path):
    """A Colab-like environment (torch, numpy, matplotlib, scipy, sklearn), notebooks in /content."""
    log: list[str] = []
    repo = copy_working_tree(tmp_path / "repo")  # stands for the repository the cell installs from
    python, env = fresh_venv(tmp_path / "colab-env", log)
    pins = requirement_pins()
    colab = [
        pins[name]
        for name in ("torch", "numpy", "matplotlib", "scipy", "scikit-learn", "ipykernel", "nbclient")
    ]
    proc = pip_install(python, [*colab, "packaging"], log, env=env)
    assert proc.returncode == 0, log[-1]
    before = installed(python, env)
    assert "attnlib" not in before

    # The notebooks as Colab opens them: alone in /content, the setup cell the tool writes
    # for a known repository, installing from the copy (pip builds it as from git+https).
    setup_cell = setup_cell_module()
    source = setup_cell.setup_source(ROOT, SimpleNamespace(pip_source=str(repo)))
    content = tmp_path / "content"
    content.mkdir()
    paths = []
    for path in notebooks(repo):
        nb = nbformat.read(path, as_version=4)
        index = setup_cell.find_setup_cell(nb)
        assert index is not None, f"{path.relative_to(repo)} has no setup cell (tools/setup_cell.py)"
        nb.cells[index].source = source
        target = content / f"{path.parent.name}-{path.name}"
        nbformat.write(nb, target)
        paths.append(target)
    results = execute_notebooks(python, env, paths, tmp_path, log)

    after = installed(python, env)
    new = set(after) - set(before)
    needs = requirement_closure(python, env, "attnlib")
    assert "attnlib" in new, "the setup cell did not install attnlib"
    assert new <= needs, f"the setup cell installed more than attnlib needs: {sorted(new - needs)}"
    changed = {n for n in before if n in after and after[n] != before[n]}
    assert not changed, f"the setup cell replaced preinstalled packages: {sorted(changed)}"

    # The learner's wheel holds exactly the packages pyproject.toml declares (attnlib's own, and
    # coursetools only while pyproject still lists it).
    code = "import importlib.metadata as m; print(m.distribution('attnlib').read_text('top_level.txt'))"
    top = python_in(python, env, code).split()
    assert sorted(top) == declared_packages(), (top, declared_packages())

    timing = ", ".join(f"{Path(p).stem[:12]} {r['seconds']}s" for p, r in results.items())
    print(f"colab: installed {sorted(new)}; notebooks: {timing}")
    assert not failures(results), "notebooks that fail in a Colab-like environment:\n" + failures(results)


def test_building_attnlib_prints_no_deprecation_warning(tmp_path):
    """What a learner's install (the setup cell, postBuild, tools/setup.sh) prints while pip builds attnlib.

    pip shows the build backend's warnings even with ``--quiet`` (setuptools'
    ``project.license`` table, for one, is deprecated since setuptools 77).
    """
    repo = copy_working_tree(tmp_path / "repo")
    env = {**os.environ, **PIP_ENV}
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        str(tmp_path / "wheels"),
        str(repo),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    warnings = [line.strip() for line in out.splitlines() if re.search(r"warning|deprecat", line, re.I)]
    assert not warnings, "building attnlib warns:\n" + "\n".join(dict.fromkeys(warnings))


def test_binder_pins_every_dependency_attnlib_declares():
    """postBuild installs attnlib with ``--no-deps``, so each dependency in pyproject.toml must be
    pinned in binder/requirements.txt (and, the same pin, in requirements.txt): a missing one is a
    ModuleNotFoundError in every Binder notebook (pyyaml was, for the self-checks)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    names = {re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower() for d in declared}
    binder = {}
    for line in (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            binder[line.split("==")[0].lower()] = line.split("+")[0]
    root = requirement_pins()
    missing = sorted(names - set(binder))
    assert not missing, f"binder/requirements.txt does not pin {missing} (pyproject declares {sorted(names)})"
    differ = {n: (binder[n], root.get(n)) for n in names if binder[n] != root.get(n)}
    assert not differ, f"binder and root pins differ: {differ}"


def course_wheel_module():
    spec = importlib.util.spec_from_file_location("course_wheel", ROOT / "book" / "_ext" / "course_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve(folder: Path):
    """An HTTP server for ``folder`` on 127.0.0.1 (a thread); return it and its address with a slash."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def test_a_notebook_downloaded_from_a_site_without_repository_installs_the_sites_wheel(tmp_path):
    """Issue 38.4: the site (no repository known) ships the wheel; its downloads install it.

    The wheel is built as the site's build builds it (book/_ext/course_wheel.py), served
    over HTTP with an exercise notebook whose setup cell is rewritten as the build rewrites
    it for that address. The notebook, downloaded into a Colab-like folder and run in a
    fresh environment without attnlib, installs the wheel from the site and runs to its
    end. Then, as a site whose address was unknown at build time: the wheel saved beside
    the notebook is installed; without it the cell stops with the one line that says what
    to do.
    """
    from urllib.request import urlopen

    course_wheel = course_wheel_module()
    setup_cell = setup_cell_module()
    no_repository = SimpleNamespace(pip_source=None)
    log: list[str] = []

    # The site: the wheel, and the exercise notebook the chapter's box offers for download.
    site = tmp_path / "site"
    (site / "_exercises").mkdir(parents=True)
    wheel = course_wheel.build_wheel(ROOT, tmp_path / "wheel")
    stem = "03-queries-keys-values.ipynb"
    shutil.copy2(ROOT / "exercises" / stem, site / "_exercises" / stem)
    server, address = serve(site)
    try:
        source = course_wheel.site_setup_source(ROOT, address, no_repository)
        url = course_wheel.wheel_url(address, wheel.name)
        assert f'_source = "{url}"' in source, source
        changed = course_wheel.publish(ROOT, site, wheel, source)
        assert changed == [site / "_exercises" / stem]

        content = tmp_path / "content"  # Colab's folder: no checkout around it
        content.mkdir()
        with urlopen(f"{address}_exercises/{stem}") as response:
            (content / stem).write_bytes(response.read())

        python, env = fresh_venv(tmp_path / "colab-env", log)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        pins = requirement_pins()
        colab = [pins[name] for name in ("torch", "numpy", "pyyaml", "matplotlib", "ipykernel", "nbclient")]
        proc = pip_install(python, colab, log, env=env)
        assert proc.returncode == 0, log[-1]
        before = installed(python, env)
        assert "attnlib" not in before

        results = execute_notebooks(python, env, [content / stem], tmp_path, log)
    finally:
        server.shutdown()
        server.server_close()
    assert not failures(results), "the downloaded notebook fails:\n" + failures(results)
    after = installed(python, env)
    assert set(after) - set(before) == {"attnlib"}, sorted(set(after) - set(before))
    assert not {n for n in before if after.get(n) != before[n]}, "the setup cell replaced packages"
    code = "import importlib.metadata as m; print(m.distribution('attnlib').read_text('direct_url.json'))"
    origin = json.loads(python_in(python, env, code))
    assert origin["url"] == url, f"attnlib came from {origin['url']}, not the site's {url}"

    # A site built without its address: the wheel saved beside the notebook, else one line.
    proc = run([str(python), "-m", "pip", "uninstall", "--yes", "attnlib"], log, env=env)
    assert proc.returncode == 0, log[-1]
    beside = setup_cell.setup_source(ROOT, no_repository)
    assert beside == course_wheel.site_setup_source(ROOT, None, no_repository)
    probe = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(beside),
            nbformat.v4.new_code_cell("import attnlib.checks\nprint(attnlib.__file__)"),
        ]
    )
    for folder, with_wheel in (("saved", True), ("alone", False)):
        (tmp_path / folder).mkdir()
        if with_wheel:
            shutil.copy2(wheel, tmp_path / folder / wheel.name)
        nbformat.write(probe, tmp_path / folder / "downloaded.ipynb")
    results = execute_notebooks(
        python,
        env,
        [tmp_path / "alone" / "downloaded.ipynb", tmp_path / "saved" / "downloaded.ipynb"],
        tmp_path,
        log,
    )
    alone = ANSI_COLOUR.sub("", results[str(tmp_path / "alone" / "downloaded.ipynb")]["error"] or "")
    assert f"ModuleNotFoundError: attnlib is not installed: download {wheel.name}" in alone, alone
    assert f"%pip install {wheel.name}" in alone and "<org>" not in alone, alone
    saved = results[str(tmp_path / "saved" / "downloaded.ipynb")]
    assert saved["error"] is None, saved["error"]
    origin = json.loads(python_in(python, env, code))
    assert origin["url"] == (tmp_path / "saved" / wheel.name).as_uri(), origin
