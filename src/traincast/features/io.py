"""Read and write a features record: what ``traincast profile -o FILE`` writes (JSON, Parquet).

JSON holds the whole record (with the per-op table under ``ops`` when profiled with ``--ops``).
Parquet holds the per-op table, one row per op (``op, phase, flops, bytes_read, bytes_written,
bound, dtype, shapes, recurrent``), with the rest of the record as JSON in the file's schema
metadata under the key ``traincast.features``; both are accepted by ``traincast predict
--features``. A ``recurrent`` tag is checked on reading (file, row and field named).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traincast.errors import NoSuchFileError, TraincastError
from traincast.features.recurrent import parse_call
from traincast.files import write_text_whole, write_whole

REQUIRED = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes")
PARQUET_KEY = b"traincast.features"
OP_COLUMNS = ("op", "phase", "flops", "bytes_read", "bytes_written", "bound", "dtype", "shapes",
              "recurrent")


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
    data = json.loads(meta)
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
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise TraincastError(f"{path}: not valid JSON ({exc})",
                                 hint="write it with `traincast profile MODEL --json -o F`",
                                 ) from None
    if not isinstance(data, dict):
        raise TraincastError(f"{path}: expected a JSON object of features")
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
    for i, row in enumerate(data.get("ops") or []):
        spec = row.get("recurrent") if isinstance(row, dict) else None
        if spec:
            try:
                parse_call(str(spec))
            except ValueError as exc:
                raise TraincastError(f"{path}: ops row {i + 1}, field 'recurrent': {exc}",
                                     hint="the tag `traincast profile --ops` writes: "
                                     "\"lstm call=0 seq=35 batch=20 input=650 hidden=650 "
                                     "layers=2 directions=1 bias=1 dropout=1\"") from None
    return data


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
