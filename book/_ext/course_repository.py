"""The course's repository, in one place: the header's repository buttons and the launch buttons.

The repository URL is not written in ``_config.yml``. It is found, in this order,

1. in the environment variable ``COURSE_REPOSITORY`` (``https://github.com/<org>/<repo>``);
2. in the git remote ``origin`` of the checkout being built, when it is a GitHub URL
   (``https://github.com/<org>/<repo>.git`` or ``git@github.com:<org>/<repo>.git``).

With a repository, every page gets the repository, "open issue" and "suggest edit"
buttons, and every notebook page the Binder and Colab launch buttons (their services
are ``launch_buttons.binderhub_url`` and ``launch_buttons.colab_url`` of
``_config.yml``). The JupyterHub button (an nbgitpuller link that clones the
repository into the learner's hub) appears only when ``COURSE_JUPYTERHUB`` names the
hub (``https://hub.example.edu``). Without a repository the site has none of these
buttons, rather than dead links; the download buttons stay (``COURSE_REPOSITORY=none``
asks for that even in a GitHub checkout). ``COURSE_BRANCH`` overrides
``repository.branch`` of ``_config.yml``.

The same resolution gives the notebooks' setup cell its ``pip install`` source
(tools/setup_cell.py), so that a notebook opened in Colab installs ``attnlib`` from
the repository it was opened from. This module imports nothing from Sphinx at
module level: the tool imports it without Sphinx.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ENV_REPOSITORY = "COURSE_REPOSITORY"
ENV_JUPYTERHUB = "COURSE_JUPYTERHUB"
ENV_BRANCH = "COURSE_BRANCH"

# The theme's switches for the buttons that need a repository.
REPOSITORY_BUTTONS = ("use_repository_button", "use_issues_button", "use_edit_page_button")
# launch_buttons keys naming a service that opens the repository's notebooks.
LAUNCH_SERVICES = ("binderhub_url", "colab_url", "jupyterhub_url", "deepnote_url", "jupyterlite_url")

_NAME = r"[A-Za-z0-9_.-]+"
_GITHUB_FORMS = (
    re.compile(rf"^https://github\.com/(?P<org>{_NAME})/(?P<repo>{_NAME}?)(?:\.git)?/?$"),
    re.compile(rf"^(?:ssh://)?git@github\.com[:/](?P<org>{_NAME})/(?P<repo>{_NAME}?)(?:\.git)?/?$"),
)


class RepositoryError(ValueError):
    """A repository or hub URL that the launch buttons cannot use."""


def github_url(url: str) -> str | None:
    """``https://github.com/<org>/<repo>`` for a GitHub repository URL in any common form, else None.

    Accepted: ``https://github.com/org/repo``, with ``.git`` or a trailing slash,
    ``git@github.com:org/repo.git`` and ``ssh://git@github.com/org/repo.git``.
    """
    url = url.strip()
    for form in _GITHUB_FORMS:
        match = form.match(url)
        if match and match["org"] not in {".", ".."} and match["repo"] not in {"", ".", ".."}:
            return f"https://github.com/{match['org']}/{match['repo']}"
    return None


def git_origin(root: Path) -> str | None:
    """The URL of the git remote ``origin`` of the checkout at ``root``; None without one."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "config", "--get", "remote.origin.url"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


@dataclass(frozen=True)
class CourseRepository:
    """Where the course lives: its GitHub URL (None when unknown), branch and JupyterHub."""

    url: str | None
    branch: str
    source: str  # where the URL came from, said in the build's log
    jupyterhub: str | None = None

    @property
    def org_and_name(self) -> tuple[str, str] | None:
        if self.url is None:
            return None
        org, name = urlsplit(self.url).path.strip("/").split("/")
        return org, name

    @property
    def pip_source(self) -> str | None:
        """What ``pip install`` takes to install attnlib from this repository and branch."""
        return None if self.url is None else f"git+{self.url}.git@{self.branch}"


