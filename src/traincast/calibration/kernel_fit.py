"""Fit the kernel model to measured single-op latencies, and validate it leave-one-GPU-out.

Input: a folder of measured kernels in the NeuSight CSV format (one sub-folder per op family,
``linear/ bmm/ conv/ softmax/ ln/ add/ ...``, one ``<GPU>.csv[.gz]`` per device; columns
``Device, Latency`` (milliseconds) and the shape columns of the family; ``scripts/
measure_kernels.py`` writes the same format on a CUDA machine). Output: the fitted parameters
(``hardware/kernel_model.toml`` is the shipped result of ``traincast calibrate --kernels``).

The fit, in stages (docs/model.md, "Kernel model"), every stage over the GPUs fitted on:

1. ``floor_us`` per GPU: the median latency of the 5% of its binary element-wise rows that move
   the fewest bytes (one tiny op timed alone: the host's dispatch; a property of the measuring
   machine as much as the GPU), and ``dispatch_<kind>`` per measured op kind: the median over
   the GPUs of the kind's own least-work-5% median over the GPU's ``floor_us`` (``addmm`` and
   ``native_layer_norm`` cost the host about twice an ``add``). A row's floor is
   ``d r = floor_us dispatch_<kind>``.
2. ``f_<family>``: the median achieved fraction of datasheet bandwidth, ``B / (t M)``, over
   rows at least 5x their floor (large transfers, where the floor is noise).
3. GEMM parameters (``simt_efficiency``, ``power_ref``, ``c_issue``, ``tile_cycles``,
   ``max_split_k``, ``gemm_fixed_us``, ``pre_launch``) by bounded least squares with a soft-L1
   loss on ``ln(pred / measured)`` of the linear and bmm rows (``LOSS_SCALE``, ``BOUNDS``).
4. ``conv_efficiency`` and ``extra_kernel_us`` the same way on the conv rows.

Every row is priced as it was measured (one op between two CUDA events, ``measured_s``),
which is how the kernel time ``t_kernel`` is recovered from it: a native ATen kernel
(element-wise, softmax, LayerNorm) is launched early in its op's dispatch and the rest of the
host's work overlaps it, ``t = max(d r, t_kernel)``; a cuBLAS or cuDNN call does host work
(heuristics, descriptors, workspace) before its launch while the GPU waits,
``t = max(d r, phi d r + t_kernel)`` with ``phi`` (``pre_launch``) fitted. A step of a training
job is priced as a queue instead (``kernels.queue_idle_s``): the host issues the ops in order,
``d r`` each, ahead of the GPU, which waits only for an op not yet issued. The summed time of
each GPU is reported, not fitted: it is dominated by seconds-long products whose thermal
throttling depends on the measuring host's cooling (docs/validation.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast import kernels
from traincast.errors import TraincastError
from traincast.files import content_sha256, open_bytes, write_text_whole
from traincast.hardware.catalog import DTYPES, HELD_OUT_RECORDS
from traincast.kernels import CONV_KEYS, GEMM_KEYS
from traincast.units import plural

F = NDArray[np.float64]

GEMM_FAMILIES = ("linear", "bmm")
ELEMENTWISE_BINARY = ("add", "mul", "div", "pow")
ELEMENTWISE_UNARY = ("addu", "mulu", "divu", "powu", "relu", "gelu", "tanh")
FAMILIES: dict[str, str] = {
    "linear": "gemm", "bmm": "gemm", "conv": "conv", "softmax": "softmax", "ln": "norm",
    **{f: "elementwise" for f in ELEMENTWISE_BINARY + ELEMENTWISE_UNARY}}
"""Folder -> kernel kind (the report's per-family rows)."""
SHAPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "linear": ("B", "M", "N", "K"), "bmm": ("B", "M", "N", "K"),
    "conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
             "Padding")}
"""Shape columns per folder (``B, H`` for the rest), as the data's README gives them."""
START: dict[str, float] = {"simt_efficiency": 0.9, "power_ref": 0.003, "c_issue": 8.0,
                           "tile_cycles": 2000.0, "max_split_k": 32.0, "gemm_fixed_us": 2.0,
                           "pre_launch": 0.5, "conv_efficiency": 1.0, "extra_kernel_us": 5.0}
"""Starting point of the search (physically plausible values; the fit moves them)."""
BOUNDS: dict[str, tuple[float, float]] = {
    "simt_efficiency": (0.3, 1.0), "power_ref": (1e-4, 0.02), "c_issue": (0.0, 50.0),
    "tile_cycles": (0.0, 1e5), "max_split_k": (1.0, 1e4), "gemm_fixed_us": (0.0, 100.0),
    "pre_launch": (0.0, 1.0), "conv_efficiency": (0.05, 2.0), "extra_kernel_us": (0.0, 1000.0)}
"""Range each parameter is searched in: an efficiency or a share at most 1, times and counts
at least 0 (``simt_efficiency`` at least 0.3, ``max_split_k`` at least 1)."""
LOSS_SCALE = 0.1
"""Scale of the fit's soft-L1 loss on ``z = ln(pred / measured) / LOSS_SCALE``,
``2 (sqrt(1 + z^2) - 1)`` (scipy ``least_squares(loss="soft_l1")``): a row 10% off counts about
as in a least-squares fit, one 3x off about linearly, as in a median fit."""
PROGRESS = Callable[[str], None]


@dataclass
class Kernels:
    """Measured rows of all families, as columns. ``gpu`` = catalog GPU name per row."""

    family: NDArray[Any]
    gpu: NDArray[Any]
    latency_s: F
    shape: dict[str, F]

    def __len__(self) -> int:
        return len(self.latency_s)

    def take(self, mask: NDArray[np.bool_]) -> Kernels:
        return Kernels(self.family[mask], self.gpu[mask], self.latency_s[mask],
                       {k: v[mask] for k, v in self.shape.items()})

    def __add__(self, other: Kernels) -> Kernels:
        """The rows of both (a shape column one of them lacks is NaN there)."""
        keys = sorted(set(self.shape) | set(other.shape))

        def col(d: Kernels, k: str) -> F:
            return d.shape.get(k, np.full(len(d), np.nan))

        return Kernels(np.concatenate([self.family, other.family]),
                       np.concatenate([self.gpu, other.gpu]),
                       np.concatenate([self.latency_s, other.latency_s]),
                       {k: np.concatenate([col(self, k), col(other, k)]) for k in keys})


LATENCY_MAX_MS = 1e6
"""The longest latency a measured row may hold, ms (about 17 minutes for one op)."""
SHAPE_MAX = 2.0**31 - 1
"""The largest size a shape column may hold: a dimension cuBLAS and cuDNN index with 32 bits."""


