"""Launch buttons (Binder, Colab, JupyterHub), repository buttons and downloads point to real files.

The repository is found at build time (book/_ext/course_repository.py): from
``COURSE_REPOSITORY``, else from a GitHub git remote ``origin``; the JupyterHub
button needs ``COURSE_JUPYTERHUB`` too. Checked here:

* the rule itself (URL forms, precedence, what a typo does), without Sphinx;
* the whole book built with its notebooks unexecuted (about 20 s), once for an
  example repository and hub: every page's repository, issue and edit links and
  every notebook page's Binder, Colab and JupyterHub links name a file that git
  tracks in this repository; once with neither variable and no git remote: no
  such button anywhere, the download buttons stay;
* the strictly built site of the test session (``built_book``): its buttons are
  those of the repository that this environment gives, or none;
* the notebooks' setup cell installs attnlib from the same repository (Colab)
  and says what to do when none is known; Binder's environment.
"""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from helpers_setup_cell import run_setup_cell
from helpers_site import (
    EXAMPLE_REPOSITORY,
    branch_of,
    build_unexecuted,
    config,
    notebook_entries,
    toc_entries,
)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_repository  # noqa: E402
from course_repository import CourseRepository, RepositoryError, find_repository, github_url  # noqa: E402

sys.path.pop(0)

EXAMPLE_HUB = "https://hub.example.edu"
# Every kind of link that needs the repository; "download" does not.
REPOSITORY_KINDS = ("binder", "colab", "jupyterhub", "edit", "issues", "repository")