def hub_url(value: str) -> str:
    """A JupyterHub's base URL (``https://hub.example.edu``) without a trailing slash."""
    value = value.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in {"https", "http"} or not parts.netloc or parts.query or parts.fragment:
        raise RepositoryError(
            f"{ENV_JUPYTERHUB} must be a hub's address like https://hub.example.edu, not {value!r}"
        )
    if parts.path.endswith("/hub") or "/hub/" in parts.path:
        raise RepositoryError(
            f"{ENV_JUPYTERHUB} is the hub's base address (https://hub.example.edu), without /hub: {value!r}"
        )
    return value


def find_repository(
    root: Path, branch: str = "main", environ: Mapping[str, str] | None = None
) -> CourseRepository:
    """The course's repository for a checkout at ``root``: ``COURSE_REPOSITORY``, else a GitHub ``origin``.

    ``branch`` is ``repository.branch`` of ``_config.yml`` (``COURSE_BRANCH`` overrides it).
    Raises RepositoryError when ``COURSE_REPOSITORY`` or ``COURSE_JUPYTERHUB`` is set to
    something the buttons cannot use (a typo should fail the build, not publish dead links).
    """
    environ = os.environ if environ is None else environ
    branch = environ.get(ENV_BRANCH, "").strip() or branch
    hub = environ.get(ENV_JUPYTERHUB, "").strip()
    hub = hub_url(hub) if hub else None
    given = environ.get(ENV_REPOSITORY, "").strip()
    if given.lower() == "none":  # a site without the buttons, even from a GitHub checkout
        return CourseRepository(None, branch, f"{ENV_REPOSITORY}=none", hub)
    if given:
        url = github_url(given)
        if url is None:
            raise RepositoryError(
                f"{ENV_REPOSITORY} must be a GitHub repository URL like https://github.com/org/repo "
                f"(Colab and Binder's links need one), not {given!r}"
            )
        return CourseRepository(url, branch, ENV_REPOSITORY, hub)
    origin = git_origin(root)
    url = github_url(origin) if origin else None
    if url is not None:
        return CourseRepository(url, branch, "git remote origin", hub)
    why = f"the git remote origin {origin!r} is not on GitHub" if origin else "no git remote origin"
    return CourseRepository(None, branch, f"unknown ({ENV_REPOSITORY} unset, {why})", hub)


def theme_options_for(options: Mapping, repository: CourseRepository) -> dict:
    """``html_theme_options`` with the repository and launch buttons set for ``repository``.

    Without a repository URL, no repository button and no launch service remain (the
    theme would build links to nowhere). The JupyterHub button needs both the repository
    and a hub.
    """
    options = dict(options)
    launch = dict(options.get("launch_buttons") or {})
    launch.pop("jupyterhub_url", None)  # only ever from COURSE_JUPYTERHUB
    if repository.url is None:
        for key in ("repository_url", "repository_branch"):
            options.pop(key, None)
        for key in REPOSITORY_BUTTONS:
            options[key] = False
        for key in LAUNCH_SERVICES:
            launch.pop(key, None)
        launch["thebe"] = False
    else:
        options["repository_url"] = repository.url
        options["repository_branch"] = repository.branch
        for key in REPOSITORY_BUTTONS:
            options[key] = True
        if repository.jupyterhub:
            launch["jupyterhub_url"] = repository.jupyterhub
    options["launch_buttons"] = launch
    return options


# --- Sphinx -------------------------------------------------------------------------------------


def _configure(app, config) -> None:
    from sphinx.errors import ConfigError
    from sphinx.util import logging

    options = config.html_theme_options or {}
    branch = str(options.get("repository_branch") or "main")
    try:
        repository = find_repository(Path(app.confdir), branch)
    except RepositoryError as error:
        raise ConfigError(str(error)) from None
    config.html_theme_options = theme_options_for(options, repository)
    config.course_repository = repository.url or ""
    if repository.url is None:
        message = f"course_repository: {repository.source}: no repository, issue, edit or launch buttons"
    else:
        hub = repository.jupyterhub or f"none ({ENV_JUPYTERHUB} unset)"
        message = (
            f"course_repository: {repository.url} (from {repository.source}), "
            f"branch {repository.branch}; JupyterHub: {hub}"
        )
    logging.getLogger(__name__).info(message)


def setup(app) -> dict:
    app.add_config_value("course_repository", "", "html")
    # Before the theme reads its options (builder-inited), after Jupyter Book wrote them.
    app.connect("config-inited", _configure, priority=100)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
