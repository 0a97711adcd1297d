"""HTML pieces of the report. Every value is escaped here, whatever its origin.

The page is self-contained: styles inline, figures as ``data:`` PNG images, no script, and a
Content-Security-Policy that forbids scripts and any network fetch.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterable, Mapping, Sequence
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


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(str(value))
    except ValueError:
        return False
    return str(value).strip() != ""


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "",
          note: str = "") -> str:
    """An HTML table; every header and cell escaped, numbers right-aligned."""
    head = "".join(f"<th scope=\"col\">{esc(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = []
        for v in row:
            cls = ' class="num"' if _is_number(v) else ""
            cells.append(f"<td{cls}>{esc(fmt_value(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f'<p class="tcap">{esc(caption)}</p>' if caption else ""
    tail = f'<p class="meta">{esc(note)}</p>' if note else ""
    return (f'<div class="tbl">{cap}<table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>{tail}</div>")


def figure(number: int, anchor: str, png: bytes, alt: str, caption: str, source: str,
           svg_href: str) -> str:
    """A ``<figure>`` with the PNG embedded as a data URI and a link to the SVG file."""
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="{esc(anchor)}"><img src="data:image/png;base64,{data}" '
            f'alt="{esc(alt)}"><figcaption><b>Figure {number}.</b> {esc(caption)} '
            f"<i>Input: {esc(source)}.</i> "
            f'<a href="{esc(svg_href)}">SVG</a></figcaption></figure>')


def _inline(text: str) -> str:
    """Escape, then ``code`` and **bold** (the only inline markdown rendered)."""
    out = []
    for i, part in enumerate(text.split("`")):
        part = esc(part)
        out.append(f"<code>{part}</code>" if i % 2 else
                   re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", part))
    return "".join(out)


def markdown(text: str) -> str:
    """A small, safe subset of markdown for provenance notes: headings, paragraphs, bullets,
    pipe tables, fenced code, inline code and bold. Every piece of text is escaped first."""
    html: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            html.append(f"<pre>{esc(chr(10).join(lines[i + 1:j]))}</pre>")
            i = j + 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 2, 6)
            html.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    rows.append(cells)
                i += 1
            head = "".join(f"<th>{_inline(c)}</th>" for c in rows[0]) if rows else ""
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>"
                           for r in rows[1:])
            html.append(f'<div class="tbl"><table><thead><tr>{head}</tr></thead>'
                        f"<tbody>{body}</tbody></table></div>")
        elif re.match(r"\s*[-*] ", line):
            items = []
            while i < len(lines) and re.match(r"\s*[-*] ", lines[i]):
                items.append(_inline(re.sub(r"^\s*[-*] ", "", lines[i])))
                i += 1
            html.append("<ul>" + "".join(f"<li>{x}</li>" for x in items) + "</ul>")
        elif line.strip():
            para = []
            while i < len(lines) and lines[i].strip() and not re.match(
                    r"(#|\||```|\s*[-*] )", lines[i]):
                para.append(lines[i].strip())
                i += 1
            html.append(f"<p>{_inline(' '.join(para))}</p>")
        else:
            i += 1
    return "".join(html)


def bullets(items: Iterable[str]) -> str:
    lis = "".join(f"<li>{esc(i)}</li>" for i in items)
    return f"<ul>{lis}</ul>" if lis else ""


def section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>'


def page(title: str, meta: str, sections: Sequence[tuple[str, str, str]]) -> str:
    """The whole document: ``sections`` = ``[(anchor, title, body_html)]``."""
    toc = "".join(f'<li><a href="#{esc(a)}">{esc(t)}</a></li>' for a, t, _ in sections)
    body = "".join(section(a, t, b) for a, t, b in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
            f'<header><h1>{esc(title)}</h1><p class="meta">{esc(meta)}</p></header>'
            f"<nav><ol>{toc}</ol></nav>{body}</body></html>\n")