def read_kernels(directory: str | Path | Sequence[str | Path], catalog: Any,
                 families: Iterable[str] | None = None,
                 sample: int = 0, seed: int = 0) -> Kernels:
    """Every ``<family>/*.csv[.gz]`` under ``directory`` (one folder or several, read together;
    DuckDB: the quoted ``Kernels`` field may hold commas). ``Device`` must name a catalog GPU or
    alias; ``Latency`` (ms) must be positive and finite, at most :data:`LATENCY_MAX_MS`; shape
    columns whole numbers, positive (``Padding`` >= 0) and at most :data:`SHAPE_MAX`; CSV files
    in a sub-folder that is no family are an error; a ``Dtype`` column, where present, must
    say ``fp32`` (the model's SIMT products are FP32). ``sample`` > 0 keeps that many rows per
    file (seeded). Errors name the file, the row and the field."""
    import duckdb

    roots = [Path(directory)] if isinstance(directory, (str, Path)) else \
        [Path(d) for d in directory]
    wanted = list(families or FAMILIES)
    for fam in wanted:
        if fam not in FAMILIES:
            raise TraincastError(f"unknown kernel family {fam!r}",
                                 hint=f"known: {', '.join(FAMILIES)}")
    files = {(root, fam): sorted((root / fam).glob("*.csv*")) for root in roots for fam in wanted}
    seen: set[Path] = set()
    for root in roots:
        if not root.is_dir():
            raise TraincastError(f"{root}: " + ("a file, not a folder of measured kernels"
                                                if root.exists() else
                                                "no such folder of measured kernels"),
                                 hint=(f"give the folder that holds its family folder: "
                                       f"--kernels {root.parent.parent}"
                                       if root.parent.name in FAMILIES else
                                       "a folder with linear/, bmm/, conv/, ... sub-folders, "
                                       "each with one CSV per GPU"))
        if root.name in FAMILIES and not any((root / fam).is_dir() for fam in FAMILIES):
            raise TraincastError(f"{root}: a family folder ({root.name}/), not the folder "
                                 "that holds the families",
                                 hint=f"give its parent: --kernels {root.parent}")
        if root.resolve() in seen:
            raise TraincastError(f"{root}: given twice", hint="name each folder once")
        seen.add(root.resolve())
        stray = sorted(d.name for d in root.iterdir()  # hidden folders (.ipynb_checkpoints,
                       if d.is_dir() and d.name not in FAMILIES  # __MACOSX) are not read
                       and not d.name.startswith((".", "__")) and any(d.glob("*.csv*")))
        if stray:
            raise TraincastError(f"{root / stray[0]}: CSV files in a folder that is no kernel "
                                 "family (they would not be read)",
                                 hint=f"name it after its family ({', '.join(FAMILIES)}) or "
                                      "move it out of the folder")
        loose = sorted([*root.glob("*.csv"), *root.glob("*.csv.gz"),
                        *(p for fam in FAMILIES for p in root.glob(f"{fam}/*/*.csv*"))])
        if loose:  # beside the family folders, or in a folder inside one: not read
            raise TraincastError(f"{loose[0]}: a CSV file outside a family folder (it would "
                                 "not be read)",
                                 hint=f"put it in the folder of its family "
                                      f"({', '.join(FAMILIES)}): DIR/<family>/<gpu>.csv")
        for fam in wanted:  # one GPU's file twice, plain and gzipped: its rows counted twice
            stems = [p.name.removesuffix(".gz").removesuffix(".csv") for p in files[root, fam]]
            twice = sorted({s for s in stems if stems.count(s) > 1})
            if twice:
                raise TraincastError(f"{root / fam}: {twice[0]}.csv and {twice[0]}.csv.gz both "
                                     "hold its kernels (they would be read twice)",
                                     hint="keep one of the two")
        if not any(files[root, fam] for fam in wanted):
            raise TraincastError(f"{root}: no <family>/*.csv or *.csv.gz files",
                                 hint=f"a folder with sub-folders named after the families "
                                      f"({', '.join(wanted)})")
    _refuse_copies([p for fam in wanted for root in roots for p in files[root, fam]])
    parts: list[tuple[str, dict[str, Any], NDArray[Any]]] = []
    con = duckdb.connect()
    for fam in wanted:
        for path in sorted(p for root in roots for p in files[root, fam]):
            data = _read_file(con, path, fam, sample, seed)
            gpus = _gpu_names(catalog, path, data["Device"], data["_row"])
            _refuse_impossible(path, fam, data, gpus, catalog)
            parts.append((fam, data, gpus))
    if not parts:
        raise TraincastError("no folder of measured kernels given",
                             hint="--kernels DIR (repeat for several)")
    keys = sorted({k for fam, _, _ in parts for k in _shape_keys(fam)})
    return Kernels(
        np.concatenate([np.full(len(d["Latency"]), fam, dtype=object) for fam, d, _ in parts]),
        np.concatenate([g for _, _, g in parts]),
        np.concatenate([d["Latency"] * 1e-3 for _, d, _ in parts]),
        {k: np.concatenate([d.get(k, np.full(len(d["Latency"]), np.nan)) for _, d, _ in parts])
         for k in keys})


def _refuse_copies(paths: Sequence[Path]) -> None:
    """Two files with the same measurements (the same bytes once ungzipped, under any names or
    folders) would weigh their rows twice in the fit: an error naming both. Rows repeated
    inside one file are kept (repeated measurements of one shape)."""
    import zlib

    first: dict[str, Path] = {}
    for path in paths:
        try:
            digest = content_sha256(path)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraincastError(f"{path}: cannot be read ({exc})",
                                 hint="a CSV file, or a complete .csv.gz") from None
        other = first.setdefault(digest, path)
        if other != path:
            raise TraincastError(f"{path}: the same measurements as {other} (they would be read "
                                 "twice)", hint="keep one of the two")


def _shape_keys(fam: str) -> tuple[str, ...]:
    return SHAPE_COLUMNS.get(fam, ("B", "H")) + (RAN_TILE if fam in GEMM_FAMILIES else ())


RAN_TILE: tuple[str, str] = ("tile_m", "tile_n")
"""Shape keys of the output tile a measured product ran (``ran_tiles``; 0 = not named)."""
_SGEMM_TILE = re.compile(r"sgemm_(\d+)x(\d+)")


def ran_tiles(names: NDArray[Any]) -> tuple[F, F]:
    """``(T_m, T_n)`` per row from the cuBLAS kernel name (``volta_sgemm_128x64_tn``,
    ``maxwell_sgemm_32x128_nn``, ``sgemm_32x32x32_NN``), in the model's orientation: cuBLAS
    computes the row-major ``C[m x n]`` of ``linear`` and ``bmm`` as the column-major
    ``C^T``, so its ``AxB`` tile is ``A`` outputs along ``n`` and ``B`` along ``m``:
    ``T_m = B``, ``T_n = A``. A name without an SGEMM tile (empty: the shipped measuring
    script records none) gives ``(0, 0)``, and the model's fastest candidate prices the row.
    One regular-expression match per distinct name."""
    unique, inverse = np.unique(np.asarray([str(n or "") for n in names], dtype=str),
                                return_inverse=True)
    hits = [_SGEMM_TILE.search(u) for u in unique]
    tiles = np.array([(float(h.group(2)), float(h.group(1))) if h else (0.0, 0.0)
                      for h in hits], dtype=np.float64).reshape(-1, 2)
    return tiles[inverse, 0], tiles[inverse, 1]


