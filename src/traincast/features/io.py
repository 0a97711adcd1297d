"""Read a features record (the JSON that ``traincast profile --json -o FILE`` writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traincast.errors import TraincastError

REQUIRED = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes")


def load_features(path: str | Path) -> dict[str, Any]:
    """The features record in ``path`` (JSON); checks the required keys and their types."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TraincastError(f"{path}: features file not found") from None
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
    for key in (*REQUIRED, "embedding_bytes_touched", "input_bytes"):
        value = data.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise TraincastError(f"{path}: field {key!r} must be a non-negative number, "
                                 f"got {value!r}")
    return data
