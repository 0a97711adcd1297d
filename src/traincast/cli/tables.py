"""Tables that fit the terminal: no name or number is ever cut off with ``…``, no word split
while a layout with whole words fits (``Table``).

Rich shortens a cell with an ellipsis when the table's narrowest layout (every column as wide
as its longest word) is wider than the terminal. ``print_table`` prints the table as it is
when it fits; otherwise it splits the columns into several tables, each repeating the first
``keep`` columns (the row's name), with as many columns as fit. Every column wraps at words
and folds a word longer than the whole terminal, so nothing is shortened in any case.
"""

from __future__ import annotations

from copy import copy

from rich import table as rich_table
from rich.console import Console, ConsoleOptions
from rich.measure import Measurement

__all__ = ["Table", "print_markdown", "print_table", "split_table"]


class Table(rich_table.Table):
    """A rich table that splits no word while a layout with every word whole fits.

    When the natural layout (every cell on one line) is wider than the room, each column gets
    its narrowest width ``m_i`` (its longest word, with padding) and the room left goes to the
    columns in order of what they lack of their natural width ``M_i`` (``M_i - m_i``), least
    first, each up to ``M_i``: short cells stay on one line, long texts wrap. When even the
    longest words do not all fit, only the longest fold (``_word_widths``). Rich alone shrinks
    the widest columns first and then every column evenly, which folds a short column's words
    (``allreduce-clust|er``) while a long one still has room to wrap. Expanding tables keep
    rich's layout."""

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        widths = None if self.expand else _word_widths(self, console, options.max_width)
        return widths if widths is not None else \
            super()._calculate_column_widths(console, options)


def _word_widths(table: rich_table.Table, console: Console, room: int) -> list[int] | None:
    """Column widths with padding (``Table``'s rule) that fit ``room``; None when the natural
    layout fits, or when even folding every wrapping column cannot fit (rich's layout then).
    A ``no_wrap`` or fixed-width column keeps its natural width (its cells cannot wrap).

    Each column starts at its longest word ``m_i``; when those do not all fit, the columns
    with the longest words, longest first, fold (start at 4 characters) until the rest fit,
    and get back what room there is toward ``m_i`` (at most half the room each). The room
    left goes to the columns in order of what they lack of their natural width ``M_i``, least
    first, each up to ``M_i``: short cells stay on one line, long texts wrap."""
    wide = console.options.update_width(1 << 20)
    ranges = [table._measure_column(console, wide, col) for col in table.columns]
    hi = [max(r.maximum, r.minimum) for r in ranges]
    fixed = [col.no_wrap or col.width is not None for col in table.columns]
    base = [h if f else r.minimum for r, h, f in zip(ranges, hi, fixed, strict=True)]
    if sum(hi) <= room:
        return None
    floor = [table._get_padding_width(col._index) + 4 for col in table.columns]
    words = list(base)
    folding = []
    for i in sorted((i for i, f in enumerate(fixed) if not f), key=lambda j: -words[j]):
        if sum(base) <= room:
            break
        base[i] = min(base[i], floor[i])  # the longest words fold first
        folding.append(i)
    if sum(base) > room:
        return None
    for i in folding:  # a folding column back toward its longest word, at most half the room
        target = min(words[i], room // 2)
        base[i] += max(0, min(target - base[i], room - sum(base)))
    lack = [h - b for b, h in zip(base, hi, strict=True)]
    give = [0] * len(lack)
    for i in sorted(range(len(lack)), key=lambda j: lack[j]):  # the shortest first
        give[i] = min(lack[i], room - sum(base) - sum(give))
    return [b + g for b, g in zip(base, give, strict=True)]


def _sub_table(table: Table, columns: list[int], title: str | None,
               caption: str | None) -> Table:
    """``table`` with only ``columns`` (indices), every column wrapping and folding."""
    sub = copy(table)
    sub.title, sub.caption = title, caption
    sub.columns = []
    for i, index in enumerate(columns):
        col = copy(table.columns[index])
        col._index = i
        col.overflow = "fold"
        sub.columns.append(col)
    return sub


def _fits(console: Console, table: Table, width: int) -> bool:
    """Whether the narrowest layout of ``table`` (measured unbounded: rich clamps a
    measurement to the width it is given) is at most ``width``."""
    wide = console.options.update_width(1 << 20)
    return Measurement.get(console, wide, table).minimum <= width


def split_table(table: Table, width: int, console: Console, keep: int = 1) -> list[Table]:
    """The tables ``print_table`` prints at ``width`` columns: ``table`` itself (its columns
    set to wrap and fold) when it fits, else groups of its columns after the first ``keep``,
    each group with the ``keep`` columns in front, greedily as many columns as fit. The
    title goes on the first table, the caption on the last; the others are titled
    ``(continued)``."""
    n = len(table.columns)
    keep = min(keep, n)
    whole = _sub_table(table, list(range(n)), table.title, table.caption)
    if n <= keep + 1 or _fits(console, whole, width):  # nothing to split off, or no need
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
        title = table.title if i == 0 else (f"{table.title} (continued)" if table.title
                                            else "(continued)")
        out.append(_wrapping(_sub_table(table, [*range(keep), *g], title,
                                        table.caption if i == len(groups) - 1 else None),
                             console, width))
    return out


def _wrapping(sub: Table, console: Console, width: int) -> Table:
    """``sub`` with every column allowed to wrap when it does not fit ``width`` (a ``no_wrap``
    column wider than the terminal would be cropped: fold needs wrapping)."""
    if not _fits(console, sub, width):
        for col in sub.columns:
            col.no_wrap = False
    return sub


def print_table(table: Table, console: Console, keep: int = 1) -> None:
    """Print ``table`` on ``console`` without cutting any cell (``split_table``)."""
    for sub in split_table(table, console.width, console, keep):
        console.print(sub)


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
