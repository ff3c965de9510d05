"""The theme's icons without Font Awesome's 1.5 MB script: the icon font, cut to the icons the site shows.

The PyData theme puts ``_static/scripts/fontawesome.js`` (Font Awesome 6's
"SVG with JavaScript" bundle: every one of its ~2,000 icons as path data,
1.49 MB) on every page, to turn ``<i class="fa-solid fa-bars">`` into inline
SVG. The same theme's stylesheet already carries Font Awesome's web-font CSS
(``.fa-bars:before {content: "\\f0c9"}`` and the ``@font-face`` rules of the
solid, regular and brands fonts, 156 + 25 + 118 KB of WOFF2), which draws the
same ``<i>`` elements, and the admonition, external-link and other icons of
the stylesheets, with the font alone. So once the build has finished:

* the ``fontawesome.js`` script tag is removed from every page;
* the icons in use are collected: every ``fa-<name>`` class in the written
  pages and in the site's own scripts (the theme's JavaScript adds a few), mapped
  to its code point by the theme's stylesheet, plus every icon code point that
  a stylesheet draws by itself (``content:``, ``--pst-icon-*``);
* each of the three fonts is cut to those code points (fontTools, which
  matplotlib already installs; WOFF with zlib, as no brotli is installed for
  WOFF2) into ``_static/vendor/fontawesome/webfonts/<font>.site.woff``, and the
  theme stylesheet's ``@font-face`` rules point at the cut fonts.

Without fontTools the fonts stay whole (only the script goes), and the build
says so. The Font Awesome Free fonts are under the SIL Open Font License 1.1;
the cut fonts keep all their name records (name, copyright, version).
"""

from __future__ import annotations

import re
from pathlib import Path

# The theme's script tag (pydata-sphinx-theme's webpack-macros.html), with its comment.
FONTAWESOME_SCRIPT = re.compile(
    r"[ \t]*(?:<!-- So that users can add custom icons -->\s*)?"
    r'<script defer src="[^"]*_static/scripts/fontawesome\.js(?:\?[^"]*)?"></script>\n?'
)
# ".fa-pencil-alt:before,.fa-pencil:before{content:"\f303"}" and "--pst-icon-x:"\f303""
CONTENT_RULE = re.compile(r'([^{};]*)\{content:\s*"((?:\\[0-9a-fA-F]{1,6} ?|[^"\\])*)"\}')
CSS_STRING = re.compile(r'(?:content|--[\w-]+)\s*:\s*"((?:\\[0-9a-fA-F]{1,6} ?|[^"\\])*)"')
ICON_CLASS_SELECTOR = re.compile(r"^\.fa-[a-z0-9-]+::?before$")
ICON_CLASS = re.compile(r"\bfa-[a-z0-9]+(?:-[a-z0-9]+)*")
FONTS = ("fa-solid-900", "fa-regular-400", "fa-brands-400")
THEME_CSS = Path("_static") / "styles" / "pydata-sphinx-theme.css"
WEBFONTS = Path("_static") / "vendor" / "fontawesome" / "webfonts"


def css_unescape(value: str) -> str:
    """``\\f303`` (a CSS escape) -> the character U+F303; other characters stay."""
    return re.sub(r"\\([0-9a-fA-F]{1,6}) ?", lambda m: chr(int(m.group(1), 16)), value)


def is_icon_char(char: str) -> bool:
    """Font Awesome draws in Unicode's private use areas (and the brands' few plain letters do not matter)."""
    point = ord(char)
    return 0xE000 <= point <= 0xF8FF or point >= 0xF0000


def stylesheet_icons(css: str) -> tuple[dict[str, str], set[str]]:
    """(icon class -> its character, the icon characters the stylesheet draws by itself)."""
    by_class: dict[str, str] = {}

    def take_class_rule(match: re.Match) -> str:
        names = [s.strip() for s in match.group(1).split(",")]
        if not all(ICON_CLASS_SELECTOR.match(name) for name in names):
            return match.group(0)
        for name in names:
            by_class[name[1:].split(":", 1)[0]] = css_unescape(match.group(2))
        return ""  # counted only when a page uses the class

    rest = CONTENT_RULE.sub(take_class_rule, css)
    drawn = {c for m in CSS_STRING.finditer(rest) for c in css_unescape(m.group(1)) if is_icon_char(c)}
    return by_class, drawn


