"""Launch buttons (Binder, Colab, JupyterHub), downloads and repository buttons point to real files.

The built pages are read (the ``built_book`` fixture); every page of ``_toc.yml``
that is a notebook must offer Binder, Colab and JupyterHub, and each link must
name a file that exists in this repository on the configured branch. The Binder
configuration and the notebooks' attnlib setup cell (tools/setup_cell.py) are
checked here too, since the launch buttons are useless without them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def toc_entries(root: Path = ROOT) -> list[str]:
    """Every file of _toc.yml (root, parts, chapters and nested sections), in order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    found = [toc["root"]]

    def walk(items):
        for item in items or []:
            if "file" in item:
                found.append(item["file"])
            walk(item.get("sections"))
            walk(item.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    walk(toc.get("sections"))
    return [str(Path(f).with_suffix("")) if Path(f).suffix in {".md", ".ipynb"} else f for f in found]


def config(root: Path = ROOT) -> dict:
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def repo_parts(root: Path = ROOT) -> tuple[str, str, str]:
    repo = config(root)["repository"]
    org, name = urlsplit(repo["url"]).path.strip("/").removesuffix(".git").split("/")[:2]
    return org, name, repo.get("branch", "main")


def notebook_entries(root: Path = ROOT) -> list[str]:
    """The toc entries stored as .ipynb: the pages that must have launch buttons."""
    return [e for e in toc_entries(root) if (root / f"{e}.ipynb").is_file()]


def tracked(root: Path, relpath: str) -> bool:
    """True when ``relpath`` is in git's index (falls back to existence outside a checkout)."""
    proc = subprocess.run(
        ["git", "ls-files", "--error-unmatch", relpath], cwd=root, capture_output=True, text=True
    )
    if proc.returncode == 128 and "not a git repository" in proc.stderr:
        return (root / relpath).is_file()
    return proc.returncode == 0 or (root / relpath).is_file()


def launch_links(page_html: str) -> dict[str, str]:
    """The header's launch, download and repository links of one built page, by button text."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page_html, "html.parser")
    links = {}
    for a in soup.select("a[href]"):
        href = a["href"]
        text = a.get_text(" ", strip=True)
        if "mybinder.org" in href or text == "Binder":
            links["binder"] = href
        elif "colab.research.google.com" in href or text == "Colab":
            links["colab"] = href
        elif "/hub/user-redirect/git-pull" in href:
            links["jupyterhub"] = href
        elif "/edit/" in href and "github.com" in href:
            links["edit"] = href
        elif "/issues/new" in href:
            links["issues"] = href
        elif "_sources/" in href and href.endswith(".ipynb"):
            links["download"] = href
    return links


# --- the site ---------------------------------------------------------------------------------


@pytest.mark.book
def test_every_notebook_page_has_launch_buttons_to_existing_files(built_book, repo_root):
    html, _ = built_book
    org, name, branch = repo_parts(repo_root)
    entries = notebook_entries(repo_root)
    assert entries, "no notebook pages in _toc.yml"
    for entry in entries:
        page = html / f"{entry}.html"
        links = launch_links(page.read_text(encoding="utf-8"))
        for kind in ("binder", "colab", "jupyterhub", "download", "edit", "issues"):
            assert kind in links, f"{entry}: no {kind} button on the built page (found {sorted(links)})"
        want = f"{entry}.ipynb"
        assert tracked(repo_root, want), f"{want} is not in the repository"

        colab = urlsplit(links["colab"])
        assert colab.path == f"/github/{org}/{name}/blob/{branch}/{want}", links["colab"]

        binder = urlsplit(links["binder"])
        assert binder.path == f"/v2/gh/{org}/{name}/{branch}", links["binder"]
        urlpath = parse_qs(binder.query)["urlpath"][0]
        assert urlpath.split("/tree/", 1)[-1] == want, f"{entry}: Binder opens {urlpath}"

        hub = parse_qs(urlsplit(links["jupyterhub"]).query)
        assert hub["branch"] == [branch] and hub["repo"][0].rstrip("/").endswith(f"{org}/{name}")
        # nbgitpuller clones into a folder named after the repository.
        assert hub["urlpath"][0].split("/tree/", 1)[-1] == f"{name}/{want}", hub["urlpath"]

        edit = urlsplit(links["edit"]).path
        assert edit == f"/{org}/{name}/edit/{branch}/{want}", links["edit"]

        download = (page.parent / unquote(links["download"])).resolve()
        assert download.is_file(), f"{entry}: the .ipynb download {links['download']} is not in the site"


@pytest.mark.book
def test_markdown_pages_offer_no_colab_link_to_a_missing_notebook(built_book, repo_root):
    """Colab opens only .ipynb files: a MyST page without a paired notebook gets no Colab button."""
    html, _ = built_book
    for entry in toc_entries(repo_root):
        links = launch_links((html / f"{entry}.html").read_text(encoding="utf-8"))
        if "colab" in links:
            target = urlsplit(links["colab"]).path.split("/blob/", 1)[1].split("/", 1)[1]
            assert target.endswith(".ipynb") and (repo_root / target).is_file(), f"{entry}: {links['colab']}"


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
    """Colab and JupyterHub start without attnlib: each notebook's first code cell installs it."""
    proc = subprocess.run(
        [sys.executable, str(repo_root / "tools" / "setup_cell.py"), "--check"],
        cwd=repo_root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_setup_cell_is_the_first_code_cell_and_idempotent(repo_root, tmp_path):
    import nbformat

    sys.path.insert(0, str(repo_root / "tools"))
    try:
        import setup_cell
    finally:
        sys.path.pop(0)
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
    url = config(repo_root)["repository"]["url"]
    assert f"git+{url}" in source and 'find_spec("attnlib") is None' in source
    nbformat.validate(nb)
    compile(source, "setup-cell", "exec")
