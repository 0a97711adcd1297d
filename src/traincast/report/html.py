"""HTML pieces of the report. Every value is escaped here, whatever its origin: the pieces are
Jinja2 templates with autoescape (``report/templates``), Markdown is markdown-it-py with raw
HTML off.

The page is self-contained: styles inline, figures as ``data:`` PNG images, no script, and a
Content-Security-Policy that forbids scripts and any network fetch.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from html import escape
from typing import Any

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1100px;padding:0 1.2em 3em;color:#111;line-height:1.45}
h1{margin-bottom:.2em}h2{border-bottom:1px solid #bbb;padding-bottom:.2em;margin-top:2em}
.meta{color:#555;font-size:.9em}nav ol{columns:2;font-size:.92em}
figure{margin:1.5em 0;padding:.6em;border:1px solid #ddd;border-radius:4px;page-break-inside:avoid}
figure img{max-width:100%;height:auto;display:block;margin:0 auto}
figcaption{font-size:.9em;color:#333;margin-top:.4em}
table{border-collapse:collapse;margin:.3em 0 .6em;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .55em;text-align:left;vertical-align:top}
td{max-width:32em}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th{background:#f2f2f2}
.tbl{overflow-x:auto;margin:1em 0}.tcap{font-weight:600;margin:.2em 0}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.6em;border:1px solid #e3e3e3}
.missing{color:#8a4b00}
"""


def esc(value: Any) -> str:
    """Text for HTML (quotes too, so it is also safe inside attributes)."""
    return escape("" if value is None else str(value), quote=True)


def fmt_value(value: Any) -> str:
    """A table cell for people: numbers to 4 significant digits, None/NaN as a dash."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3e}"
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k}={fmt_value(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(fmt_value(v) for v in value)
    return str(value)


NUMBER_TEXT = re.compile(r"[≥≤<>~]?\s?[-+]?[0-9][0-9,]*(\.[0-9]+)?(e[-+]?[0-9]+)?"
                         r"(\s?(%|×)|\s(µs|ms|s|min|h|d|B|kB|MB|GB|TB|GPU-h|TFLOP/s|GB/s))?")
"""A number as the report's cells write it, with its unit (of the units the cells write):
``25.9%``, ``1.36×``, ``4,023 GPU-h``, ``195 ms``, ``≥ 12``: right-aligned as numbers are; a
name that begins with digits (``2080ti``) is not one."""


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return NUMBER_TEXT.fullmatch(str(value).strip()) is not None


@cache
def _env() -> Any:
    """The Jinja2 environment of the report's templates (``report/templates``), autoescaping
    every value: escaping is the default, not every call's duty."""
    from jinja2 import Environment, PackageLoader, StrictUndefined
    from markupsafe import Markup

    def finalize(value: Any) -> Any:  # the same escapes as ``esc`` (``&#x27;`` for quotes)
        return value if isinstance(value, Markup) else Markup(esc(value))

    env = Environment(loader=PackageLoader("traincast.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, keep_trailing_newline=True, finalize=finalize)
    env.filters["cell"] = fmt_value
    env.tests["number_like"] = _is_number
    return env


def _parts() -> Any:
    return _env().get_template("parts.html.j2").module


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "",
          note: str = "") -> str:
    """An HTML table; every header and cell escaped, numbers right-aligned."""
    return str(_parts().table(list(columns), [list(r) for r in rows], caption, note))


def figure(number: int, anchor: str, png: bytes, alt: str, caption: str, source: str,
           svg_href: str) -> str:
    """A ``<figure>`` with the PNG embedded as a data URI and a link to the SVG file."""
    data = base64.b64encode(png).decode("ascii")
    return str(_parts().figure(number, anchor, data, alt, caption, source, svg_href))


@cache
def _markdown_it() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")


def markdown(text: str) -> str:
    """Markdown for provenance notes (markdown-it-py, CommonMark with tables, raw HTML off:
    any markup in ``text`` comes out escaped). Headings move 2 levels down (``#`` = ``<h3>``:
    they sit inside a section's ``<h2>``); tables sit in a scrolling ``div.tbl``; a fenced
    block's info string is dropped (it would become a ``class="language-..."`` from the
    input)."""
    md = _markdown_it()
    tokens = md.parse(text)
    for tok in tokens:
        if tok.type in ("heading_open", "heading_close"):
            tok.tag = f"h{min(int(tok.tag[1:]) + 2, 6)}"
        elif tok.type == "fence":
            tok.info = ""
    html = md.renderer.render(tokens, md.options, {})
    # literal "<table>" in the input is escaped, so only the renderer's own tags match
    return html.replace("<table>", '<div class="tbl"><table>').replace("</table>",
                                                                        "</table></div>")


def bullets(items: Iterable[str]) -> str:
    return str(_parts().bullets(list(items)))


def section(anchor: str, title: str, body: str) -> str:
    from markupsafe import Markup

    return str(_parts().section(anchor, title, Markup(body)))


def page(title: str, meta: str, sections: Sequence[tuple[str, str, str]]) -> str:
    """The whole document: ``sections`` = ``[(anchor, title, body_html)]`` (``body_html`` is
    HTML built by these functions; titles and anchors are escaped)."""
    from markupsafe import Markup

    return _env().get_template("page.html.j2").render(
        csp=CSP, style=Markup(STYLE), title=title, meta=meta,
        sections=[(a, t, Markup(b)) for a, t, b in sections])
