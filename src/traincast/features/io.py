"""Read and write a features record: what ``traincast profile -o FILE`` writes (JSON, Parquet).

JSON holds the whole record (with the per-op table under ``ops`` when profiled with ``--ops``).
Parquet holds the per-op table, one row per op (``op, phase, flops, bytes_read, bytes_written,
bound, dtype, shapes, recurrent``), with the rest of the record as JSON in the file's schema
metadata under the key ``traincast.features``; both are accepted by ``traincast predict
--features``. A ``recurrent`` tag is checked on reading (file, row and field named).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from traincast.bounds import BATCH_MAX, BYTES_MAX, COUNT_MAX, FLOPS_MAX
from traincast.errors import NoSuchFileError, TraincastError, clip, did_you_mean
from traincast.features.recurrent import parse_call, parse_shapes
from traincast.files import write_text_whole, write_whole
from traincast.jobs import FEATURES, STEP_COLUMNS

REQUIRED = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes")
PARQUET_KEY = b"traincast.features"
OP_COLUMNS = ("op", "phase", "flops", "bytes_read", "bytes_written", "bound", "dtype", "shapes",
              "recurrent")
OP_NUMBERS: dict[str, float] = {"flops": FLOPS_MAX, "bytes_read": BYTES_MAX,
                                "bytes_written": BYTES_MAX, "count": COUNT_MAX}
"""The numbers of a per-op row and their bounds, as a trace's features are bounded (a row
without one: 0, ``count`` 1)."""
RECORD_KEYS = (*FEATURES, *STEP_COLUMNS, "amp", "attention", "batch_size", "bytes_compute_bound",
               "bytes_memory_bound_fused", "dtype", "embedding_rows_touched",
               "embedding_tables_shared", "flops_forward", "flops_total", "memory_bytes",
               "method", "model", "notes", "ops", "optimizer", "params", "params_dense",
               "params_embedding", "seq_len",
               # the shipped zoo profiles' own (traincast.zoo.profiles)
               "amp_dtype", "bytes_memory_bound_amp", "bytes_memory_bound_fused_amp",
               "description", "family", "flops_compute_bound_amp", "flops_forward_per_sample",
               "flops_train_per_sample", "input_shape", "memory_bytes_amp", "published_params",
               "source")
"""The keys of the record ``traincast profile`` writes (docs/profile.md). A features file may
hold others (notes of its own); one spelled like one of these (``embeding_bytes_touched``) is
an error, as it would be ignored."""
TYPO_CUTOFF = 0.85
"""How alike (``difflib`` ratio) an unknown key must be to a known one to be refused as its
misspelling."""
OP_BOUNDS = ("compute", "memory")
"""The values of a per-op row's ``bound``."""
DIM_MAX = 2 ** 31 - 1
"""The largest dimension of a recorded input shape (a tensor dimension is a 32-bit index)."""


def _read_parquet(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise TraincastError(f"{path}: not a readable Parquet file ({exc})") from None
    meta = (table.schema.metadata or {}).get(PARQUET_KEY)
    if meta is None:
        raise TraincastError(f"{path}: Parquet file without a traincast features record",
                             hint="write it with `traincast profile MODEL -o F.parquet`")
    try:
        data = json.loads(meta)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraincastError(f"{path}: its traincast features record (schema metadata "
                             f"{PARQUET_KEY.decode()}) is not valid JSON ({exc})",
                             hint="write it with `traincast profile MODEL -o F.parquet`",
                             ) from None
    if not isinstance(data, dict):
        raise TraincastError(f"{path}: its traincast features record (schema metadata "
                             f"{PARQUET_KEY.decode()}) is {type(data).__name__} JSON, not an "
                             "object of features",
                             hint="write it with `traincast profile MODEL -o F.parquet`")
    missing = [c for c in OP_COLUMNS if c != "recurrent" and c not in table.column_names]
    if missing:
        raise TraincastError(f"{path}: the per-op table has no column(s) {', '.join(missing)}",
                             hint=f"a Parquet features file holds {', '.join(OP_COLUMNS[:-1])}")
    # a column a row has no value in (the recurrent tag of the other ops) is left out, as JSON
    data["ops"] = [{k: v for k, v in row.items() if v is not None or k != "recurrent"}
                   for row in table.to_pylist()]
    return data


def load_features(path: str | Path) -> dict[str, Any]:
    """The features record in ``path`` (JSON, or Parquet by extension); checks required keys."""
    path = Path(path)
    if not path.is_file():
        raise NoSuchFileError(path, "features")
    if path.suffix.lower() in (".parquet", ".pq"):
        data = _read_parquet(path)
    else:
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))  # a BOM is no JSON
        except json.JSONDecodeError as exc:
            raise TraincastError(f"{path}: not valid JSON ({exc})",
                                 hint="write it with `traincast profile MODEL --json -o F`",
                                 ) from None
    if not isinstance(data, dict):
        raise TraincastError(f"{path}: expected a JSON object of features")
    if "amp" in data and not isinstance(data["amp"], bool):
        raise TraincastError(f"{path}: field 'amp' must be true or false, got {data['amp']!r}")
    check_record(data, str(path))  # a misspelled field first: it may be a required one
    check_totals(data, str(path))  # a file as profile wrote it (the API may scale a table)
    for key in REQUIRED:
        if key not in data:
            raise TraincastError(f"{path}: missing field {key!r}",
                                 hint=f"a features file needs {', '.join(REQUIRED)}")
    for key in (*REQUIRED, "embedding_bytes_touched", "embedding_allreduce_bytes",
                "input_bytes"):
        value = data.get(key, 0)
        if key == "embedding_allreduce_bytes" and value is None:
            continue  # null: the same as embedding_bytes_touched
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise TraincastError(f"{path}: field {key!r} must be a non-negative number, "
                                 f"got {value!r}")
    return data


