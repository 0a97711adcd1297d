"""Unit conversions at the edge: users type network speeds in Gbit/s, the model uses GB/s.

``25Gbit`` = 25e9 bit/s = 25 / 8 GB/s = 3.125 GB/s (GB = 1e9 bytes). Shares are fractions in
the model and percentages for people (:func:`fmt_pct`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from traincast.bounds import LINK_BW_MAX_GBS, LINK_BW_MIN_GBS
from traincast.errors import TraincastError

_SPEED = re.compile(r"^\s*([-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[-+]?[0-9]+)?"
                    r"|nan|inf(?:inity)?))\s*"  # nan and inf: refused by name, not as links
                    r"([gm]bit|[gm]bit/s|[gm]bps|[gm]b/s|[gm]bs)\s*$", re.IGNORECASE)


def gbit_to_gbs(gbit: float) -> float:
    """Gbit/s -> GB/s: ``gbit / 8``."""
    return gbit / 8.0


def speed_in_bytes(unit: str) -> bool:
    """Whether a speed unit counts bytes: an upper-case ``B`` (``GB/s``, ``GBps``, ``MB/s``,
    the SI and IEC symbol of the byte); ``bit`` in any case, a lower-case ``bps`` (``gbps``,
    ``Gbps``), or a lower-case ``b`` after an upper-case prefix (``Gb/s``: the symbol of the
    bit) counts bits. All in lower case without ``bit`` or ``bps`` (``gb/s``, ``gbs``) is
    ambiguous: an error that asks for one of the two."""
    if "bit" in unit.lower() or unit[1:] == "bps":
        return False
    if unit[1] == "B":
        return True
    if unit[0].islower():  # gb/s, gbs: the b says bits, the g that case was not minded
        raise TraincastError(f"speed unit {unit!r}: bits or bytes?",
                             hint=f"write {unit[0].upper()}bit (bits, {unit[0].upper()}b/s) or "
                                  f"{unit[0].upper()}B/s (bytes)")
    return False


def parse_speed_gbs(text: str) -> float | None:
    """``'25Gbit'``/``'25Gbps'``/``'25Gb/s'`` -> 3.125, ``'12.5GB/s'``/``'12.5GBps'`` -> 12.5,
    ``'100Mbit'`` -> 0.0125 (:func:`speed_in_bytes`: ``B`` bytes, ``b`` or ``bit`` bits).

    Returns None when ``text`` is not a speed (it is then a link name); a number with a speed
    unit that is 0, negative (``'-5Gbit'``), infinite (``'1e400Gbit'``), below
    :data:`~traincast.bounds.LINK_BW_MIN_GBS` (``'1e-300Gbit'``) or above
    :data:`~traincast.bounds.LINK_BW_MAX_GBS` once in GB/s (``'1e12Gbit'``) is an error, not a
    link name, and so is a unit that does not say bits or bytes (``'100gb/s'``).
    """
    m = _SPEED.match(text)
    if not m:
        return None
    value, unit = float(m.group(1)), m.group(2)
    if not math.isfinite(value):
        raise TraincastError(f"speed is not a finite number: {text!r}",
                             hint="give a speed such as 25Gbit or 12.5GB/s")
    if value <= 0:
        raise TraincastError(f"speed must be positive: {text!r}",
                             hint="give a speed above 0, such as 25Gbit or 12.5GB/s")
    gigas = value / 1000.0 if unit[0] in "mM" else value
    bw_gbs = gigas if speed_in_bytes(unit) else gbit_to_gbs(gigas)
    if bw_gbs < LINK_BW_MIN_GBS:
        raise TraincastError(f"speed {text!r} is {bw_gbs:.3g} GB/s, below "
                             f"{LINK_BW_MIN_GBS:g} GB/s (100 kB/s, no training cluster's link)",
                             hint="give a speed such as 25Gbit or 12.5GB/s")
    if bw_gbs > LINK_BW_MAX_GBS:
        raise TraincastError(f"speed {text!r} is {fmt_sig(bw_gbs)} GB/s, above "
                             f"{LINK_BW_MAX_GBS:,.0f} (a hundred times NVLink 5's 900)",
                             hint="give a speed such as 25Gbit or 12.5GB/s")
    return bw_gbs


def fmt_pct(x: float | None, decimals: int = 1, *, sign: bool = False,
            missing: str = "-") -> str:
    """A fraction for people: ``100 x`` with ``decimals`` decimals and a ``%`` (``sign``: a
    sign on positive values too, ``+12.5%``); ``missing`` for None or a non-finite ``x``."""
    if x is None or not math.isfinite(x):
        return missing
    return f"{100 * x:{'+' if sign else ''}.{decimals}f}%"


def fmt_share(x: float | None, missing: str = "-", counted: bool = False) -> str:
    """A share in words or a narrow column: whole percents (``13%``); under 1% either way one
    significant digit (``0.4%``, ``-0.04%``: a small share is not ``0%``), and ``0%`` under
    0.005% (float noise of a change that changes nothing; a ``counted`` share, of jobs, is
    ``0%`` only at 0 and ``<0.005%`` above it); a share short of 100% by at least 0.005% keeps
    the decimals that show the gap (``99.6%``, ``99.95%``, not ``100%``). ``missing`` for None
    or non-finite."""
    if x is None or not math.isfinite(x):
        return missing
    if abs(x) < 5e-5:
        return "<0.005%" if counted and x > 0 else "0%"
    if abs(x) < 0.01:
        return f"{fmt_sig(100 * x, 1)}%"
    if 0.995 <= abs(x) < 1 - 5e-5:  # the gap to 100% to one significant digit: 99.95%
        gap = float(f"{100 * (1 - abs(x)):.1g}")  # rounded first: 0.00999... is 0.01
        return fmt_pct(x, max(1, -math.floor(math.log10(gap))))
    return fmt_pct(x, 0)


def fmt_seconds(t: float | None) -> str:
    """Seconds for people: 0 s, 789 µs, 45.6 ms, 1.23 s, 456 s; from 1,000 s on in minutes
    (16.7 min), hours (3.47 h) or days (145 d), never in e-notation."""
    if t is None or not math.isfinite(t):
        return "-"
    if t == 0:
        return "0 s"
    if t >= 1000:
        value, unit = ((t / 86400, "d") if t >= 86400 else (t / 3600, "h") if t >= 3600
                       else (t / 60, "min"))
        return f"{value:,.0f} {unit}" if value >= 1000 else f"{value:.3g} {unit}"
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} µs"


def fmt_x(x: float | None, missing: str = "-") -> str:
    """A speedup for people: ``1.83×`` (two decimals); ``missing`` for None or non-finite."""
    if x is None or not math.isfinite(x):
        return missing
    return f"{x:.2f}×"


def fmt_sig(x: float | None, digits: int = 3, missing: str = "-") -> str:
    """A number for a table: rounded to ``digits`` significant digits (``0.0914``, ``17.6``,
    ``1.5``; a whole number with thousands separators from ``10 ** digits`` on, ``123,000``;
    ``0.0000500`` below 1e-4, no exponent down to 1e-6; below that an exponent, ``1.00e-300``,
    not three hundred zeros; from 1e15 on an exponent too, ``1.25e+307``); ``missing`` for
    None or a non-finite ``x``."""
    if x is None or not math.isfinite(x):
        return missing
    r = float(f"{x:.{digits}g}")  # rounded first: 999.7 is 1,000, not 1e+03
    if r == 0:
        return "0"
    if abs(r) < 1e-6 or abs(r) >= 1e15:
        return f"{r:.{digits - 1}e}"
    if abs(r) >= 10 ** digits:
        return f"{r:,.0f}"
    text = f"{r:.{digits}g}"
    return text if "e" not in text else f"{r:.{digits - 1 - math.floor(math.log10(abs(r)))}f}"


def fmt_params(n: float) -> str:
    """A parameter count for people: ``6.7B``, ``124M``, ``30.5M``, ``8K`` (three significant
    digits, the largest unit it reaches)."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= scale * (1 - 5e-4):  # 999.6M rounds to 1B, not 1,000M
            return f"{fmt_sig(n / scale)}{unit}"
    return fmt_sig(n)


