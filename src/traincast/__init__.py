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
import sys
import types
from typing import Any

from traincast.hardware.catalog import Catalog, CatalogError, load_catalog
from traincast.model import COMPONENTS, Breakdown
from traincast.predict import Prediction, predict, predict_table
from traincast.resolve import resolve

__version__ = "0.1.0"

# name -> module that defines it (imported lazily, so `import traincast` never needs torch)
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
    "calibrate": "traincast.calibrate",
    "validate": "traincast.validate",
    "plan": "traincast.parallel.plan",
    "write_report": "traincast.report",
}

__all__ = ["COMPONENTS", "Breakdown", "Catalog", "CatalogError", "Prediction", "load_catalog",
           "predict", "predict_table", "resolve", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        # importing traincast.calibrate (a package named like its function) binds the
        # submodule to this name: rebind it to the function
        globals()[name] = value
        return value
    raise AttributeError(f"module 'traincast' has no attribute {name!r}")


class _Package(types.ModuleType):
    """Importing a subpackage named like its function (``traincast.calibrate``) binds it on the
    package; keep the function bound instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == value.__name__:
            value = getattr(value, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
