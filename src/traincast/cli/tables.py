"""Tables that fit the terminal: no name or number is ever cut off with ``…``, no word split
while a layout with whole words fits (``Table``), and a table too wide for its longest words
split by columns, however it is printed.

Rich shortens a cell with an ellipsis when the table's narrowest layout (every column as wide
as its longest word) is wider than the terminal. ``print_table`` prints the table as it is
when it fits; otherwise it splits the columns into several tables, each repeating the first
column (the row's name), with as many columns as fit (``Table`` prints so however it is
printed). Every column wraps at words
and folds a word longer than the whole terminal, so nothing is shortened in any case.
"""

from __future__ import annotations

from copy import copy
from typing import Any

from rich import box
from rich import table as rich_table
from rich.console import Console, ConsoleOptions
from rich.text import Text

__all__ = ["Table", "print_markdown", "print_table", "split_table", "table_parts"]


class Table(rich_table.Table):
    """A rich table whose text is never markup, that splits no word while a layout with every
    word whole fits.

    A string cell, title or caption prints as it is: a job id, file name or GPU type from a
    trace may hold square brackets (``exp[/lr]``, ``T4[x]``) that rich would read as style
    tags, dropping them or failing. A styled cell is a rich ``Text``.

    When the natural layout (every cell on one line) is wider than the room, each column gets
    its narrowest width ``m_i`` (its longest word, with padding) and the room left goes to the
    columns in order of what they lack of their natural width ``M_i`` (``M_i - m_i``), least
    first, each up to ``M_i``: short cells stay on one line, long texts wrap. When even the
    longest words do not all fit, only the longest fold (``_word_widths``). Rich alone shrinks
    the widest columns first and then every column evenly, which folds a short column's words
    (``allreduce-clust|er``) while a long one still has room to wrap. Expanding tables keep
    rich's layout."""

    def __init__(self, *headers: Any, title: Any = None, caption: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(*headers, title=_plain(title, "table.title"),
                         caption=_plain(caption, "table.caption"), **kwargs)

    def add_column(self, header: Any = "", *args: Any, **kwargs: Any) -> None:
        super().add_column(_plain(header), *args, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        super().add_row(*(_plain(c) for c in renderables), **kwargs)

    splits: bool = True
    """Whether the table, printed where even its longest words do not fit, splits by columns
    (``split_table``, the first column repeated) rather than folding words (the parts it
    splits into do not split again)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Any:
        if self.splits and not self.expand and self.columns:
            yield from table_parts(self, options.max_width, console)  # parts that fold
            return
        yield from super().__rich_console__(console, options)

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        widths = None if self.expand else _word_widths(self, console, options.max_width)
        return widths if widths is not None else \
            super()._calculate_column_widths(console, options)


def _plain(value: Any, style: str = "") -> Any:
    """A string as text that is not markup (with ``style``, as rich styles a title); anything
    else (None, a rich renderable) as it is."""
    return Text(value, style=style) if isinstance(value, str) else value


def _word_widths(table: rich_table.Table, console: Console, room: int) -> list[int] | None:
    """Column widths with padding (``Table``'s rule) that fit ``room``; None when the natural
    layout fits, or when even folding every wrapping column cannot fit (rich's layout then).
    A ``no_wrap`` or fixed-width column keeps its natural width (its cells cannot wrap).

    Each column starts at its longest word ``m_i`` (when those do not all fit: ``_fold_longest``).
    The room left goes to the columns in order of what they lack of their natural width
    ``M_i``, least first, each up to ``M_i``: short cells stay on one line, long texts wrap."""
    base, hi, fixed = _words(table, console)
    if sum(hi) <= room:
        return None
    floor = [table._get_padding_width(col._index) + 4 for col in table.columns]
    if sum(base) > room:
        first = room - sum(base[1:])  # the first column's long words fold, the others' stay
        if first >= _first_fold(table, base, fixed):
            base = [first, *base[1:]]
        else:
            base = _fold_longest(base, hi, fixed, floor, room)
            if base is None:
                return None
    lack = [h - b for b, h in zip(base, hi, strict=True)]
    give = [0] * len(lack)
    for i in sorted(range(len(lack)), key=lambda j: lack[j]):  # the shortest first
        give[i] = min(lack[i], room - sum(base) - sum(give))
    return [b + g for b, g in zip(base, give, strict=True)]


def _words(table: rich_table.Table, console: Console
           ) -> tuple[list[int], list[int], list[bool]]:
    """Per column, measured unbounded (rich clamps a measurement to the width it is given):
    its narrowest width that folds no word (its longest word with its padding; a ``no_wrap``
    or fixed-width column its whole width), its natural width, and whether it is fixed."""
    wide = console.options.update_width(1 << 20)
    ranges = [table._measure_column(console, wide, col) for col in table.columns]
    hi = [max(r.maximum, r.minimum) for r in ranges]
    fixed = [col.no_wrap or col.width is not None for col in table.columns]
    base = [h if f else r.minimum for r, h, f in zip(ranges, hi, fixed, strict=True)]
    return base, hi, fixed


def _first_fold(table: rich_table.Table, base: list[int], fixed: list[bool]) -> int:
    """The narrowest the first column gets before a table splits: its longest word, down to
    ``FIRST_FOLD_WIDTH`` and its padding (a fixed column: its whole width)."""
    return base[0] if fixed[0] else min(base[0],
                                        FIRST_FOLD_WIDTH + table._get_padding_width(0))


def _fold_longest(words: list[int], hi: list[int], fixed: list[bool], floor: list[int],
                  room: int) -> list[int] | None:
    """Widths when the longest words ``words`` do not all fit ``room``: every wrapping column
    cut at one width ``c``, the widest that fits (binary search), so only the longest words
    fold, all to the same width ``c``; then the folding columns give up to half their width to
    the columns whose natural width ``hi`` is at most ``c``, those that lack least first (a short
    cell on one line before a long word on fewer lines). None when even ``floor`` does not
    fit."""

    def capped(c: int) -> list[int]:
        return [w if f else min(w, max(c, fl)) for w, f, fl in zip(words, fixed, floor,
                                                                    strict=True)]

    if sum(capped(0)) > room:
        return None
    lo_c, hi_c = 0, max(words)
    while lo_c < hi_c:
        mid = (lo_c + hi_c + 1) // 2
        lo_c, hi_c = (mid, hi_c) if sum(capped(mid)) <= room else (lo_c, mid - 1)
    cut = capped(lo_c)
    folding = [i for i, (c, w) in enumerate(zip(cut, words, strict=True)) if c < w]
    budget = room - sum(cut) + sum(cut[i] - max(floor[i], cut[i] // 2) for i in folding)
    short = [i for i in range(len(cut)) if i not in folding and not fixed[i] and hi[i] <= lo_c]
    for i in sorted(short, key=lambda j: hi[j] - cut[j]):
        grow = min(hi[i] - cut[i], budget)
        cut[i] += grow
        budget -= grow
    while sum(cut) > room:  # what the others took, from the widest folding column
        widest = max(folding, key=lambda j: cut[j])
        cut[widest] -= 1
    for i in folding:  # what is left, back to the folding columns
        cut[i] += min(words[i] - cut[i], room - sum(cut))
    return cut


def _sub_table(table: Table, columns: list[int], title: Any, caption: Any) -> Table:
    """``table`` with only ``columns`` (indices), every column wrapping and folding."""
    sub = copy(table)
    sub.title, sub.caption, sub.splits = _plain(title, "table.title"), \
        _plain(caption, "table.caption"), False
    sub.columns = []
    for i, index in enumerate(columns):
        col = copy(table.columns[index])
        col._index = i
        col.overflow = "fold"
        sub.columns.append(col)
    return sub


FIRST_FOLD_WIDTH = 10
"""The first column (a name, a job id, a file) may fold its longest words down to this many
characters before a table splits: past that, splitting by columns keeps every word whole."""


def _fits(console: Console, table: Table, width: int) -> bool:
    """Whether the narrowest layout of ``table`` that folds no word but the first column's
    long ones is at most ``width``: every column at its longest word with its padding
    (measured unbounded: rich clamps a measurement to the width it is given; a ``no_wrap`` or
    fixed column at its whole width; ``Table``'s starting point), the first at most
    ``FIRST_FOLD_WIDTH`` and its padding, plus the table's rules and edges."""
    base, _, fixed = _words(table, console)
    first = _first_fold(table, base, fixed) if base else 0
    return first + sum(base[1:]) + table._extra_width <= width


def split_table(table: Table, width: int, console: Console) -> list[Table]:
    """The tables ``print_table`` prints at ``width`` columns: ``table`` itself (its columns
    set to wrap and fold) when it fits, else groups of its columns after the first, each
    group with the first column in front, greedily as many columns as fit. The
    title goes on the first table, the others are titled ``(continued)``; the caption goes on
    none when it splits (``table_parts`` prints it below them, as wide as the terminal) and on
    the whole table when it does not."""
    n = len(table.columns)
    keep = min(1, n)  # the row's name, repeated in every part
    whole = _sub_table(table, list(range(n)), table.title, table.caption)
    if _fits(console, whole, width):
        return [whole]
    if n <= keep + 1:  # nothing to split off: fold
        return [_wrapping(whole, console, width)]
    groups: list[list[int]] = []
    group: list[int] = []
    for index in range(keep, n):
        trial = [*range(keep), *group, index]
        if group and not _fits(console, _sub_table(table, trial, None, None), width):
            groups.append(group)
            group = []
        group.append(index)
    groups.append(group)
    out = []
    for i, g in enumerate(groups):
        title = table.title if i == 0 else Text.assemble(
            table.title if isinstance(table.title, Text) else Text(str(table.title or "")),
            " (continued)" if table.title else "(continued)", style="table.title")
        part = _sub_table(table, [*range(keep), *g], title, None)
        if i:  # a narrow part: as wide as its title, which would otherwise fold letter by letter
            part.min_width = min(width, len(title) + 2)
        out.append(_wrapping(part, console, width))
    return out


def table_parts(table: Table, width: int, console: Console) -> list[Any]:
    """What prints ``table`` at ``width``: the tables of ``split_table``, and below them, when
    it split, the caption as text as wide as ``width``."""
    parts: list[Any] = split_table(table, width, console)
    if len(parts) > 1 and table.caption:
        parts.append(_plain(table.caption, "table.caption"))
    return parts


def _wrapping(sub: Table, console: Console, width: int) -> Table:
    """``sub`` with every column allowed to wrap when it does not fit ``width`` (a ``no_wrap``
    column wider than the terminal would be cropped: fold needs wrapping), but a ``no_wrap``
    first column of at most a third of ``width`` (a field name): the others fold instead."""
    if not _fits(console, sub, width):
        base, _, _ = _words(sub, console)
        keep = bool(sub.columns) and sub.columns[0].no_wrap and base[0] <= width // 3
        for col in sub.columns[1 if keep else 0:]:
            col.no_wrap = False
    return sub


def print_table(table: Table, console: Console) -> None:
    """Print ``table`` on ``console`` without cutting any cell (``split_table``)."""
    for part in table_parts(table, console.width, console):
        console.print(part)


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table line ``| a | b |``."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def print_markdown(text: str, console: Console) -> None:
    """Print a Markdown report for people: each table (a header line, a ``|---|`` line and its
    rows) through ``print_table``, so no cell is cut and wide tables split by columns; the
    text between tables as rendered Markdown (wrapped at the terminal's width)."""
    from rich.markdown import Markdown

    lines, block = text.splitlines(), []
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|--"):
            if block:
                console.print(Markdown("\n".join(block)))
                block = []
            table = Table(*_cells(lines[i]))
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                table.add_row(*_cells(lines[i]))
                i += 1
            print_table(table, console)
        else:
            block.append(lines[i])
            i += 1
    if block:
        console.print(Markdown("\n".join(block)))


RULES_OFF: dict[str, Any] = {"box": box.SIMPLE_HEAD, "collapse_padding": True,
                             "pad_edge": False, "show_edge": False}
"""Table options for no vertical rules (:func:`compact_table`): one space between columns, so
a row of long names fits 80 columns."""


def compact_table(title: str | None, caption: str | None, columns: tuple[str, ...],
                   rows: list[tuple[str, ...]]) -> Table:
    """A table that fits 80 columns: no vertical rules, no number cut (each number column at
    least as wide as its widest cell, its header wrapping; a long name in the first column
    folds onto the next line instead)."""
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
              **RULES_OFF)
    for i, col in enumerate(columns):
        widest = max((len(r[i]) for r in rows), default=0)
        t.add_column(col, justify="right" if i else "left", overflow="fold",
                     min_width=widest if i else None)
    for r in rows:
        t.add_row(*r)
    return t