def fmt_bytes(b: float) -> str:
    """Bytes for people in decimal units (GB = 1e9)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def fmt_amount(x: float | None, missing: str = "-") -> str:
    """An amount for a table (GPU-hours, GPUs): whole, with thousands separators, from 100 on
    (``51,471``); below, three significant digits (``33.5``, ``0.5``), so that a small total is
    not rounded to a wrong whole number."""
    if x is None or not math.isfinite(x):
        return missing
    return f"{x:,.0f}" if abs(x) >= 100 else fmt_sig(x)


def fmt_exp(x: float) -> str:
    """A bound of the form 10^k (k >= 0) as messages write it: ``1e9``, ``1e24`` (not
    ``1e+09``); one significant digit, so only for such round bounds."""
    return f"{x:.0e}".replace("e+0", "e").replace("e+", "e")


def join_words(items: Iterable[object], last: str = "and") -> str:
    """Items as a sentence lists them: ``'a, b and c'`` (``last = "or"``: ``'a, b or c'``);
    one item alone, none as ``''``."""
    words = [str(x) for x in items]
    return ", ".join(words[:-1]) + f" {last} " + words[-1] if len(words) > 1 else "".join(words)


def first_of(texts: Iterable[object], shown: int = 5) -> str:
    """The first ``shown`` texts, comma-separated, and how many more (``'a, b and 3 more'``):
    a list of names cut for a sentence."""
    words = [str(t) for t in texts]
    more = f" and {len(words) - shown:,} more" if len(words) > shown else ""
    return ", ".join(words[:shown]) + more


def plural(n: float, word: str) -> str:
    """``n`` with its noun: ``1 job``, ``3 jobs``, ``1,234 jobs``, ``5.5 GPUs``."""
    text = f"{int(n):,}" if float(n).is_integer() else f"{n:g}"
    return f"{text} {word if n == 1 else word + 's'}"
