"""Small fixes to the built pages that the browser test (tests/site/test_browser.py) found.

* Inline scripts added twice: with Sphinx 7.4 the inline configuration scripts of
  sphinx-thebe and sphinx-togglebutton end up twice in every page (once from the
  registry, once from the builder, the copies differing only in ``None`` versus
  ``''`` as the file name), and the second ``const THEBE_JS_URL`` is a console
  error ("Identifier 'THEBE_JS_URL' has already been declared"). Each page keeps
  the first copy.
* The theme's colour mode: with no ``default_mode`` the PyData theme logs "Got
  invalid theme mode" on a reader's first visit; the default here is ``auto``
  (follow the reader's system setting), as ``html_context['default_mode']``.
* Accessibility (axe-core, WCAG 2.1 A/AA, run by the browser test): the theme's
  search button shows "Search Ctrl+K" but is named "Search" (a label that does
  not contain the visible text), and the bibliography is a ``role="list"`` whose
  children carry the deprecated ``role="doc-biblioentry"`` instead of
  ``listitem`` (a critical violation on the references page); myst-nb's collapsed
  code cells (``hide-input``) are ``<summary aria-label="Toggle hidden content">``
  around the visible "Show code cell source", a name that does not contain the
  visible text (axe-core 4.14's ``label-content-name-mismatch``): the summary keeps
  its visible text as its name. All are fixed in the written pages, once the build
  has finished.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx

# (what the theme writes, what a reader's assistive technology should get)
ACCESSIBILITY_FIXES = (
    ('title="Search" aria-label="Search"', 'title="Search (Ctrl+K)" aria-label="Search Ctrl+K"'),
    ('role="doc-biblioentry"', 'role="listitem"'),
    ('<summary aria-label="Toggle hidden content">', "<summary>"),
)


def fix_accessibility(html: str) -> str:
    """The page's HTML with the search button's name and the bibliography's roles corrected."""
    for wrong, right in ACCESSIBILITY_FIXES:
        html = html.replace(wrong, right)
    return html


def rewrite_pages(app: Sphinx, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = fix_accessibility(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def default_theme_mode(app: Sphinx, pagename, templatename, context, doctree) -> None:
    # The PyData theme reads it from the template context (html_context), not the theme options.
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def _key(script) -> tuple | None:
    filename = getattr(script, "filename", script)
    if filename:
        return None  # files are deduplicated by Sphinx itself
    attributes = getattr(script, "attributes", {}) or {}
    return ("inline", tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_duplicate_inline_scripts(app: Sphinx, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, kept = set(), []
    for script in scripts:
        key = _key(script)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        kept.append(script)
    if len(kept) != len(scripts):
        scripts[:] = kept


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", default_theme_mode)
    app.connect("html-page-context", drop_duplicate_inline_scripts, priority=900)
    app.connect("build-finished", rewrite_pages)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
