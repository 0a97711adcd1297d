"""traincast: characterize deep-learning training jobs and forecast their iteration time.

Public API (the CLI is a thin layer over it)::

    import traincast
    cat = traincast.load_catalog()
    traincast.predict({"flops_compute_bound": 2.4e13, "bytes_memory_bound": 4e10,
                       "weight_bytes": 1e8}, arch="ps-worker", workers=8, ps=2,
                      node="pai-v100-pcie")

Heavier parts (profiling needs torch) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from traincast.hardware.catalog import Catalog, CatalogError, load_catalog
from traincast.model import COMPONENTS, Breakdown
from traincast.predict import predict, predict_table

__version__ = "0.1.0"

# name -> module that defines it (imported lazily, so `import traincast` never needs torch)
_LAZY = {
    "profile": "traincast.features.profile",
    "profile_model": "traincast.features.profile",
    "ingest": "traincast.trace.store",
    "load_jobs": "traincast.trace.store",
    "characterize": "traincast.characterize",
    "whatif": "traincast.whatif",
    "recommend": "traincast.recommend",
    "study": "traincast.study",
    "calibrate": "traincast.calibrate",
    "validate": "traincast.validate",
    "plan": "traincast.parallel.plan",
}

__all__ = ["COMPONENTS", "Breakdown", "Catalog", "CatalogError", "load_catalog", "predict",
           "predict_table", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traincast' has no attribute {name!r}")
