"""Read a study folder (what ``traincast study`` writes) and a validate JSON.

Every file is optional: the report shows what is there and says what is missing. A file that
is there but unreadable is an error naming the file (and the case or field). Tables (CSV,
Parquet) are read with Arrow, so a study of a million jobs reads in seconds.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traincast.errors import TraincastError
from traincast.model import COMPONENTS

CSV_FILES = ("whatif_jobs.csv", "recommend.csv")
_OBJ, _LIST, _NUM, _STR, _BOOL = "an object", "a list", "a number", "a string", "true or false"
_TRACE = "an object or a string"  # a study's trace, or an earlier study's name of it
FIELD_SHAPES: dict[str, dict[str, str]] = {
    "study.json": {"trace": _TRACE, "sample": _BOOL, "jobs": _NUM, "db": _STR,
                   "catalog_files": _LIST, "overlap": _NUM, "scenarios": _LIST,
                   "scenario_definitions": _OBJ, "prices": _OBJ, "assumed_workload": _OBJ,
                   "timings_s": _OBJ, "report": _STR},
    "summary.json": {"sample": _BOOL, "sentences": _LIST, "numbers": _OBJ, "by_source": _LIST},
    "characterize.json": {"jobs": _NUM, "gpus": _NUM, "gpu_time_s": _NUM, "flags": _OBJ,
                          "default_hardware": _OBJ, "by_architecture": _OBJ,
                          "by_gpu_type": _OBJ, "cdf": _OBJ, "breakdown": _OBJ},
    "whatif.json": {"jobs": _NUM, "unpredicted": _OBJ, "scenarios": _OBJ, "definitions": _OBJ},
    "recommend.json": {"jobs": _NUM, "candidates": _LIST, "left_out": _OBJ,
                       "unpriced_nodes": _LIST, "prices": _OBJ, "summary": _OBJ},
}
"""What each top-level field of a study's JSON files holds, as ``study`` writes them (null
allowed): a file whose field holds another kind of value is an error naming the file and
field, not a failure deep in the report."""
_KINDS = {_OBJ: (dict,), _LIST: (list,), _NUM: (int, float), _STR: (str,), _BOOL: (bool,),
          _TRACE: (dict, str)}
JSON_FILES = tuple(FIELD_SHAPES)
"""The JSON files of a study folder."""
JOBS_FILE = "jobs.parquet"
BREAKDOWN_COLUMNS = ("data_io_s", "compute_flop_s", "compute_mem_s", "comm_s")
UNKNOWN = "unknown"
TEXT_COLUMNS = ("scenario", "user", "workload", "architecture", "node", "gpu", "gpu_type")


def floats(table: pa.Table | None, name: str) -> np.ndarray:
    """A numeric (or boolean, or numeric-text) column as float64; NaN where null or absent."""
    if table is None:
        return np.empty(0)
    if name not in table.column_names:
        return np.full(table.num_rows, np.nan)
    col = table.column(name)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = pc.if_else(pc.equal(pc.utf8_trim_whitespace(col), ""), None, col)
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        try:
            col = pc.cast(col, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return np.full(table.num_rows, np.nan)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


def labels(table: pa.Table | None, name: str) -> np.ndarray:
    """A label column as strings (object array); null or empty -> ``unknown``."""
    if table is None:
        return np.empty(0, dtype=object)
    if name not in table.column_names:
        return np.full(table.num_rows, UNKNOWN, dtype=object)
    col = pc.fill_null(pc.cast(table.column(name), pa.string()), "")
    col = pc.if_else(pc.equal(col, ""), UNKNOWN, col)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


@dataclass
class Study:
    """The files of one study folder; ``None`` where a file is absent."""

    folder: Path
    json: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    tables: dict[str, pa.Table | None] = field(default_factory=dict)
    jobs: pa.Table | None = None

    def get(self, name: str) -> dict[str, Any]:
        """A JSON file's object, ``{}`` when absent."""
        return self.json.get(name) or {}

    def floats(self, name: str) -> np.ndarray:
        """A numeric column of jobs.parquet (NaN where null or when the column is absent)."""
        return floats(self.jobs, name)

    def labels(self, name: str) -> np.ndarray:
        """A label column of jobs.parquet (``unknown`` where null or empty)."""
        return labels(self.jobs, name)

    def parts(self) -> dict[str, np.ndarray]:
        """The predicted breakdown of every job: ``{component: seconds}``."""
        return {c: self.floats(col) for c, col in zip(COMPONENTS, BREAKDOWN_COLUMNS,
                                                       strict=True)}

    @property
    def has_breakdown(self) -> bool:
        return self.jobs is not None and all(c in self.jobs.column_names
                                             for c in BREAKDOWN_COLUMNS)

    @property
    def present(self) -> list[str]:
        files = [n for n, v in {**self.json, **self.tables}.items() if v is not None]
        return files + ([JOBS_FILE] if self.jobs is not None else [])

    @property
    def missing(self) -> list[str]:
        every = (*JSON_FILES, *CSV_FILES, JOBS_FILE)
        return [n for n in every if n not in self.present]