def _read_file(con: Any, path: Path, fam: str, sample: int, seed: int) -> dict[str, Any]:
    """One measured file as numpy columns, read in one pass and checked in DuckDB
    (``try_cast``; errors name file, row and field: row 1 = the first row after the header, as
    in a trace's errors, also under ``sample``)."""
    from traincast.trace.adapters.base import duplicate_columns

    need = ("Device", "Latency", *SHAPE_COLUMNS.get(fam, ("B", "H")))
    try:
        read = {c.lower() for c in (*need, "Dtype", "Kernel Name")}
        for name, (first, second) in duplicate_columns(path).items():
            if name in read:  # DuckDB would read the first, silently
                raise TraincastError(f"{path}: the header names column {name!r} twice (fields "
                                     f"{first} and {second}): which one holds its values "
                                     "cannot be told", hint="rename or remove one of them")
        rel = con.sql(f"select * from {_sniffed_csv(con, path)}")
        missing = [c for c in need if c not in rel.columns]
        if missing:
            _uneven_row(path)
            raise TraincastError(f"{path}: missing column(s) {', '.join(missing)}",
                                 hint=f"{fam}/ files need {', '.join(need)}")
        numbers = ", ".join(f'try_cast("{c}" as double) as "{c}", "{c}" as "raw {c}"'
                            for c in need[1:])
        sampled = f" using sample reservoir({int(sample)} rows) repeatable ({int(seed)})" \
            if sample else ""
        if "Dtype" in rel.columns:
            other = con.sql('select row_number() over () as row, "Dtype" from rel').filter(
                "lower(trim(coalesce(\"Dtype\", ''))) not in ('fp32', 'float32')"
            ).limit(1).fetchall()
            if other:
                raise TraincastError(f"{path}: row {other[0][0]}: field 'Dtype' = "
                                     f"{other[0][1] or ''!r}: the kernel model is fitted to "
                                     "fp32 rows", hint="measure with scripts/measure_kernels.py "
                                                       "--dtype fp32")
        named = fam in GEMM_FAMILIES and "Kernel Name" in rel.columns
        name_col = ', "Kernel Name"' if named else ""
        raw = con.sql(f'select * from (select row_number() over () as "_row", "Device", '
                      f'{numbers}{name_col} from rel){sampled}').fetchnumpy()
    except TraincastError:
        raise
    except Exception as exc:  # duckdb raises its own error types for unreadable files
        _uneven_row(path)
        with open_bytes(path) as fh:
            if not fh.read(4096).strip():
                raise TraincastError(f"{path}: the file is empty (no header, no rows)",
                                     hint="measure again, or remove the file") from None
        raise TraincastError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})",
                             hint="the NeuSight kernel format: docs/model.md") from None
    if not len(raw["_row"]):
        raise TraincastError(f"{path}: no measured rows (a header only)",
                             hint="measure again, or remove the file")
    out: dict[str, Any] = {"Device": raw["Device"].astype(object), "_row": raw["_row"]}
    for c in need[1:]:
        values = np.ma.filled(raw[c], np.nan).astype(np.float64)
        lowest_ok = values >= 0 if c == "Padding" else values > 0
        bad = ~(np.isfinite(values) & lowest_ok)
        what = "not a number of 0 or more" if c == "Padding" else "not a positive number"
        if not bad.any():  # then the physical bounds: a typo in a unit or an exponent
            high = LATENCY_MAX_MS if c == "Latency" else SHAPE_MAX
            bad = values > high
            what = f"above {high:,.0f} ({'ms' if c == 'Latency' else 'elements'})"
            if c != "Latency" and not bad.any():
                bad, what = values != np.round(values), "not a whole number"
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            text = np.ma.filled(raw["raw " + c], "")[i]
            raise TraincastError(f"{path}: row {int(raw['_row'][i])}: field {c!r} = "
                                 f"{str(text)!r} is "
                                 f"{what}", hint="Latency in ms; shapes are sizes")
        out[c] = values
    if fam in GEMM_FAMILIES:
        names = (np.ma.filled(raw["Kernel Name"], "").astype(object) if named
                 else np.full(len(out["Latency"]), "", dtype=object))
        out["tile_m"], out["tile_n"] = ran_tiles(names)
    return out


def _sniffed_csv(con: Any, path: Path) -> str:
    """``read_csv`` of ``path`` that reads it as ``read_csv(path, all_varchar=true)`` does,
    with the dialect and columns DuckDB's sniffer finds in it written in and detection off
    (``sniff_csv``, run once; the call its ``Prompt`` writes, the file and names quoted): a
    query over a detecting ``read_csv`` sniffs the file again, and the ``read_csv`` relation
    of DuckDB's Python API sniffs it three times before it pins the same."""
    from traincast.trace.adapters.base import lit

    (delim, quote, escape, new_line, comment, skip, header, columns), = con.execute(
        "select Delimiter, Quote, Escape, NewLineDelimiter, Comment, SkipRows, HasHeader, "
        f"Columns from sniff_csv({lit(path)}, all_varchar=true)").fetchall()

    def text(value: str) -> str:  # sniff_csv says (empty) for no quote, escape or comment
        return lit("" if value == "(empty)" else value)

    names = ", ".join(f"{lit(c['name'])}: {lit(c['type'])}" for c in columns)
    return (f"read_csv({lit(path)}, auto_detect=false, delim={text(delim)}, "
            f"quote={text(quote)}, escape={text(escape)}, new_line={text(new_line)}, "
            f"skip={int(skip)}, comment={text(comment)}, header={str(bool(header)).lower()}, "
            f"columns={{{names}}}, all_varchar=true)")


def _uneven_row(path: Path) -> None:
    """An error naming the first row of ``path`` (plain or gzipped CSV) whose field count is
    not the header's, if there is one: a file DuckDB could not read, or read as one column,
    is then said row by row (the file is read again only on that error path)."""
    import csv
    import io

    try:
        with io.TextIOWrapper(open_bytes(path), encoding="utf-8", newline="") as f:
            rows = csv.reader(f)
            header = next(rows, [])
            for i, row in enumerate((r for r in rows if r), start=1):  # as DuckDB counts:
                if len(row) != len(header):  # blank lines are no rows
                    raise TraincastError(
                        f"{path}: row {i}: {len(row)} fields, the header has {len(header)}",
                        hint="each row needs one value per header column")
    except (OSError, EOFError, UnicodeDecodeError, csv.Error):  # EOFError: a cut .gz
        return


PEAK_MARGIN = 2.0
"""A product row may not run faster than this times its GPU's largest dense peak of any dtype;
a convolution row not faster than this times the larger of that peak and 4 x its fp32 peak
(its FLOPs are counted as a direct convolution's, and Winograd F(4x4, 3x3) runs a 3 x 3 one
with 4 times fewer multiplications: P4 rows reach 1.7 x its fp32 peak)."""
WINOGRAD_SAVING = 4.0
"""Multiplications of a direct 3 x 3 convolution over Winograd F(4x4, 3x3)'s: 144 / 36."""
BANDWIDTH_MARGIN = 10.0
"""A memory-bound row may not move bytes faster than this times its GPU's DRAM bandwidth (a
tensor that stays in L2 runs above DRAM's rate, L2 runs a few times DRAM's)."""