def _refuse_misspelled(data: Mapping[str, Any], where: str | Path) -> None:
    """A key that is none of :data:`RECORD_KEYS` but reads like one (``difflib`` ratio >=
    :data:`TYPO_CUTOFF`, in lower case) is an error naming ``where`` (the file), the key and
    the one it resembles (:func:`~traincast.errors.did_you_mean`)."""
    for key in data:
        if key in RECORD_KEYS or not isinstance(key, str):
            continue
        if near := did_you_mean(key, RECORD_KEYS, cutoff=TYPO_CUTOFF):
            raise TraincastError(f"{where}: unknown field {key!r} (would be ignored; "
                                 f"{near.strip()})",
                                 hint="the fields of a features file: docs/profile.md")


def check_record(record: Mapping[str, Any], where: str) -> None:
    """The parts of a profile beside its feature values must read as a profile writes them:
    ``batch_size`` a whole number from 1 to ``BATCH_MAX``, ``memory_bytes`` a table of parts
    (weights, grads, optimizer, activations), each a number of bytes from 0 to ``BYTES_MAX``,
    and the per-op table as :func:`check_ops` says; else a :class:`TraincastError` naming
    ``where`` and the field; so is a misspelled field (:func:`_refuse_misspelled`). Missing
    parts pass."""
    _refuse_misspelled(record, where)
    batch = record.get("batch_size")  # a count: bounded as every count is
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, Integral)
                              or not 1 <= batch <= BATCH_MAX):
        raise TraincastError(f"{where}: batch_size must be a whole number of at least 1, got "
                             f"{_short(batch)}",
                             hint="profile the model again (traincast profile)")
    memory = record.get("memory_bytes")
    if memory is not None:
        if not isinstance(memory, Mapping):
            raise TraincastError(f"{where}: memory_bytes must be a table of parts (weights, "
                                 f"grads, optimizer, activations), got {_short(memory)}")
        for part, value in memory.items():
            if isinstance(value, bool) or not isinstance(value, Real) \
                    or not 0 <= value <= BYTES_MAX:
                raise TraincastError(f"{where}: memory_bytes.{part} must be a number of "
                                     f"bytes from 0 to {BYTES_MAX:g}, got {_short(value)}")
    check_ops(record.get("ops"), where)


TOTALS_RTOL = 0.01
"""How far a record's totals may be from the sums of its per-op table (:func:`check_totals`)."""


def check_totals(record: Mapping[str, Any], where: str) -> None:
    """A record's per-op table and its totals describe one step, as ``profile`` writes them:
    ``n_ops`` = the ops the table runs (each row's ``count``, 1 by default, summed: as
    ``predict`` counts the host's issues), ``flops_compute_bound`` = the compute-bound rows'
    ``flops x count`` summed, ``bytes_memory_bound`` = the memory-bound rows' ``(bytes_read +
    bytes_written) x count`` summed (within :data:`TOTALS_RTOL`). A table cut, merged or edited
    apart from its totals would price another step than the totals say: a
    :class:`TraincastError` naming ``where`` and the field. A record without the table, or
    without a total, passes. Asked of a features file (:func:`load_features`); ``predict()``
    given features and a table on purpose scales the table to them, as a trace's workload."""
    ops = record.get("ops")
    if not isinstance(ops, list) or not ops:
        return
    from traincast.roofline import op_runs, table_features  # roofline reads ops: io cannot lead

    n_ops, runs = record.get("n_ops"), op_runs(ops)
    if isinstance(n_ops, Integral) and not isinstance(n_ops, bool) and n_ops != runs:
        raise TraincastError(f"{where}: field 'n_ops' is {n_ops}, but the per-op table ('ops') "
                             f"runs {runs:g} ops (its rows' counts summed)",
                             hint="profile the model again, or leave 'ops' out to price the "
                                  "step by its totals")
    sums = table_features(ops)  # empty where some row has no bound: predict's own split
    for key, total in sums.items():
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, Real):
            continue
        if abs(total - float(value)) > TOTALS_RTOL * max(abs(float(value)), total, 1.0):
            kind = key.split("_", 1)[1].replace("_", "-")
            raise TraincastError(f"{where}: field {key!r} is {float(value):.4g}, but the per-op "
                                 f"table's {kind} rows sum to {total:.4g}",
                                 hint="profile the model again, or leave 'ops' out to price "
                                      "the step by its totals")