def read_json(path: Path) -> dict[str, Any]:
    """One JSON object from ``path``; TraincastError naming the file otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TraincastError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise TraincastError(f"{path}: not UTF-8 text") from None
    if not isinstance(data, dict):
        raise TraincastError(f"{path}: expected one JSON object, got {type(data).__name__}")
    return data


def _checked(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` of a study file ``path`` whose top-level fields hold what
    :data:`FIELD_SHAPES` says; else a TraincastError naming the file and field."""
    for key, kind in FIELD_SHAPES.get(path.name, {}).items():
        value = data.get(key)
        ok = value is None or (isinstance(value, _KINDS[kind])
                               and (kind == _BOOL or not isinstance(value, bool)))
        if not ok:
            raise TraincastError(f"{path}: field {key!r} must be {kind}, as a study writes it, "
                                 f"got {json.dumps(value)[:40]}",
                                 hint="run the study again: traincast study TRACE -o FOLDER")
    return data


def read_csv(path: Path) -> pa.Table:
    """A CSV file with a header row; types inferred, except identifiers and names (text)."""
    import pyarrow.csv as pacsv

    try:
        with path.open(newline="", encoding="utf-8") as fh:
            names = next(csv.reader(fh), [])
        opts = pacsv.ConvertOptions(column_types={n: pa.string() for n in names
                                                  if n in TEXT_COLUMNS or n.endswith("_id")})
        return pacsv.read_csv(path, convert_options=opts)
    except (pa.ArrowInvalid, UnicodeDecodeError, csv.Error) as exc:
        raise TraincastError(f"{path}: unreadable CSV ({exc})") from None


def load_study(folder: str | Path) -> Study:
    """The files of a study folder (missing ones are ``None``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TraincastError(f"{folder}: " + ("a file, not a study folder" if folder.exists()
                                              else "no such study folder"),
                             hint="--study takes the folder `traincast study -o DIR` wrote "
                                  "(run it first); a trace: traincast study TRACE")
    study = Study(folder=folder)
    for name in JSON_FILES:
        path = folder / name
        study.json[name] = _checked(path, read_json(path)) if path.is_file() else None
    for name in CSV_FILES:
        path = folder / name
        study.tables[name] = read_csv(path) if path.is_file() else None
    path = folder / JOBS_FILE
    if path.is_file():
        import pyarrow.parquet as pq

        try:
            study.jobs = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise TraincastError(f"{path}: not a readable Parquet file ({exc})") from None
    if not study.present:
        raise TraincastError(f"{folder}: none of the study files is there "
                             f"({', '.join((*JSON_FILES, *CSV_FILES, JOBS_FILE))})",
                             hint="run `traincast study -o DIR` first")
    return study


def load_validate(path: str | Path) -> dict[str, Any]:
    """A validate JSON: ``{"cases": [{model, arch, batch_size, measured_s, predicted_s,
    error}...], "median_abs_error", "p90_abs_error"}``; each case's times checked."""
    path = Path(path)
    if not path.is_file():
        raise TraincastError(f"{path}: validate file not found",
                             hint="write it with `traincast validate --json > FILE`")
    data = read_json(path)
    cases = data.get("cases")
    if not isinstance(cases, list):
        other = ("the JSON of `traincast validate --kernels` (kernel errors by GPU), not of a "
                 "training-step validation" if "gpus" in data else
                 "no 'cases' list of measured and predicted steps")
        raise TraincastError(f"{path}: {other}",
                             hint="--validate takes `traincast validate --json > FILE` (the "
                                  "steps measured on this machine); the kernel errors are in "
                                  "`traincast validate --kernels DIR`")
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise TraincastError(f"{path}: cases[{i}] must be an object")
        for key in ("measured_s", "predicted_s"):
            value = case.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value <= 0:
                raise TraincastError(f"{path}: cases[{i}] field {key!r} must be a positive "
                                     f"number of seconds, got {value!r}")
    return data
