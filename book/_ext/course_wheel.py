"""The learner's attnlib wheel ships with the site, and the notebooks the site offers install it.

A notebook downloaded from the site and opened where attnlib is missing (Colab, a
JupyterLab without the course) must be able to go on. The build therefore

1. builds the learner's wheel from the checkout it builds (``pip wheel --no-deps
   --no-build-isolation`` on a copy of ``pyproject.toml``, ``README.md`` and the files
   git lists under ``attnlib/``: offline, and a stray ``build/`` folder cannot leak into
   it) and puts it into the site as ``_static/attnlib-<version>-py3-none-any.whl``;
2. rewrites the setup cell (tools/setup_cell.py) of every notebook the site offers for
   download (``_sources/**/*.ipynb``, the theme's ".ipynb" button, and ``_exercises/``,
   the exercise boxes of course_exercises.py) for this site:

   * the course's repository known (book/_ext/course_repository.py): ``pip install
     git+<repository>.git@<branch>``, as the committed notebooks do;
   * else, the site's address known: ``pip install <site>/_static/<wheel>``; the address
     is ``COURSE_SITE_URL``, else ``html.baseurl`` of ``_config.yml``
     (``https://<org>.github.io/<repo>/``). A notebook opened in Colab does not know where
     it came from, so the address is written into it here;
   * else: the wheel beside the notebook (in its folder, or Colab's ``/content``), and
     where there is none one line that says which file to download and the exact
     ``%pip install`` command.

Every chapter's exercise box links the wheel (course_exercises.py). The build's log
says which of the three the notebooks got (``course_wheel: ...``).

The third case is a site whose downloads cannot install attnlib by themselves: they
stop at their first cell until the reader saves the wheel beside them. A build that
comes to it without being told so (``plan_downloads``) writes a Sphinx warning, which
fails the strict build (``-W``, tools/build-book.sh): a site to publish needs
``COURSE_SITE_URL`` (or ``html.baseurl``, or the repository). A local or offline build
says it means it with ``COURSE_SITE_URL=none`` (an address of none, whatever
``html.baseurl`` says): then the log's line says so and nothing warns. Either way the
exercise box under each chapter's title tells the reader to save the wheel beside the
notebook before running it (course_exercises.py reads ``course_downloads``);
tests/site/test_site_downloads.py checks both in a small Sphinx project.

tests/site/test_site_wheel.py checks the rule and the built site; tests/test_binder.py
installs a served wheel with the rewritten cell in a fresh, Colab-like environment.

Nothing here imports Sphinx at module level: the tests and tools import it without Sphinx.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import tomllib

ENV_SITE_URL = "COURSE_SITE_URL"
# COURSE_SITE_URL=none: a build meant to have no address (local, offline); its downloads
# install the wheel saved beside them, and the build does not warn about it.
NO_ADDRESS = "none"
# Where the downloadable notebooks install attnlib from (the config value ``course_downloads``).
FROM_REPOSITORY, FROM_SITE, FROM_BESIDE = "repository", "site", "beside"
STATIC_FOLDER = "_static"
# The folders of the built site whose notebooks a learner downloads.
DOWNLOAD_GLOBS = ("_sources/**/*.ipynb", "_exercises/*.ipynb")


class SiteUrlError(ValueError):
    """A site address the notebooks cannot install from."""


def wheel_filename(root: Path) -> str:
    """The name pip gives the learner's wheel: ``attnlib-0.1.0-py3-none-any.whl`` (from pyproject.toml)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = re.sub(r"[-_.]+", "_", project["name"]).lower()
    return f"{name}-{project['version']}-py3-none-any.whl"