def check_ops(ops: Any, where: str) -> None:
    """A per-op table must be a list of rows, each a table with the op's name (``op``), numbers
    within :data:`OP_NUMBERS` (finite, from 0 to the bound), a ``bound`` of :data:`OP_BOUNDS`,
    ``shapes`` as ``"64x512;512x1024"`` with whole dimensions up to :data:`DIM_MAX`, and a
    ``recurrent`` tag that parses: else a :class:`TraincastError` naming ``where`` (the file),
    the row (1-based) and the field. None (no table) passes."""
    if ops is None:
        return
    if not isinstance(ops, list):
        raise TraincastError(f"{where}: field 'ops' must be a list of op rows, got "
                             f"{_short(ops)}")
    for i, row in enumerate(ops, 1):
        at = f"{where}: ops row {i}"
        if not isinstance(row, Mapping):
            raise TraincastError(f"{at}: must be a table of the op's fields, got {_short(row)}")
        if not isinstance(row.get("op"), str) or not row["op"]:
            raise TraincastError(f"{at}: field 'op' must be the op's name (aten::mm, ...), got "
                                 f"{_short(row.get('op'))}")
        for key, high in OP_NUMBERS.items():
            value = row.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or not 0 <= value <= high:
                raise TraincastError(f"{at}: field {key!r} must be a number from 0 to "
                                     f"{high:g}, got {_short(value)}", hint="check the exponent")
        if "bound" in row and row["bound"] not in OP_BOUNDS:
            raise TraincastError(f"{at}: field 'bound' must be compute or memory, got "
                                 f"{_short(row['bound'])}")
        _check_shapes(row.get("shapes", ""), at)
        if spec := row.get("recurrent"):
            try:
                parse_call(str(spec))
            except ValueError as exc:
                raise TraincastError(f"{at}: field 'recurrent': {exc}",
                                     hint="the tag `traincast profile --ops` writes: "
                                     "\"lstm call=0 seq=35 batch=20 input=650 hidden=650 "
                                     "layers=2 directions=1 bias=1 dropout=1\"") from None


def _check_shapes(shapes: Any, at: str) -> None:
    """``shapes`` of a per-op row: text of whole dimensions from 0 to :data:`DIM_MAX`."""
    if shapes is None:
        return
    try:
        dims = parse_shapes(shapes) if isinstance(shapes, str) else None
    except ValueError:
        dims = None
    if dims is None or any(not 0 <= d <= DIM_MAX for shape in dims for d in shape):
        raise TraincastError(f"{at}: field 'shapes' must be the inputs' shapes as "
                             f"\"64x512;512x1024\" (whole dimensions up to {DIM_MAX:,}), got "
                             f"{_short(shapes)}")


def _short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters for an error line."""
    return clip(repr(value), 60)


def write_features(record: dict[str, Any], path: str | Path) -> Path:
    """Write ``record`` to ``path``: Parquet (the per-op table + the record as metadata) when
    the name ends in ``.parquet``, else JSON; whole or not at all (``files.write_whole``)."""
    path = Path(path)
    if path.suffix.lower() not in (".parquet", ".pq"):
        return write_text_whole(path, json.dumps(record, indent=2) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    ops = record.get("ops")
    if ops is None:
        raise TraincastError(f"{path}: a Parquet features file holds the per-op table",
                             hint="profile without --no-ops")
    table = pa.table({c: [row.get(c) for row in ops] for c in OP_COLUMNS})
    meta = {k: v for k, v in record.items() if k != "ops"}
    table = table.replace_schema_metadata({PARQUET_KEY: json.dumps(meta).encode()})
    return write_whole(path, lambda tmp: pq.write_table(table, tmp))