def icon_classes(text: str) -> set[str]:
    return set(ICON_CLASS.findall(text))


def cut_font(source: Path, target: Path, chars: set[str]) -> bool:
    """Write ``source`` (a TrueType font) cut to ``chars`` as WOFF; False without fontTools."""
    try:
        from fontTools import subset
        from fontTools.ttLib import TTFont
    except ImportError:
        return False
    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    options.name_IDs = ["*"]  # keep every name record (copyright, version)
    options.name_languages = ["*"]
    options.notdef_outline = True
    options.ignore_missing_unicodes = True
    font = TTFont(str(source))
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes={ord(c) for c in chars})
    subsetter.subset(font)
    font.flavor = "woff"
    font.save(str(target))
    return True


def point_font_faces(css: str, fonts: dict[str, str]) -> str:
    """The stylesheet with each ``@font-face`` source of ``fonts`` (name -> cut file) replaced."""
    for name, cut in fonts.items():
        stem = re.escape(name)
        css = re.sub(
            rf'url\(([^)]*?){stem}\.woff2\) format\("woff2"\),\s*'
            rf'url\([^)]*?{stem}\.ttf\) format\("truetype"\)',
            lambda m, cut=cut: f'url({m.group(1)}{cut}) format("woff")',
            css,
        )
    return css


def site_pages(outdir: Path) -> list[Path]:
    """The written pages: every .html file outside ``_static`` (where the theme's own
    templates, such as webpack-macros.html, are copied as they are)."""
    return sorted(p for p in Path(outdir).rglob("*.html") if "_static" not in p.relative_to(outdir).parts)


def slim_site(outdir: Path) -> dict:
    """Drop fontawesome.js from every page and cut the icon fonts; return what was done."""
    outdir = Path(outdir)
    theme_css = outdir / THEME_CSS
    report = {"pages": 0, "icons": [], "fonts": {}, "cut": False}
    pages = site_pages(outdir)
    texts = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        slim = FONTAWESOME_SCRIPT.sub("", text)
        if slim != text:
            page.write_text(slim, encoding="utf-8")
            report["pages"] += 1
        texts.append(slim)
    if not theme_css.is_file():
        return report
    static = outdir / "_static"
    for script in static.rglob("*.js"):
        if script.name != "fontawesome.js" and "mathjax" not in script.relative_to(static).parts:
            texts.append(script.read_text(encoding="utf-8", errors="replace"))
    css = theme_css.read_text(encoding="utf-8")
    by_class, chars = {}, set()
    for sheet in sorted(static.rglob("*.css")):
        sheet_classes, drawn = stylesheet_icons(sheet.read_text(encoding="utf-8", errors="replace"))
        by_class.update(sheet_classes)
        chars |= drawn
    used = sorted({name for text in texts for name in icon_classes(text) if name in by_class})
    chars |= {by_class[name] for name in used}
    report["icons"] = used
    webfonts = outdir / WEBFONTS
    cut = {}
    for name in FONTS:
        source = webfonts / f"{name}.ttf"
        target = webfonts / f"{name}.site.woff"
        if source.is_file() and cut_font(source, target, chars):
            cut[name] = target.name
            report["fonts"][target.name] = target.stat().st_size
    if cut:
        new_css = point_font_faces(css, cut)
        if new_css != css:
            theme_css.write_text(new_css, encoding="utf-8")
        report["cut"] = True
    report["chars"] = len(chars)
    return report


def _build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    report = slim_site(Path(app.outdir))
    fonts = ", ".join(f"{name} {size / 1024:.1f} KiB" for name, size in report["fonts"].items())
    logging.getLogger(__name__).info(
        f"course_icons: fontawesome.js dropped from {report['pages']} pages; "
        + (
            f"{len(report['icons'])} icon classes, {report.get('chars', 0)} glyphs: {fonts}"
            if report["cut"]
            else "icon fonts left whole (fontTools is not installed)"
        )
    )


def setup(app) -> dict:
    # After course_site's page fixes and the theme's own build-finished work.
    app.connect("build-finished", _build_finished, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