def site_url(baseurl: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The site's address with a trailing slash (``COURSE_SITE_URL``, else ``baseurl``); None when unknown.

    ``COURSE_SITE_URL=none`` is no address, whatever ``baseurl`` says.
    """
    environ = os.environ if environ is None else environ
    value = (environ.get(ENV_SITE_URL) or "").strip() or (baseurl or "").strip()
    if not value or value.lower() == NO_ADDRESS:
        return None
    parts = urlsplit(value)
    if parts.scheme not in {"https", "http"} or not parts.netloc or parts.query or parts.fragment:
        raise SiteUrlError(
            f"the site's address ({ENV_SITE_URL} or html.baseurl of _config.yml) must be like "
            f"https://example.github.io/attention-course/, not {value!r}"
        )
    return value.rstrip("/") + "/"


def wheel_url(site: str, filename: str) -> str:
    """Where the site serves the wheel: ``<site>/_static/<filename>``."""
    return f"{site.rstrip('/')}/{STATIC_FOLDER}/{filename}"


def no_address_meant(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the builder said the site has no address on purpose (``COURSE_SITE_URL=none``)."""
    environ = os.environ if environ is None else environ
    return (environ.get(ENV_SITE_URL) or "").strip().lower() == NO_ADDRESS


@dataclass(frozen=True)
class Downloads:
    """Where the notebooks the site offers for download install attnlib from, and what the build says."""

    source: str  # FROM_REPOSITORY, FROM_SITE or FROM_BESIDE
    pip_source: str | None  # what their setup cell gives pip; None: the wheel saved beside them
    meant: bool = True  # False: FROM_BESIDE although nobody said so (COURSE_SITE_URL=none)

    @property
    def self_installing(self) -> bool:
        """Whether a downloaded notebook installs attnlib with nothing but its first cell."""
        return self.source != FROM_BESIDE

    @property
    def warns(self) -> bool:
        """Whether the build warns (a Sphinx warning; the strict build fails on it)."""
        return not self.self_installing and not self.meant


def plan_downloads(repository, site: str | None, filename: str, meant_without_address: bool) -> Downloads:
    """The rule of the module's docstring: the repository, else the site's wheel, else the wheel beside.

    ``repository`` is a CourseRepository (``pip_source`` None when unknown), ``site`` the
    site's address or None, ``filename`` the wheel's name, ``meant_without_address`` what
    ``no_address_meant`` says.
    """
    if repository.pip_source is not None:
        return Downloads(FROM_REPOSITORY, repository.pip_source)
    if site is not None:
        return Downloads(FROM_SITE, wheel_url(site, filename))
    return Downloads(FROM_BESIDE, None, meant=meant_without_address)


def build_warning(filename: str) -> str:
    """The warning of a build whose downloads cannot install attnlib by themselves, and nobody said so."""
    return (
        f"course_wheel: the notebooks this site offers for download cannot install attnlib by "
        f"themselves: no repository (COURSE_REPOSITORY or a GitHub remote origin) "
        f"and no site address ({ENV_SITE_URL} or html.baseurl of _config.yml), so they stop "
        f"at their first cell until the reader saves {filename} beside them. To publish, give the "
        f"address: {ENV_SITE_URL}=https://<org>.github.io/<repo>/ bash tools/build-book.sh; for a "
        f"local or offline build, say so: {ENV_SITE_URL}={NO_ADDRESS} bash tools/build-book.sh"
    )


def log_message(downloads: Downloads, filename: str, changed: int) -> str:
    """The build log's ``course_wheel:`` line: which wheel the site ships and what its downloads install."""
    if downloads.source == FROM_REPOSITORY:
        how = f"pip install {downloads.pip_source} (the repository)"
    elif downloads.source == FROM_SITE:
        how = f"pip install {downloads.pip_source}"
    else:
        why = f"{ENV_SITE_URL}={NO_ADDRESS}" if downloads.meant else f"no {ENV_SITE_URL} or html.baseurl"
        how = f"the wheel saved beside the notebook, else a message ({why}; the exercise boxes say so)"
    return (
        f"course_wheel: {STATIC_FOLDER}/{filename}; the downloadable notebooks install attnlib with {how}; "
        f"{changed} setup cells rewritten"
    )


def _source_files(root: Path) -> list[str]:
    """pyproject.toml, README.md and attnlib's files as a fresh clone has them (git), else as on disk."""
    proc = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", "attnlib"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0 and proc.stdout.strip():
        listed = proc.stdout.splitlines()
    else:  # an export without git
        listed = [
            str(p.relative_to(root))
            for p in (root / "attnlib").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
    return ["pyproject.toml", "README.md", *listed]


def build_wheel(root: Path, dest: Path, python: str = sys.executable) -> Path:
    """Build the learner's wheel from the checkout at ``root`` into ``dest``, offline; return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="course-wheel-") as tmp:
        source = Path(tmp) / "source"
        for name in _source_files(root):
            if (root / name).is_file():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / name, source / name)
        env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        cmd = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        proc = subprocess.run(
            [*cmd, "-w", str(Path(tmp) / "wheel"), str(source)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"building attnlib's wheel failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
        (built,) = (Path(tmp) / "wheel").glob("*.whl")
        if built.name != wheel_filename(root):
            raise RuntimeError(f"pip built {built.name}, expected {wheel_filename(root)}")
        target = dest / built.name
        shutil.copyfile(built, target)
    return target


def setup_cell_module(root: Path):
    """tools/setup_cell.py of the checkout at ``root`` (the one rule for the setup cell's code)."""
    spec = importlib.util.spec_from_file_location("course_setup_cell", root / "tools" / "setup_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def site_setup_source(root: Path, site: str | None, repository=None) -> str:
    """The setup cell of the site's downloadable notebooks (see the module's docstring)."""
    setup_cell = setup_cell_module(root)
    url = wheel_url(site, wheel_filename(root)) if site else None
    return setup_cell.setup_source(root, repository, wheel_url=url)


def downloadable_notebooks(outdir: Path) -> list[Path]:
    return sorted({p for pattern in DOWNLOAD_GLOBS for p in outdir.glob(pattern)})


def rewrite_setup_cells(root: Path, paths, source: str) -> list[Path]:
    """Give each notebook of ``paths`` the setup cell ``source``; return those that changed.

    A notebook without a setup cell is left as it is (the theme's download of a page
    that is not a course notebook).
    """
    import nbformat

    setup_cell = setup_cell_module(root)
    changed = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if setup_cell.find_setup_cell(nb) is None:
            continue
        if setup_cell.apply(nb, source):
            path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
            changed.append(path)
    return changed


def publish(root: Path, outdir: Path, wheel: Path, source: str) -> list[Path]:
    """Copy ``wheel`` into ``outdir/_static`` and give the downloadable notebooks ``source``."""
    static = outdir / STATIC_FOLDER
    static.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, static / wheel.name)
    return rewrite_setup_cells(root, downloadable_notebooks(outdir), source)


# --- Sphinx -------------------------------------------------------------------------------------


def _configure(app, config) -> None:
    """The site's address and where its downloads install from (after course_repository's hook)."""
    from sphinx.errors import ConfigError

    root = Path(app.confdir)
    try:
        app.course_site_url = site_url(config.html_baseurl)
    except SiteUrlError as error:
        raise ConfigError(str(error)) from None
    app.course_downloads_repository = setup_cell_module(root).course_repository(root)
    app.course_downloads = plan_downloads(
        app.course_downloads_repository, app.course_site_url, wheel_filename(root), no_address_meant()
    )
    # A change re-reads the pages: their exercise boxes say it (course_exercises.py).
    config.course_downloads = app.course_downloads.source


def _build(app) -> None:
    from sphinx.errors import ExtensionError
    from sphinx.util import logging

    app.course_wheel = None
    if app.builder.format != "html":
        return
    root = Path(app.confdir)
    if app.course_downloads.warns:
        logging.getLogger(__name__).warning(build_warning(wheel_filename(root)))
    try:
        app.course_wheel = build_wheel(root, Path(app.outdir).parent / "course-wheel")
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        raise ExtensionError(str(error)) from None


def _publish(app, exception) -> None:
    from sphinx.util import logging

    if exception is not None or getattr(app, "course_wheel", None) is None:
        return
    root = Path(app.confdir)
    downloads = app.course_downloads
    source = site_setup_source(root, app.course_site_url, app.course_downloads_repository)
    changed = publish(root, Path(app.outdir), app.course_wheel, source)
    logging.getLogger(__name__).info(log_message(downloads, app.course_wheel.name, len(changed)))


def setup(app) -> dict:
    app.add_config_value("course_downloads", FROM_BESIDE, "env")
    # After course_repository's hook (priority 100), which the site's buttons need first.
    app.connect("config-inited", _configure, priority=600)
    app.connect("builder-inited", _build)
    # After course_exercises copies the exercise notebooks into the site (priority 500).
    app.connect("build-finished", _publish, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
