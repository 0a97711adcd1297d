"""Reports: figures (matplotlib, PNG + SVG) and a self-contained ``report.html``.

* :func:`write_report` — a study folder -> ``report.html`` + ``figures/`` (:mod:`.build`);
* :mod:`.figures` — each figure from plain data (dicts, arrays), testable without files;
* :mod:`.data` — what the figures plot (weighted breakdown shares, CDFs, roofline points);
* :mod:`.inputs` — reading the study folder and a validate JSON; :mod:`.html` — the page.

matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_report"]


def write_report(study_dir: str | Path, validate_json: str | Path | None = None,
                 roofline: Any = None, **kwargs: Any) -> Path:
    """Write ``report.html`` and ``figures/`` for a study folder; see
    :func:`traincast.report.build.write_report`."""
    from traincast.report.build import write_report as _write

    return _write(study_dir, validate_json=validate_json, roofline=roofline, **kwargs)
