"""Render the book's math without an internet connection when a local MathJax exists.

Sphinx config value ``course_mathjax`` (set in ``_config.yml``), overridden by the
environment variable ``COURSE_MATHJAX``:

* ``auto`` (default): use Debian's ``libjs-mathjax`` (``/usr/share/javascript/mathjax``,
  or the folder named by ``COURSE_MATHJAX_DIR``) when it is installed, else keep
  ``mathjax_path`` (the CDN), so that a machine without the package still builds;
* ``local``: the same, but fail the build when no local MathJax is found;
* ``cdn``: always keep ``mathjax_path`` (what the published site uses).

The local copy is the part of MathJax that the pages need (TeX input, CommonHTML
output, menus and the TeX web fonts, about 3 MB); it goes into
``_build/html/_static/mathjax/`` so that the built site is self-contained.
Debian bookworm ships MathJax 2.7; a MathJax 3 folder (``es5/`` of the npm package
``mathjax@3``, named by ``COURSE_MATHJAX_DIR``) works too.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ConfigError
from sphinx.util import logging

logger = logging.getLogger(__name__)

DEBIAN_MATHJAX = Path("/usr/share/javascript/mathjax")
STATIC_SUBDIR = "mathjax"
# MathJax 2: config bundle with TeX input, AMS macros and the CommonHTML output.
MATHJAX2_CONFIG = "TeX-AMS_CHTML"


def find_local_mathjax() -> tuple[Path, int] | None:
    """The local MathJax folder and its major version, or None."""
    candidates = []
    if os.environ.get("COURSE_MATHJAX_DIR"):
        candidates.append(Path(os.environ["COURSE_MATHJAX_DIR"]))
    candidates.append(DEBIAN_MATHJAX)
    for folder in candidates:
        if (folder / "tex-mml-chtml.js").is_file():
            return folder, 3
        if (folder / "es5" / "tex-mml-chtml.js").is_file():
            return folder / "es5", 3
        if (folder / "MathJax.js").is_file() and (folder / "config" / f"{MATHJAX2_CONFIG}.js").is_file():
            return folder, 2
    return None


def _mode(app: Sphinx) -> str:
    mode = (os.environ.get("COURSE_MATHJAX") or app.config.course_mathjax or "auto").strip().lower()
    if mode not in {"auto", "local", "cdn"}:
        raise ConfigError(f"course_mathjax / COURSE_MATHJAX must be auto, local or cdn, not {mode!r}")
    return mode


def choose_mathjax(app: Sphinx, config) -> None:
    app.course_mathjax_local = None
    mode = _mode(app)
    if mode == "cdn":
        return
    found = find_local_mathjax()
    if found is None:
        if mode == "local":
            raise ConfigError(
                "course_mathjax is 'local' but no local MathJax was found: install Debian's "
                "libjs-mathjax (apt-get install libjs-mathjax) or set COURSE_MATHJAX_DIR"
            )
        return
    folder, version = found
    app.course_mathjax_local = (folder, version)
    if version == 3:
        config.mathjax_path = f"{STATIC_SUBDIR}/tex-mml-chtml.js"
    else:
        config.mathjax_path = f"{STATIC_SUBDIR}/MathJax.js?config={MATHJAX2_CONFIG}"


def configure_mathjax2(app: Sphinx) -> None:
    """MathJax 2 reads MathJax.Hub.Config, not the v3 ``window.MathJax`` that MyST sets up."""
    local = getattr(app, "course_mathjax_local", None)
    if not local or local[1] != 2:
        return
    v3 = app.config.mathjax3_config or {}
    default = "tex2jax_process|mathjax_process|math|output_area"
    classes = v3.get("options", {}).get("processHtmlClass", default)
    app.config.mathjax3_config = None
    app.config.mathjax2_config = {
        "tex2jax": {
            "inlineMath": [["\\(", "\\)"]],
            "displayMath": [["\\[", "\\]"]],
            "processRefs": False,
            "processEnvironments": True,
            "processClass": classes,
            "ignoreClass": "tex2jax_ignore|mathjax_ignore",
        },
        "TeX": {"equationNumbers": {"autoNumber": "none"}},
        "CommonHTML": {"linebreaks": {"automatic": True}},
        "menuSettings": {"zoom": "None"},
        "showMathMenu": True,
        "messageStyle": "none",
    }


def _ignore_mathjax2(folder: str, names: list[str]) -> set[str]:
    """Keep what the TeX-AMS_CHTML pages load; skip other outputs, sources and tests."""
    here = Path(folder)
    keep_only = {
        "config": lambda n: n.startswith(MATHJAX2_CONFIG + "."),
        "localization": lambda n: n == "en",
        "output": lambda n: n not in {"SVG", "HTML-CSS"},
    }
    skip = {n for n in names if n in {"unpacked", "test"}}
    if here.name in keep_only:
        skip |= {n for n in names if not keep_only[here.name](n)}
    if here.name == "fonts" and here.parent.name != "CommonHTML":
        skip |= {n for n in names if n != "HTML-CSS"}
    if here.parent.name == "fonts" and here.name == "HTML-CSS":
        skip |= {n for n in names if n != "TeX"}
    if here.parent.name == "HTML-CSS" and here.name == "TeX":
        skip |= {n for n in names if n != "woff"}
    return skip


def _ignore_mathjax3(folder: str, names: list[str]) -> set[str]:
    # sre/ (speech) is loaded only when a reader turns on the accessibility explorer.
    return {n for n in names if n in {"sre", "node-main.js"}}


def copy_mathjax(app: Sphinx, exception) -> None:
    local = getattr(app, "course_mathjax_local", None)
    if exception is not None or not local or app.builder.format != "html":
        return
    folder, version = local
    target = Path(app.outdir) / "_static" / STATIC_SUBDIR
    ignore = _ignore_mathjax2 if version == 2 else _ignore_mathjax3
    shutil.copytree(folder, target, ignore=ignore, dirs_exist_ok=True)
    logger.info(f"course_mathjax: local MathJax {version} from {folder} copied to {target}")


def setup(app: Sphinx) -> dict:
    app.add_config_value("course_mathjax", "auto", "html")
    app.connect("config-inited", choose_mathjax)
    app.connect("builder-inited", configure_mathjax2, priority=900)
    app.connect("build-finished", copy_mathjax)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