def _refuse_impossible(path: Path, fam: str, data: Mapping[str, Any], gpus: NDArray[Any],
                       catalog: Any) -> None:
    """An error naming the first row whose latency is too short for its shape on its GPU:
    ``2 m n k b / t`` above ``PEAK_MARGIN`` x the GPU's largest peak, or ``bytes / t`` above
    ``BANDWIDTH_MARGIN`` x its ``mem_bw_gbs`` (a shape or a latency mistyped; one such row
    would move the fitted parameters). A GPU without those catalog fields is not checked."""
    shape = {k: v for k, v in data.items() if k not in ("Device", "_row", "Latency")}
    product = FAMILIES[fam] in ("gemm", "conv")
    work = family_work(fam, shape)
    entries = {g: catalog.gpu(g) for g in set(gpus.tolist())}
    def peak(e: Any) -> float:  # the fastest a row may run on that GPU, FLOP/s
        tflops = {d: float(getattr(e, f"{d}_tflops", 0.0) or 0.0) for d in DTYPES}
        most = max(tflops.values())
        return 1e12 * (max(most, WINOGRAD_SAVING * tflops["fp32"]) if fam == "conv" else most)

    limit = per_gpu(gpus, {g: PEAK_MARGIN * peak(e) if product
                           else BANDWIDTH_MARGIN * 1e9 * float(e.mem_bw_gbs or 0.0)
                           for g, e in entries.items()})
    rate = work / (data["Latency"] * 1e-3)
    bad = (limit > 0) & (rate > limit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        unit, scale, margin = ("TFLOP/s", 1e12, PEAK_MARGIN) if product else \
            ("GB/s", 1e9, BANDWIDTH_MARGIN)
        raise TraincastError(
            f"{path}: row {int(data['_row'][i])}: field 'Latency' = {data['Latency'][i]:g} ms is "
            f"too short for the row's shape on {gpus[i]}: {rate[i] / scale:,.4g} {unit}, more "
            f"than {margin:g}x the {'peak' if product else 'memory bandwidth'} its catalog "
            f"entry allows ({limit[i] / margin / scale:,.4g} {unit})",
            hint="a shape or the latency mistyped (Latency in ms, shapes in elements)")


def _gpu_names(catalog: Any, path: Path, devices: NDArray[Any],
               rows: NDArray[Any]) -> NDArray[Any]:
    """Catalog GPU name per row, resolved once per distinct ``Device`` (``rows``: each row's
    number in the file, for the error that names the first with an unknown GPU)."""
    unique, first, inverse = np.unique(devices.astype(str), return_index=True,
                                       return_inverse=True)
    names = []
    for d, i in zip(unique.tolist(), first.tolist(), strict=True):
        try:
            names.append(catalog.gpu_name(str(d)))
        except KeyError:
            raise TraincastError(f"{path}: row {int(rows[i])}: field 'Device' = {d!r} is no "
                                 "catalog GPU", hint="add it (or an alias) with --catalog "
                                                     "FILE") from None
    return np.array(names, dtype=object)[inverse]


def per_gpu(gpus: NDArray[Any], values: Mapping[str, float], default: float = 0.0) -> F:
    """``values[g]`` for each row's GPU ``g`` (``default`` where absent), one lookup per GPU."""
    unique, inverse = np.unique(gpus.astype(str), return_inverse=True)
    return np.array([float(values.get(g, default)) for g in unique], dtype=np.float64)[inverse]


# ------------------------------------------------------------------------------------ model

@dataclass(frozen=True)
class Specs:
    """Per-row catalog fields of each row's GPU (``traincast.kernels`` inputs, named as the
    GPU entry's fields); ``mem_bps`` = ``mem_bw_gbs`` in bytes/s."""

    sms: F
    fp32_cores_per_sm: F
    sm_partitions: F
    boost_clock_mhz: F
    power_w: F
    process_nm: F
    mem_bps: F


def specs_of(gpus: NDArray[Any], catalog: Any) -> Specs:
    """Catalog fields of each row's GPU (0 where a field is not set)."""
    table = {g: catalog.gpu(g) for g in set(gpus.tolist())}

    def col(attr: str, scale: float = 1.0) -> F:
        return per_gpu(gpus, {g: float(getattr(e, attr, 0.0) or 0.0) * scale
                              for g, e in table.items()})

    return Specs(col("sms"), col("fp32_cores_per_sm"), col("sm_partitions"),
                 col("boost_clock_mhz"), col("power_w"), col("process_nm"),
                 col("mem_bw_gbs", 1e9))


def kernel_bytes(fam: str, shape: Mapping[str, F]) -> F:
    """DRAM bytes of a memory-bound row: binary element-wise ops read two ``B x H`` fp32
    tensors and write one (``12 B H``); unary and scalar ops, softmax and LayerNorm read one and
    write one (``8 B H``; LayerNorm's per-row mean and rstd, ``8 B``, are added)."""
    e = shape["B"] * shape["H"]
    if fam in ELEMENTWISE_BINARY:
        return 12.0 * e
    return 8.0 * e + (8.0 * shape["B"] if fam == "ln" else 0.0)


def gemm_dims(fam: str, shape: Mapping[str, F]) -> tuple[F, F, F, F]:
    """``(m, n, k, batch)``: ``linear`` = a ``B M x N`` input times ``N x K`` weights; ``bmm`` =
    ``B`` products of ``M x N`` by ``N x K``; ``conv`` = implicit GEMM ``m = B H_o W_o``,
    ``n = C_out``, ``k = C_in k^2`` with ``H_o = (H + 2 pad - k) / stride + 1``."""
    if fam == "conv":
        ksz, hw = shape["Kernel_Szie"], shape["Input_Size"]
        ho = np.floor((hw + 2.0 * shape["Padding"] - ksz) / shape["Stride"]) + 1.0
        return (shape["B"] * ho * ho, shape["Output_Channel"], shape["Input_Channel"] * ksz**2,
                np.ones_like(hw))
    if fam == "linear":
        return shape["B"] * shape["M"], shape["K"], shape["N"], np.ones_like(shape["B"])
    return shape["M"], shape["K"], shape["N"], shape["B"]


def predict_kernel_s(data: Kernels, spec: Specs, params: Mapping[str, float],
                     floor_s: F) -> F:
    """Predicted latency of every measured row as it was measured (module docstring,
    ``measured_s``): ``max(d r, phi d r + t_kernel)`` for products and convolutions (a library
    call: host work before the launch), ``max(d r, t_kernel)`` for memory-bound rows, with
    ``floor_s`` = each row's ``d r`` (``t_kernel``: module docstring of
    ``traincast.kernels``, section "the measured-kernel model")."""
    out = np.zeros(len(data))
    rate, clock = kernels.simt_rate_flops(spec, params), kernels.simt_clock_hz(spec, params)
    issue = kernels.simt_issue_ratio(spec)
    for fam in set(data.family.tolist()):
        sel = data.family == fam
        shape = {k: v[sel] for k, v in data.shape.items()}
        kind = FAMILIES[fam]
        if kind in ("gemm", "conv"):
            m, n, k, b = gemm_dims(fam, shape)
            r = rate[sel] * (params["conv_efficiency"] if kind == "conv" else 1.0)
            ran = (shape["tile_m"], shape["tile_n"]) if "tile_m" in shape and kind == "gemm" \
                else None
            choice = params.get(kernels.CHOICE_KEYS.get(fam, ""), 1.0)
            t = kernels.simt_gemm_time_s(m, n, k, b, spec.sms[sel], issue[sel], r, clock[sel],
                                         spec.mem_bps[sel], params, ran_tile=ran,
                                         choice=choice)
            if kind == "conv":
                wino = (shape["Kernel_Szie"] == 3) & (shape["Stride"] == 1)
                tw = kernels.winograd_conv_time_s(shape["B"], shape["Input_Size"],
                                                  shape["Input_Channel"],
                                                  shape["Output_Channel"], spec.sms[sel],
                                                  issue[sel], rate[sel], clock[sel],
                                                  spec.mem_bps[sel], params)
                t = np.where(wino, np.minimum(t, tw), t)
        else:
            t = kernels.memory_kernel_time_s(kernel_bytes(fam, shape), spec.mem_bps[sel],
                                             params[f"f_{kind}"])
        out[sel] = measured_s(floor_s[sel], t, params["pre_launch"]
                              if kind in ("gemm", "conv") else 0.0)
    return out


def measured_s(floor_s: F, kernel_s: F, pre_launch: float) -> F:
    """One op timed alone between two CUDA events: ``max(d r, phi d r + t_kernel)`` with
    ``phi`` = ``pre_launch``, the share of the host's dispatch spent before the kernel starts
    (0 for a native ATen kernel, launched early in its dispatch; fitted for library calls)."""
    return np.maximum(floor_s, pre_launch * floor_s + kernel_s)


# -------------------------------------------------------------------------------------- fit

def _floor_of_us(latency_s: F, work: F) -> float:
    """The median latency of the 5% of some rows that do the least work (at least one row; every
    row tied with the last one at the cut, so the file order does not choose), in µs: the time of
    an op whose kernel takes almost nothing, as it typically runs. Chosen by work, not by
    latency: the fastest 5% would be the luckiest calls of a host whose dispatch time varies from
    call to call."""
    known = np.isfinite(work)
    if not known.any():
        raise TraincastError("no row with a known size to take the host's floor from")
    ordered = np.sort(work[known])
    cut = ordered[max(1, len(ordered) // 20) - 1]
    return float(np.median(latency_s[known & (work <= cut)]) * 1e6)


def family_work(fam: str, shape: Mapping[str, F]) -> F:
    """Work of rows of one folder: ``2 m n k b`` FLOPs for a product or convolution
    (``gemm_dims``), bytes moved (``kernel_bytes``) for a memory-bound family."""
    if FAMILIES[fam] in ("gemm", "conv"):
        return kernels.gemm_flops(*gemm_dims(fam, shape))
    return kernel_bytes(fam, shape)


def _by_family(data: Kernels, kinds: tuple[str, ...]) -> F:
    """:func:`family_work` of the rows whose folder is of ``kinds`` (``FAMILIES``), NaN for the
    others."""
    out = np.full(len(data), np.nan)
    for fam in sorted(set(data.family.tolist())):
        if FAMILIES[fam] in kinds:
            sel = data.family == fam
            out[sel] = family_work(fam, {k: v[sel] for k, v in data.shape.items()})
    return out


def row_work(data: Kernels) -> F:
    """Work per row (:func:`family_work`: FLOPs of a product or convolution, bytes of a
    memory-bound row); it orders rows by size within a folder."""
    return _by_family(data, tuple(set(FAMILIES.values())))


def measured_floors_us(data: Kernels, work: F | None = None) -> dict[str, float]:
    """Per GPU: the median latency of the 5% of its binary element-wise rows (``add``, ``mul``,
    ``div``, ``pow``: the simplest ATen call, two tensors in, one out) that move the fewest
    bytes, in µs (stage 1, ``_floor_of_us``). A GPU without such rows has no entry (it takes
    the others' median)."""
    ew = np.isin(data.family, ELEMENTWISE_BINARY)
    work = row_work(data) if work is None else work
    return {g: _floor_of_us(data.latency_s[sel], work[sel])
            for g in sorted(set(data.gpu[ew].tolist())) for sel in [ew & (data.gpu == g)]}


DISPATCH_MIN_ROWS = 20
"""Rows of a folder on one GPU below which it gives that GPU no dispatch ratio (its least-work
5% would be a single row, one call's luck)."""
DISPATCH_FOLDERS = (*ELEMENTWISE_BINARY, *ELEMENTWISE_UNARY, "softmax", "ln", "linear", "bmm")
"""Folders whose least-work rows sit on the host's floor (no convolution of the data is that
short: a convolution takes ``linear``'s ratio, ``kernels.dispatch_kind``)."""


def dispatch_ratios(data: Kernels, floors_us: Mapping[str, float],
                    work: F | None = None) -> dict[str, float]:
    """Stage 1, per folder of ``DISPATCH_FOLDERS``: the median over the GPUs with a floor (and at
    least ``DISPATCH_MIN_ROWS`` of the folder's rows) of ``the median latency of the folder's
    least-work 5% / floor_us`` (``_floor_of_us``); ``elementwise``: the median of the
    element-wise folders' ratios (the ratio of an element-wise op the data does not name, and of
    a folder without its own)."""
    out: dict[str, float] = {}
    work = row_work(data) if work is None else work
    for fam in DISPATCH_FOLDERS:
        ratios = [_floor_of_us(data.latency_s[sel], work[sel]) / floor
                  for g, floor in floors_us.items()
                  if (sel := (data.gpu == g) & (data.family == fam)).sum() >= DISPATCH_MIN_ROWS]
        if ratios:
            out[fam] = float(np.median(ratios))
    return with_elementwise(out)


def with_elementwise(ratios: Mapping[str, float]) -> dict[str, float]:
    """``ratios`` (kind -> dispatch ratio) with ``elementwise``: the median of the element-wise
    kinds' ratios (``ELEMENTWISE_BINARY``, ``ELEMENTWISE_UNARY``), which an element-wise op of
    another kind takes; unchanged when none is given."""
    out = dict(ratios)
    ew = [out[f] for f in (*ELEMENTWISE_BINARY, *ELEMENTWISE_UNARY) if f in out]
    if ew:
        out["elementwise"] = float(np.median(ew))
    return out


def _floor_col(data: Kernels, floors_us: Mapping[str, float], default_us: float,
               ratios: Mapping[str, float] | None = None) -> F:
    """Each row's floor ``d r`` in seconds: its GPU's ``floor_us`` (``default_us`` where absent)
    times its folder's dispatch ratio (``kernels.dispatch_ratios``, as a profile's op takes it:
    a convolution ``linear``'s, a folder without its own the element-wise median)."""
    d = per_gpu(data.gpu, floors_us, default_us) * 1e-6
    return d * kernels.dispatch_ratios(data.family, ratios) if ratios else d


def fit(data: Kernels, catalog: Any, progress: PROGRESS | None = None,
        max_rows_per_group: int = 3000, seed: int = 0) -> dict[str, Any]:
    """Fitted parameters from measured rows (module docstring, stages 1-4):
    ``{"params": {...}, "floors_us": {gpu: µs}, "gpus": [...], "rows": n}`` (``params`` holds
    the dispatch ratios as ``dispatch_<kind>``: ``kernels.dispatch_table``)."""
    from scipy.optimize import least_squares

    say = progress or (lambda _msg: None)
    gpus = sorted(set(data.gpu.tolist()))
    work = row_work(data)  # ``work``: each row's size, given to both rather than made twice
    floors = measured_floors_us(data, work)
    if not floors:
        raise TraincastError(
            "the folders hold no binary element-wise kernel (add, mul, div or pow) of any GPU: "
            "every measured row holds its host's dispatch, and without these rows the fit "
            "cannot take it out (it would go into the kernels' own costs)",
            hint="measure them with the others: python scripts/measure_kernels.py OUT "
                 "--device cuda writes every family (docs/model.md, 'The measured-kernel model')")
    ratios = dispatch_ratios(data, floors, work)
    spec = specs_of(data.gpu, catalog)
    _check_specs(spec, data, gpus)
    default_us = default_floor_us(floors)
    floor_s = _floor_col(data, floors, default_us, ratios)
    say(f"stage 2: memory-bound bandwidth fractions ({plural(len(gpus), 'GPU')})")
    fractions = bandwidth_fractions(data, spec, floor_s)
    fitted = [*fractions]
    params: dict[str, float] = {**START, **{f"f_{fam}": UNFITTED_FRACTION
                                            for fam in kernels.MEMORY_FAMILIES}, **fractions}
    sub = _subsample(data, max_rows_per_group, seed)
    for keys, fams, stage in ((GEMM_KEYS, GEMM_FAMILIES, 3), (CONV_KEYS, ("conv",), 4)):
        part = sub.take(np.isin(sub.family, fams))
        if not len(part):
            continue
        say(f"stage {stage}: {', '.join(keys)} on {len(part):,} {'/'.join(fams)} rows")
        pspec = specs_of(part.gpu, catalog)
        pfloor = _floor_col(part, floors, default_us, ratios)

        def residuals(x: F, keys: Sequence[str] = keys, part: Kernels = part,
                      pspec: Specs = pspec, pfloor: F = pfloor) -> F:
            trial = {**params, **dict(zip(keys, x.tolist(), strict=True))}
            return np.log(predict_kernel_s(part, pspec, trial, pfloor) / part.latency_s)

        res = least_squares(residuals, [params[k] for k in keys],
                            bounds=([BOUNDS[k][0] for k in keys], [BOUNDS[k][1] for k in keys]),
                            loss="soft_l1", f_scale=LOSS_SCALE, x_scale="jac")
        params.update(dict(zip(keys, res.x.tolist(), strict=True)))
        fitted += keys
        if stage == 3:
            choices = library_choices(part, pspec, params)
            params.update(choices)
            fitted += choices
    params.update({f"dispatch_{k}": v for k, v in ratios.items()})
    fitted += [f"dispatch_{k}" for k in ratios]
    return {"params": params, "floors_us": floors, "default_floor_us": default_us,
            "gpus": gpus, "rows": len(data), "at_bound": at_bound(params),
            "unfitted": [k for k in params if k not in set(fitted)]}


def at_bound(params: Mapping[str, float]) -> list[str]:
    """The searched parameters the fit left on an edge of ``BOUNDS`` (within 0.1% of its
    width): the rows do not pin them down (few rows of their family, one GPU). A cost or count
    at a lower edge of 0 is an answer (none), not an edge."""
    tol = {k: 1e-3 * (hi - lo) for k, (lo, hi) in BOUNDS.items()}
    return [k for k, (lo, hi) in BOUNDS.items() if k in params
            and (hi - params[k] <= tol[k] or (lo > 0 and params[k] - lo <= tol[k]))]


def kinds_of(data: Kernels) -> NDArray[Any]:
    """Kernel kind per row (``FAMILIES`` of its folder)."""
    unique, inverse = np.unique(data.family.astype(str), return_inverse=True)
    return np.array([FAMILIES[f] for f in unique], dtype=object)[inverse]


def memory_bytes(data: Kernels) -> F:
    """``kernel_bytes`` of every memory-bound row, NaN for GEMM and convolution rows."""
    return _by_family(data, tuple(set(FAMILIES.values()) - {"gemm", "conv"}))


UNFITTED_FRACTION = 0.8
"""A memory-bound family's ``f`` where the rows hold none of its kernels (not fitted: a file of
the fit leaves it out, so the catalog it is merged over keeps its own)."""


def bandwidth_fractions(data: Kernels, spec: Specs, floor_s: F) -> dict[str, float]:
    """Stage 2: ``f_<family>`` = the median of ``B / (t M)`` over the family's rows at
    least 5x their floor ``d r``, clipped to [0.05, 1]; a family without such rows is left
    out."""
    kind, moved = kinds_of(data), memory_bytes(data)
    big = data.latency_s >= 5.0 * floor_s
    out = {}
    for fam in kernels.MEMORY_FAMILIES:
        sel = (kind == fam) & big
        frac = moved[sel] / (data.latency_s[sel] * spec.mem_bps[sel])
        if sel.any():
            out[f"f_{fam}"] = float(np.clip(np.median(frac), 0.05, 1.0))
    return out


def default_floor_us(floors_us: Mapping[str, float]) -> float:
    """The floor of a GPU without its own measurement: the median of the measured ones."""
    return float(np.median(list(floors_us.values()))) if floors_us else 0.0


def chip_groups(gpus: Sequence[str], catalog: Any) -> dict[str, list[str]]:
    """GPUs grouped by chip (equal ``sms``, ``fp32_cores_per_sm`` and ``boost_clock_mhz``):
    A100 PCIe 40 GB and 80 GB are one chip, left out together. Key: the first name."""
    groups: dict[tuple[float, ...], list[str]] = {}
    for g in sorted(gpus):
        e = catalog.gpu(g)
        key = tuple(float(getattr(e, f, 0) or 0)
                    for f in ("sms", "fp32_cores_per_sm", "boost_clock_mhz"))
        groups.setdefault(key, []).append(g)
    return {v[0]: v for v in groups.values()}


def _subsample(data: Kernels, n: int, seed: int) -> Kernels:
    """At most ``n`` rows per (family, GPU), seeded."""
    rng = np.random.default_rng(seed)
    keep = np.zeros(len(data), dtype=bool)
    for fam in sorted(set(data.family.tolist())):
        for g in sorted(set(data.gpu.tolist())):
            idx = np.flatnonzero((data.family == fam) & (data.gpu == g))
            keep[rng.choice(idx, n, replace=False) if len(idx) > n else idx] = True
    return data.take(keep)


def _check_specs(spec: Specs, data: Kernels, gpus: Sequence[str]) -> None:
    for g in gpus:
        i = int(np.flatnonzero(data.gpu == g)[0])
        fields = (("sms", spec.sms), ("fp32_cores_per_sm", spec.fp32_cores_per_sm),
                  ("boost_clock_mhz", spec.boost_clock_mhz), ("mem_bw_gbs", spec.mem_bps))
        missing = [name for name, col in fields if col[i] <= 0]
        if missing:
            raise TraincastError(f"GPU {g}: catalog entry lacks {', '.join(missing)}",
                                 hint="the kernel fit prices GPUs from these datasheet fields")


# ---------------------------------------------------------------------------- validation

def errors_by_family(data: Kernels, pred: F) -> dict[str, dict[str, float]]:
    """Per GPU and kernel kind (and ``memory``: the memory-bound kinds together): ``median`` and
    ``p90`` |error|, ``bias`` (the median signed error: < 0 = predicted too fast) and ``n``;
    plus ``sum``: the error of the GPU's summed time (``sum pred / sum measured - 1``)."""
    out: dict[str, dict[str, float]] = {}
    rel = pred / data.latency_s - 1.0
    kind = kinds_of(data)
    groups = {k: kind == k for k in ("gemm", "conv", *kernels.MEMORY_FAMILIES)}
    groups["memory"] = np.isin(kind, kernels.MEMORY_FAMILIES)
    for g in sorted(set(data.gpu.tolist())):
        row: dict[str, float] = {}
        on = data.gpu == g
        for name, members in groups.items():
            sel = on & members
            if sel.any():
                row[f"{name}_median"] = float(np.median(np.abs(rel[sel])))
                row[f"{name}_p90"] = float(np.quantile(np.abs(rel[sel]), 0.9))
                row[f"{name}_bias"] = float(np.median(rel[sel]))
                row[f"{name}_n"] = int(sel.sum())
        row["sum"] = float(pred[on].sum() / data.latency_s[on].sum() - 1.0)
        out[g] = row
    return out


def library_choices(data: Kernels, spec: Specs, params: Mapping[str, float]) -> dict[str, float]:
    """``rho`` per product family (``kernels.CHOICE_KEYS``): over the rows whose kernel name
    gives the tile the library ran, ``exp(median ln(t_ran / t_best))``, the tile it ran against
    the fastest candidate, both by the fitted model without the floor: what the library's own
    pick costs over the best candidate, which a GPU without measurements (no names) is priced
    with. 1 for a family without named rows."""
    out = {}
    zero = np.zeros(len(data))
    plain = {**params, **dict.fromkeys(kernels.CHOICE_KEYS.values(), 1.0)}
    t_ran = predict_kernel_s(data, spec, plain, zero)
    t_best = predict_kernel_s(unnamed(data), spec, plain, zero)
    for fam, key in kernels.CHOICE_KEYS.items():
        named = (data.family == fam) & (data.shape.get("tile_m", zero) > 0)
        out[key] = float(np.exp(np.median(np.log(t_ran[named] / t_best[named])))) \
            if named.any() else 1.0
    return out


def unnamed(data: Kernels) -> Kernels:
    """The rows without the tiles their kernels ran (``RAN_TILE`` set to 0): a GPU the model
    has not seen is priced with its fastest candidate tile, as the held-out GPU is."""
    shape = {k: (np.zeros_like(v) if k in RAN_TILE else v) for k, v in data.shape.items()}
    return Kernels(data.family, data.gpu, data.latency_s, shape)


def held_out_errors(result: Mapping[str, Any], held: Kernels,
                    catalog: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The errors (``errors_by_family``) of GPUs a fit (``fit``'s result) has not seen, priced
    without their kernel names: first each GPU with its own host's dispatch (``host_dispatch``
    of its own rows: the floor ``d`` and dispatch ratios of its least-work rows, which stand
    for what ``traincast calibrate`` times on that host; a GPU without floor rows takes the
    other held-out GPUs' median floor and the fitted ratios), then as a catalog without that
    calibration prices them (the fit's median floor and its ratios)."""
    test, pred, pred_d = held_out_predictions(result, held, catalog)
    return errors_by_family(test, pred), errors_by_family(test, pred_d)


def held_out_predictions(result: Mapping[str, Any], held: Kernels,
                         catalog: Any) -> tuple[Kernels, F, F]:
    """``(rows, predicted, predicted without calibration)`` of :func:`held_out_errors`: the
    held-out rows without their kernel names (``unnamed``) and each one's predicted latency,
    first with its own host's dispatch, then with the fit's median floor and ratios."""
    test = unnamed(held)
    fitted = kernels.dispatch_table(result["params"])
    floors = measured_floors_us(test)
    fallback_us = default_floor_us(floors) or result["default_floor_us"]
    floor_s = np.zeros(len(test))  # each GPU's rows: its own host's d r
    for g in sorted(set(test.gpu.tolist())):
        sel = test.gpu == g
        part = test.take(sel)
        own, host = host_dispatch(part, fitted, {g: floors[g]} if g in floors else {})
        floor_s[sel] = _floor_col(part, own, fallback_us, host)
    spec = specs_of(test.gpu, catalog)
    pred = predict_kernel_s(test, spec, result["params"], floor_s)
    pred_d = predict_kernel_s(test, spec, result["params"],
                              _floor_col(test, {}, result["default_floor_us"], fitted))
    return test, pred, pred_d


def host_dispatch(data: Kernels, fitted: Mapping[str, float],
                  floors_us: Mapping[str, float] | None = None
                  ) -> tuple[dict[str, float], dict[str, float]]:
    """The dispatch of the host that measured ``data`` (one GPU's rows): its floor
    (``floors_us`` when given, else ``measured_floors_us``) and its dispatch ratios (stage 1
    on its own rows, ``dispatch_ratios``), a kind it has fewer than ``DISPATCH_MIN_ROWS`` rows
    of keeping the ``fitted`` ratio (kind -> ratio; ``elementwise`` again the median of the
    element-wise kinds', ``with_elementwise``); rows without a floor (no binary element-wise
    rows): no floor and the ``fitted`` ratios. ``traincast calibrate`` measures the same on a
    CUDA host by timing each kind's one-element op alone (``calibration.host_floor_table``)."""
    floors = dict(measured_floors_us(data) if floors_us is None else floors_us)
    if not floors:
        return floors, dict(fitted)
    own = {k: v for k, v in dispatch_ratios(data, floors).items() if k != "elementwise"}
    return floors, with_elementwise({k: v for k, v in fitted.items() if k != "elementwise"}
                                    | own)


def leave_one_gpu_out(data: Kernels, catalog: Any, progress: PROGRESS | None = None,
                      max_rows_per_group: int = 3000) -> dict[str, Any]:
    """For each GPU (chip: ``chip_groups``): fit on the others, predict it (``held_out_errors``:
    with its own host's floor and dispatch ratios; ``default_floor`` repeats the errors with
    the others' median floor and fitted ratios, a catalog without calibration).
    Returns ``{"gpus": {gpu: errors_by_family row}, "default_floor": {...}, "fits": {chip:
    params}, "held": {chip: (rows, predicted latency)}}`` (``held_out_predictions``)."""
    say = progress or (lambda _msg: None)
    chips = chip_groups(sorted(set(data.gpu.tolist())), catalog)
    if len(chips) < 2:
        raise TraincastError(f"leave-one-GPU-out needs kernels of two GPUs at least; these rows "
                             f"are of {', '.join(sorted(set(data.gpu.tolist())))} alone",
                             hint="add a folder of other GPUs' kernels (NeuSight's five "
                                  "GPUs, docs/validation.md 'Measured kernels'): --kernels "
                                  "DIR --kernels OTHER")
    refuse_floorless_folds(data, catalog)
    out: dict[str, Any] = {"gpus": {}, "default_floor": {}, "fits": {}, "held": {}}
    for chip, members in chips.items():
        say(f"leave out {', '.join(members)}: fitting on the other GPUs")
        held = np.isin(data.gpu, members)
        result = fit(data.take(~held), catalog, progress=progress,
                     max_rows_per_group=max_rows_per_group)
        test, pred, pred_d = held_out_predictions(result, data.take(held), catalog)
        out["gpus"].update(errors_by_family(test, pred))
        out["default_floor"].update(errors_by_family(test, pred_d))
        out["fits"][chip] = result["params"]
        out["held"][chip] = (test, pred)
    return out


def refuse_floorless_folds(data: Kernels, catalog: Any) -> None:
    """Each fit of a leave-one-GPU-out run (two chips or more, ``chip_groups``) needs binary
    element-wise rows (the host floor, ``fit``) of a GPU it is not holding out: with such rows
    of one chip alone, its fold would have none. An error naming that chip, before any fit."""
    floored = set(data.gpu[np.isin(data.family, ELEMENTWISE_BINARY)].tolist())
    chips = chip_groups(sorted(set(data.gpu.tolist())), catalog)
    for members in chips.values() if len(chips) >= 2 else ():
        if floored and floored <= set(members):
            raise TraincastError(
                f"only {' and '.join(sorted(floored))} has binary element-wise kernels (add, "
                "mul, div or pow): held out, it leaves the fit on the other GPUs no host floor",
                hint="measure them on a second GPU too (scripts/measure_kernels.py writes every "
                     "family)")


HELD_OUT_KEYS = ("gemm_median", "gemm_bias", "conv_median", "conv_bias", "memory_median",
                 "memory_bias", "sum")
"""The errors of a leave-one-GPU-out run a fit keeps beside its parameters (``held_out``,
``held_out_uncalibrated``): what a user of a GPU the fit has not seen can expect
(``kernels.fit_trust``)."""


def held_out_table(errors: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per held-out GPU of ``errors`` (``errors_by_family`` rows: ``leave_one_gpu_out``'s
    ``gpus`` or ``default_floor``): its ``HELD_OUT_KEYS`` (fractions; ``*_median`` = median
    |error|, ``*_bias`` = median signed error, ``sum`` = error of the summed time), rounded to
    4 digits."""
    return {g: {k: round(float(row[k]), 4) for k in HELD_OUT_KEYS if k in row}
            for g, row in errors.items()}


def refuse_seen_chips(data: Kernels, unseen: Kernels, catalog: Any, where: str) -> None:
    """A chip (``chip_groups``) is fitted on or checked on, never both: an error naming the
    chips ``unseen`` (read from ``where``) shares with ``data``."""
    fitted, checked = set(data.gpu.tolist()), set(unseen.gpu.tolist())
    both = [" and ".join(chip) for chip in chip_groups(sorted(fitted | checked),
                                                        catalog).values()
            if set(chip) & fitted and set(chip) & checked]
    if both:
        raise TraincastError(f"--check {where}: kernels of {'; '.join(both)}, a chip --kernels "
                             "also has kernels of (it would be fitted on and checked on)",
                             hint="a chip is either fitted on (--kernels) or checked on "
                                  "(--check)")


def held_out_records(data: Kernels, result: Mapping[str, Any], catalog: Any,
                     unseen: Kernels | None = None, progress: PROGRESS | None = None
                     ) -> dict[str, dict[str, dict[str, float]]]:
    """The two held-out records of a fit (``result`` of ``fit`` on ``data``), each a
    ``held_out_table``: ``held_out`` (each GPU priced with its own host's dispatch) and
    ``held_out_uncalibrated`` (the fit's median floor and ratios); the GPUs of ``data`` left out
    in turn (``leave_one_gpu_out``, when it holds two chips or more) and those of ``unseen``
    (GPUs no fold has seen) priced by the fit itself (``held_out_errors``)."""
    own: dict[str, Any] = {}
    default: dict[str, Any] = {}
    if len(chip_groups(result["gpus"], catalog)) >= 2:
        loo = leave_one_gpu_out(data, catalog, progress=progress)
        own, default = loo["gpus"], loo["default_floor"]
    if unseen is not None:
        more, more_default = held_out_errors(result, unseen, catalog)
        own, default = {**own, **more}, {**default, **more_default}
    held, uncalibrated = HELD_OUT_RECORDS
    return {held: held_out_table(own), uncalibrated: held_out_table(default)}


def fit_document(result: Mapping[str, Any], directory: str | Path | Sequence[str | Path],
                 command: str,
                 held_out: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
                 ) -> dict[str, Any]:
    """The ``[kernel_model]`` table of a catalog file for a fit (``traincast calibrate
    --kernels``): the parameters its rows fitted (``unfitted`` ones, of families the rows do
    not hold, are left out, so the catalog it is merged over keeps its own), measured floors
    (and their median, when there are any), their source and the command that made them,
    and where the fit was also checked on GPUs held out of it, ``held_out`` (each with its own
    host's dispatch) and ``held_out_uncalibrated`` (the fit's median floor and ratios), each a
    ``held_out_table``: ``held_out = {"held_out": {...}, "held_out_uncalibrated": {...}}``."""
    folders = [directory] if isinstance(directory, (str, Path)) else list(directory)
    named = [data_title(d) or f"a folder named {Path(d).name}" for d in folders]
    doc: dict[str, Any] = {
        "source": f"fitted to {result['rows']:,} measured kernels; data: {'; '.join(named)}; "
                  f"GPUs: {', '.join(result['gpus'])}; docs/model.md, 'Kernel model'",
        "command": command,
        "fitted_on": list(result["gpus"]),
        "params": {k: float(f"{v:.6g}") for k, v in result["params"].items()
                   if k not in set(result.get("unfitted", ()))},
        "floors_us": {k: round(float(v), 3) for k, v in result["floors_us"].items()},
        "default_floor_us": round(float(result["default_floor_us"]), 3)}
    doc.update({key: table for key, table in (held_out or {}).items() if table})
    return {"kernel_model": doc}


def data_title(directory: str | Path) -> str:
    """The title of a folder of measured kernels: the first heading of its README.md (the
    data set's own name, ``Measured GPU kernels: NeuSight's training set (...)``), else
    ``""``: a fit's source names the data, not a path of the machine that ran it."""
    readme = Path(directory) / "README.md"
    try:
        lines = readme.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    return next((ln.lstrip("#").strip() for ln in lines if ln.startswith("#")), "")


def write_fit_checks(path: str | Path) -> None:
    """Fail before any work when ``-o`` cannot be written (a folder, a missing folder)."""
    target = Path(path)
    if target.is_dir():
        raise TraincastError(f"{target}: is a folder", hint="-o names the catalog file to write")
    if not target.parent.exists():
        raise TraincastError(f"{target.parent}: no such folder", hint="create it first")


def write_fit(path: str | Path, document: Mapping[str, Any]) -> None:
    """Write ``document`` as TOML (tomli-w), whole or not at all (``files.write_text_whole``)."""
    import tomli_w

    write_fit_checks(path)
    header = ("# traincast measured-kernel model (docs/model.md, 'Kernel model'): merge it with "
              "--catalog FILE\n")
    write_text_whole(path, header + tomli_w.dumps(document))