@cache
def tracked_files(root: Path = ROOT) -> frozenset[str]:
    """The paths git tracks in ``root`` (every file under it outside a checkout)."""
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        return frozenset(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return frozenset(filter(None, proc.stdout.split("\0")))


def page_source(root: Path, entry: str) -> str:
    """The repository path of a toc entry's source (``book/05-masks.ipynb``)."""
    for suffix in (".ipynb", ".md"):
        if (root / f"{entry}{suffix}").is_file():
            return f"{entry}{suffix}"
    raise AssertionError(f"{entry}: no .ipynb or .md source")


def launch_links(page_html: str, repository_url: str | None = None) -> dict[str, str]:
    """The header's launch, download and repository links of one built page, by kind."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page_html, "html.parser")
    links = {}
    for a in soup.select(".article-header-buttons a[href], .header-article a[href], a.btn[href]"):
        href = a["href"]
        text = a.get_text(" ", strip=True)
        label = " ".join(filter(None, (a.get("title"), a.get("data-bs-title"), a.get("aria-label"))))
        if "mybinder.org" in href or text == "Binder":
            links["binder"] = href
        elif "colab.research.google.com" in href or text == "Colab":
            links["colab"] = href
        elif "/hub/user-redirect/git-pull" in href or text == "JupyterHub":
            links["jupyterhub"] = href
        elif "/edit/" in href:
            links["edit"] = href
        elif "/issues/new" in href:
            links["issues"] = href
        elif "_sources/" in href and href.endswith(".ipynb"):
            links["download"] = href
        elif text == "Repository" or "Source repository" in label or href == repository_url:
            links["repository"] = href
    return links


def check_links(html: Path, root: Path, repository: CourseRepository) -> int:
    """Assert that every page's buttons fit ``repository`` (or that there are none); return the link count."""
    tracked = tracked_files(root)
    notebooks = set(notebook_entries(root))
    checked = 0
    for entry in toc_entries(root):
        page = html / f"{entry}.html"
        text = page.read_text(encoding="utf-8")
        links = launch_links(text, repository.url)
        if entry in notebooks:
            assert "download" in links, f"{entry}: no .ipynb download button (found {sorted(links)})"
            download = (page.parent / unquote(links["download"])).resolve()
            assert download.is_file(), f"{entry}: the .ipynb download {links['download']} is not in the site"
        if repository.url is None:
            found = sorted(kind for kind in REPOSITORY_KINDS if kind in links)
            assert not found, f"{entry}: no repository is known, yet the page has {found}: {links}"
            assert "fa-rocket" not in text and "fa-github" not in text, f"{entry}: a launch or GitHub button"
            continue
        org, name = repository.org_and_name
        branch = repository.branch
        want = {"edit", "issues", "repository"}
        if entry in notebooks:
            want |= {"binder", "colab"} | ({"jupyterhub"} if repository.jupyterhub else set())
        assert want <= set(links), f"{entry}: missing {sorted(want - set(links))} (found {sorted(links)})"
        if not repository.jupyterhub:
            assert "jupyterhub" not in links, f"{entry}: a JupyterHub button without COURSE_JUPYTERHUB"
        source = page_source(root, entry)
        assert source in tracked, f"{entry}: its source {source} is not tracked by git"

        assert links["repository"].rstrip("/") == repository.url, links["repository"]
        issues = urlsplit(links["issues"])
        assert f"{issues.scheme}://{issues.netloc}{issues.path}" == f"{repository.url}/issues/new"
        edit = urlsplit(links["edit"])
        assert (edit.netloc, edit.path) == ("github.com", f"/{org}/{name}/edit/{branch}/{source}"), links[
            "edit"
        ]
        checked += 3
        if entry not in notebooks:
            assert not {"binder", "colab", "jupyterhub"} & set(links), f"{entry}: launch buttons on a page"
            continue

        colab = urlsplit(links["colab"])
        assert colab.netloc == "colab.research.google.com", links["colab"]
        assert colab.path == f"/github/{org}/{name}/blob/{branch}/{source}", links["colab"]

        binder = urlsplit(links["binder"])
        assert (binder.netloc, binder.path) == ("mybinder.org", f"/v2/gh/{org}/{name}/{branch}"), links[
            "binder"
        ]
        urlpath = parse_qs(binder.query)["urlpath"][0]
        assert urlpath == f"lab/tree/{source}", f"{entry}: Binder opens {urlpath}"
        checked += 2

        if repository.jupyterhub:
            hub = urlsplit(links["jupyterhub"])
            assert f"{hub.scheme}://{hub.netloc}" == repository.jupyterhub, links["jupyterhub"]
            assert hub.path == "/hub/user-redirect/git-pull", links["jupyterhub"]
            query = parse_qs(hub.query)
            assert query["repo"] == [repository.url] and query["branch"] == [branch], query
            # nbgitpuller clones into a folder named after the repository.
            assert query["urlpath"] == [f"lab/tree/{name}/{source}"], query["urlpath"]
            checked += 1
    return checked


def _without_setup_cell(path: Path) -> str:
    """The notebook at ``path`` without its setup cell (tools/setup_cell.py), as text."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if "setup" not in c.get("metadata", {}).get("tags", [])]
    return nbformat.writes(nb)


def check_exercise_links(html: Path, root: Path, repository: CourseRepository) -> int:
    """Every chapter page links its exercise notebook: a download in the site, and launches of exercises/."""
    from bs4 import BeautifulSoup

    checked = 0
    for entry in notebook_entries(root):
        stem = Path(entry).name
        if not (root / "exercises" / f"{stem}.ipynb").is_file():
            continue
        soup = BeautifulSoup((html / f"{entry}.html").read_text(encoding="utf-8"), "html.parser")
        box = soup.select_one(".course-exercises")
        assert box is not None, f"{entry}: no 'Exercises for this chapter' box"
        download = box.select_one("a.course-download")
        assert download is not None, f"{entry}: the exercises box has no download link"
        target = (html / entry).parent / unquote(download["href"])
        assert target.resolve().is_file(), f"{entry}: {download['href']} is not in the site"
        # The site's copy is the exercise notebook; only its setup cell is the site's (course_wheel.py).
        assert _without_setup_cell(target) == _without_setup_cell(root / "exercises" / f"{stem}.ipynb")
        launches = {a.get_text(strip=True): a["href"] for a in box.select("a.course-launch")}
        checked += 1
        if repository.url is None:
            assert not launches, f"{entry}: launch links without a repository: {launches}"
            continue
        org, name = repository.org_and_name
        source = f"exercises/{stem}.ipynb"
        assert source in tracked_files(root), f"{source} is not tracked by git"
        colab = urlsplit(launches["Colab"])
        assert colab.path == f"/github/{org}/{name}/blob/{repository.branch}/{source}", launches["Colab"]
        binder = urlsplit(launches["Binder"])
        assert binder.path == f"/v2/gh/{org}/{name}/{repository.branch}", launches["Binder"]
        assert parse_qs(binder.query)["urlpath"] == [f"lab/tree/{source}"], launches["Binder"]
        if repository.jupyterhub:
            query = parse_qs(urlsplit(launches["JupyterHub"]).query)
            assert query["urlpath"] == [f"lab/tree/{name}/{source}"], launches["JupyterHub"]
        else:
            assert "JupyterHub" not in launches
        checked += 2
    return checked


# --- the rule: where the repository comes from ------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        "https://github.com/example/attention-course",
        "https://github.com/example/attention-course/",
        "https://github.com/example/attention-course.git",
        "git@github.com:example/attention-course.git",
        "ssh://git@github.com/example/attention-course.git",
    ],
)
def test_github_urls_in_every_common_form_name_one_repository(given):
    assert github_url(given) == EXAMPLE_REPOSITORY


@pytest.mark.parametrize(
    "given",
    [
        "https://gitlab.com/example/attention-course",
        "http://github.com/example/attention-course",
        "https://github.com/example",
        "https://github.com/example/attention-course/tree/main",
        "github.com/example/attention-course",
        "/home/me/attention-course",
        "",
    ],
)
def test_other_urls_are_not_a_github_repository(given):
    assert github_url(given) is None


def _git_checkout(folder: Path, origin: str | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", origin], check=True)
    return folder


def test_the_environment_comes_before_the_git_remote(tmp_path):
    checkout = _git_checkout(tmp_path / "course", "git@github.com:someone/fork.git")
    from_remote = find_repository(checkout, "main", environ={})
    assert from_remote.url == "https://github.com/someone/fork" and from_remote.source == "git remote origin"
    assert from_remote.pip_source == "git+https://github.com/someone/fork.git@main"
    given = find_repository(checkout, "main", environ={"COURSE_REPOSITORY": EXAMPLE_REPOSITORY + ".git"})
    assert given.url == EXAMPLE_REPOSITORY and given.source == "COURSE_REPOSITORY"
    assert find_repository(checkout, "main", environ={"COURSE_REPOSITORY": "none"}).url is None
    branch = find_repository(checkout, "main", environ={"COURSE_BRANCH": "spring-2027"})
    assert branch.branch == "spring-2027" and branch.pip_source.endswith(".git@spring-2027")


@pytest.mark.parametrize("origin", [None, "https://gitlab.com/someone/fork.git", "/srv/git/course.git"])
def test_no_repository_without_a_github_remote(tmp_path, origin):
    checkout = _git_checkout(tmp_path / "course", origin)
    found = find_repository(checkout, "main", environ={"COURSE_JUPYTERHUB": EXAMPLE_HUB})
    assert found.url is None and found.pip_source is None and found.org_and_name is None
    assert ("no git remote origin" if origin is None else "not on GitHub") in found.source
    outside = find_repository(tmp_path / "not-a-checkout", "main", environ={})
    assert outside.url is None


@pytest.mark.parametrize(
    "environ, named",
    [
        ({"COURSE_REPOSITORY": "https://gitlab.com/example/attention-course"}, "COURSE_REPOSITORY"),
        ({"COURSE_REPOSITORY": "example/attention-course"}, "COURSE_REPOSITORY"),
        ({"COURSE_JUPYTERHUB": "hub.example.edu"}, "COURSE_JUPYTERHUB"),
        ({"COURSE_JUPYTERHUB": "https://hub.example.edu/hub/"}, "without /hub"),
        ({"COURSE_JUPYTERHUB": "https://hub.example.edu/?next=x"}, "COURSE_JUPYTERHUB"),
    ],
)
def test_a_mistyped_variable_fails_the_build_instead_of_publishing_dead_links(tmp_path, environ, named):
    with pytest.raises(RepositoryError, match=named):
        find_repository(tmp_path, "main", environ=environ)


def test_theme_options_switch_every_button_with_the_repository():
    options = {
        "repository_url": "https://github.com/stale/placeholder",
        "use_repository_button": True,
        "launch_buttons": {
            "notebook_interface": "jupyterlab",
            "binderhub_url": "https://mybinder.org",
            "colab_url": "https://colab.research.google.com",
            "jupyterhub_url": "https://stale.example.org",
            "thebe": False,
        },
    }
    unknown = course_repository.theme_options_for(options, CourseRepository(None, "main", "unknown"))
    assert "repository_url" not in unknown
    assert not any(unknown[key] for key in course_repository.REPOSITORY_BUTTONS)
    assert not any(unknown["launch_buttons"].get(key) for key in course_repository.LAUNCH_SERVICES)

    no_hub = course_repository.theme_options_for(options, CourseRepository(EXAMPLE_REPOSITORY, "dev", "test"))
    assert no_hub["repository_url"] == EXAMPLE_REPOSITORY and no_hub["repository_branch"] == "dev"
    assert all(no_hub[key] for key in course_repository.REPOSITORY_BUTTONS)
    assert "jupyterhub_url" not in no_hub["launch_buttons"], "the hub comes only from COURSE_JUPYTERHUB"
    assert no_hub["launch_buttons"]["colab_url"] == "https://colab.research.google.com"

    hub = CourseRepository(EXAMPLE_REPOSITORY, "main", "test", jupyterhub=EXAMPLE_HUB)
    assert (
        course_repository.theme_options_for(options, hub)["launch_buttons"]["jupyterhub_url"] == EXAMPLE_HUB
    )
    assert options["launch_buttons"]["jupyterhub_url"] == "https://stale.example.org", (
        "the input is not changed"
    )


def test_config_names_no_repository_url():
    """The URL lives in one place: the environment or the git remote, never _config.yml."""
    cfg = config()
    assert "url" not in (cfg.get("repository") or {}), "_config.yml must not name the repository"
    assert "jupyterhub_url" not in (cfg.get("launch_buttons") or {}), "the hub comes from COURSE_JUPYTERHUB"
    assert "course_repository" in cfg["sphinx"]["local_extensions"]


# --- the built pages ----------------------------------------------------------------------------


@pytest.mark.book
@pytest.mark.slow
def test_buttons_for_a_given_repository_and_hub_point_at_tracked_files(tmp_path):
    environ = {"COURSE_REPOSITORY": EXAMPLE_REPOSITORY, "COURSE_JUPYTERHUB": EXAMPLE_HUB + "/"}
    html, log = build_unexecuted(tmp_path / "site", environ)
    repository = find_repository(ROOT, branch_of(), environ=environ)
    assert f"course_repository: {EXAMPLE_REPOSITORY} (from COURSE_REPOSITORY)" in log
    checked = check_links(html, ROOT, repository)
    pages, notebooks = len(toc_entries()), len(notebook_entries())
    assert checked == 3 * pages + 3 * notebooks, f"{checked} links checked on {pages} pages"
    chapters = [e for e in notebook_entries() if (ROOT / "exercises" / f"{Path(e).name}.ipynb").is_file()]
    assert check_exercise_links(html, ROOT, repository) == 3 * len(chapters)


@pytest.mark.book
@pytest.mark.slow
def test_without_a_repository_the_site_has_no_repository_or_launch_buttons(tmp_path):
    # No repository variable, and git finds no checkout (so no remote): nothing is known. No
    # address either, said so (else course_wheel warns: the downloads cannot install attnlib).
    environ = {"GIT_DIR": str(tmp_path / "no-checkout"), "COURSE_SITE_URL": "none"}
    html, log = build_unexecuted(tmp_path / "site", environ)
    assert "course_repository: unknown" in log
    check_links(html, ROOT, CourseRepository(None, branch_of(), "unknown"))
    assert check_exercise_links(html, ROOT, CourseRepository(None, branch_of(), "unknown")) >= 10


@pytest.mark.book
def test_the_built_site_has_the_buttons_of_its_repository(built_book, repo_root):
    """The session's strictly built, executed site: the repository this environment gives, or none."""
    html, log = built_book
    repository = find_repository(repo_root, branch_of(repo_root))
    check_links(html, repo_root, repository)


# --- what the launched environments install --------------------------------------------------


def test_binder_installs_cpu_torch_and_attnlib(repo_root):
    binder = repo_root / "binder"
    requirements = (binder / "requirements.txt").read_text(encoding="utf-8")
    assert "download.pytorch.org/whl/cpu" in requirements, "Binder must use the CPU-only torch wheels"
    pinned = {
        line.split("==")[0].strip().lower(): line.strip()
        for line in requirements.splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    root_pins = {
        line.split("==")[0].strip().lower(): line.strip()
        for line in (repo_root / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.lstrip().startswith("#")
    }
    assert "torch" in pinned, "binder/requirements.txt must pin torch"
    for package in ("torch", "numpy", "matplotlib", "ipywidgets"):
        if package in pinned and package in root_pins:
            assert pinned[package].split("+")[0] == root_pins[package], (
                f"binder/requirements.txt pins {pinned[package]}, requirements.txt {root_pins[package]}"
            )
    post_build = (binder / "postBuild").read_text(encoding="utf-8")
    assert "pip install" in post_build and "-e ." in post_build, "binder/postBuild must install attnlib"
    assert post_build.startswith("#!"), "binder/postBuild needs a shebang (Binder runs it as a script)"


def test_every_notebook_installs_attnlib_when_missing(repo_root):
    """Colab and JupyterHub start without attnlib: each notebook's first code cell installs it.

    The cell must name the repository that the site links to in this environment
    (run ``tools/setup_cell.py`` after setting ``COURSE_REPOSITORY``).
    """
    proc = subprocess.run(
        [sys.executable, str(repo_root / "tools" / "setup_cell.py"), "--check"],
        cwd=repo_root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _setup_cell_module(repo_root: Path):
    sys.path.insert(0, str(repo_root / "tools"))
    try:
        import setup_cell
    finally:
        sys.path.pop(0)
    return setup_cell


def test_setup_cell_is_the_first_code_cell_and_idempotent(repo_root):
    import nbformat

    setup_cell = _setup_cell_module(repo_root)
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Title"),
            nbformat.v4.new_code_cell("import attnlib"),
        ]
    )
    source = setup_cell.setup_source(repo_root)
    assert setup_cell.apply(nb, source) is True
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert setup_cell.is_setup_cell(nb.cells[1]) and "nbval-ignore-output" in nb.cells[1].metadata.tags
    assert setup_cell.apply(nb, source) is False, "a second run must change nothing"
    assert len(nb.cells) == 3
    assert 'find_spec("attnlib") is None' in source
    assert all(len(line) <= 80 for line in source.splitlines()), "the cell fits the notebooks' 80 columns"
    nbformat.validate(nb)
    compile(source, "setup-cell", "exec")


def test_setup_cell_installs_from_the_sites_repository_or_says_what_to_do(repo_root, tmp_path, monkeypatch):
    setup_cell = _setup_cell_module(repo_root)
    colab = tmp_path / "content"  # Colab's working folder: no checkout around it
    checkout = tmp_path / "course"
    for folder in (colab, checkout / "book", checkout / "attnlib"):
        folder.mkdir(parents=True)
    (checkout / "attnlib" / "__init__.py").write_text("", encoding="utf-8")

    known = setup_cell.setup_source(repo_root, CourseRepository(EXAMPLE_REPOSITORY, "main", "test"))
    (pip,) = run_setup_cell(known, colab, monkeypatch)
    assert pip[1:] == ["-m", "pip", "install", "--quiet", f"git+{EXAMPLE_REPOSITORY}.git@main"], pip
    (pip,) = run_setup_cell(known, checkout / "book", monkeypatch)  # a JupyterHub's nbgitpuller clone
    assert pip[-1] == str(checkout), pip

    # No repository known (issue 38.4): nothing is fetched from a guessed address, and no
    # placeholder: the wheel beside the notebook (the site's download), else one line saying so.
    unknown = setup_cell.setup_source(repo_root, CourseRepository(None, "main", "unknown"))
    wheel = setup_cell.wheel_filename(repo_root)
    assert "<org>" not in unknown and "git+" not in unknown, unknown
    with pytest.raises(ModuleNotFoundError, match=f"download {wheel} .*%pip install {wheel}$") as stopped:
        run_setup_cell(unknown, colab, monkeypatch)
    assert "\n" not in str(stopped.value), "one line"
    (colab / wheel).write_bytes(b"")  # saved beside the notebook (Colab: uploaded to /content)
    (pip,) = run_setup_cell(unknown, colab, monkeypatch)
    assert pip[-1] == str(colab / wheel), pip
    (pip,) = run_setup_cell(unknown, checkout / "book", monkeypatch)
    assert pip[-1] == str(checkout), pip
