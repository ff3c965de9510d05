"""Every chapter page links its exercise notebook: a download, and Binder, Colab and JupyterHub launches.

A chapter ``book/NN-slug`` whose exercise notebook ``exercises/NN-slug.ipynb`` exists gets,
right after its title, a box "Exercises for this chapter" with

* a download of the notebook (copied into the site as ``_exercises/NN-slug.ipynb``) and of
  the learner's attnlib wheel that its setup cell names (book/_ext/course_wheel.py), with
  where the notebook's first cell installs attnlib from. A site with neither the
  course's repository nor its own address (``course_downloads`` of course_wheel.py is
  ``beside``) offers notebooks that cannot install attnlib by themselves: the box then
  tells the reader, in a paragraph of its own, to save the wheel beside the notebook
  before running it;
* when the course's repository is known (book/_ext/course_repository.py), links that open
  ``exercises/NN-slug.ipynb`` in Binder and in Colab, and in the JupyterHub named by
  ``COURSE_JUPYTERHUB`` (an nbgitpuller link), built the same way as the theme's launch
  buttons for the chapter itself.

tests/site/test_launch.py and tests/site/test_links.py check the links.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import quote, urlencode

CHAPTER = re.compile(r"^book/(?P<stem>\d\d-[a-z0-9-]+)$")
SITE_FOLDER = "_exercises"


def exercise_links(
    stem: str, repository_url: str | None, branch: str, hub: str | None, services: dict
) -> list:
    """``[(label, url), ...]`` for launching ``exercises/<stem>.ipynb`` (empty without a repository)."""
    if not repository_url:
        return []
    org, name = repository_url.rstrip("/").split("/")[-2:]
    path = f"exercises/{stem}.ipynb"
    links = []
    binder = (services.get("binderhub_url") or "").rstrip("/")
    if binder:
        links.append(("Binder", f"{binder}/v2/gh/{org}/{name}/{branch}?urlpath={quote('lab/tree/' + path)}"))
    colab = (services.get("colab_url") or "").rstrip("/")
    if colab:
        links.append(("Colab", f"{colab}/github/{org}/{name}/blob/{branch}/{path}"))
    if hub:
        query = urlencode({"repo": repository_url, "urlpath": f"lab/tree/{name}/{path}", "branch": branch})
        links.append(("JupyterHub", f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"))
    return links


def _wheel_name(app) -> str:
    """The learner's wheel that book/_ext/course_wheel.py puts into the site's ``_static/``."""
    from course_wheel import wheel_filename

    return wheel_filename(Path(app.confdir))


def exercise_box(stem: str, links: list, wheel_name: str, downloads: str):
    """The box "Exercises for this chapter" (a docutils admonition) for ``exercises/<stem>.ipynb``.

    ``links`` are exercise_links(); ``downloads`` is where the site's notebooks install
    attnlib from (``repository``, ``site`` or ``beside``: course_wheel.py's ``course_downloads``).
    """
    from docutils import nodes

    box = nodes.admonition(classes=["course-exercises", "tip"])
    box += nodes.title(text="Exercises for this chapter")
    para = nodes.paragraph()
    para += nodes.Text("The exercise notebook ")
    para += nodes.literal(text=f"exercises/{stem}.ipynb")
    para += nodes.Text(" checks each answer as you go: ")
    para += nodes.reference(
        "", "download it", refuri=f"../{SITE_FOLDER}/{stem}.ipynb", classes=["course-download"]
    )
    for label, url in links:
        para += nodes.Text(", open it in ")
        para += nodes.reference("", label, refuri=url, classes=["course-launch"])
    wheel = nodes.reference(
        "", "the attnlib wheel", refuri=f"../_static/{wheel_name}", classes=["course-wheel"]
    )
    box += para
    if downloads == "beside":
        # The downloaded notebook's setup cell stops until this file is beside it: say so first.
        para += nodes.Text(".")
        first = nodes.paragraph(classes=["course-wheel-first"])
        first += nodes.strong(text="Before you run it where attnlib is missing")
        first += nodes.Text(" (Colab, a Jupyter without the course): download ")
        first += wheel
        first += nodes.Text(" (")
        first += nodes.literal(text=wheel_name)
        first += nodes.Text(") and save it beside the notebook, in the same folder (in Colab, upload it to ")
        first += nodes.literal(text="/content")
        first += nodes.Text(
            "). This website has no address that a notebook could install attnlib from, so "
            "the notebook's first cell installs the wheel it finds there and stops without it."
        )
        box += first
    else:
        where = "the course's repository" if downloads == "repository" else "this website"
        para += nodes.Text(f". Where attnlib is missing (Colab), its first cell installs it from {where}; ")
        para += wheel
        para += nodes.Text(" is the same package, to install offline.")
    return box


def _add_box(app, doctree) -> None:
    from docutils import nodes

    docname = app.env.docname
    match = CHAPTER.match(docname)
    if not match:
        return
    stem = match["stem"]
    if not (Path(app.confdir) / "exercises" / f"{stem}.ipynb").is_file():
        return
    options = app.config.html_theme_options or {}
    links = exercise_links(
        stem,
        options.get("repository_url"),
        str(options.get("repository_branch") or "main"),
        (options.get("launch_buttons") or {}).get("jupyterhub_url"),
        options.get("launch_buttons") or {},
    )
    # Where the downloads install attnlib from (course_wheel.py; without it, the wheel beside them).
    downloads = getattr(app.config, "course_downloads", "beside")
    box = exercise_box(stem, links, _wheel_name(app), downloads)
    sections = [n for n in doctree.findall(nodes.section)]
    if sections:
        first = sections[0]
        title_index = next(
            (i for i, child in enumerate(first.children) if isinstance(child, nodes.title)), -1
        )
        first.insert(title_index + 1, box)
    else:
        doctree += box


def _copy_notebooks(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / SITE_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for notebook in sorted((Path(app.confdir) / "exercises").glob("[0-9][0-9]-*.ipynb")):
        shutil.copy2(notebook, target / notebook.name)


def setup(app) -> dict:
    app.connect("doctree-read", _add_box)
    app.connect("build-finished", _copy_notebooks)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
