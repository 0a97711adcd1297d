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
from traincast.model import BOTTLENECKS, COMPONENTS, Breakdown
from traincast.predict import Prediction, predict, predict_table
from traincast.resolve import resolve

__version__ = "0.1.0"

# name -> module that defines it (imported lazily, so `import traincast` never needs torch; no
# module is named like its function, so importing a module never rebinds these names)
_LAZY = {
    "profile": "traincast.features.profile",
    "profile_model": "traincast.features.profile",
    "ingest": "traincast.trace.store",
    "load_jobs": "traincast.trace.store",
    "read_trace": "traincast.trace.store",
    "Store": "traincast.trace.store",
    "colocate": "traincast.analysis.colocate",
    "merge_specs": "traincast.merge",
    "characterize": "traincast.analysis.characterize",
    "whatif": "traincast.analysis.whatif",
    "recommend": "traincast.analysis.recommend",
    "study": "traincast.analysis.study",
    "calibrate": "traincast.calibration",
    "validate": "traincast.validation",
    "plan": "traincast.parallel.plan",
    "write_report": "traincast.report",
}

__all__ = ["BOTTLENECKS", "COMPONENTS", "Breakdown", "Catalog", "CatalogError", "Prediction",
           "load_catalog", "predict", "predict_table", "resolve", *_LAZY]


def __getattr__(name: str) -> Any:
    """Import the module of a public name on first use (``traincast.whatif`` etc.)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'traincast' has no attribute {name!r}")
