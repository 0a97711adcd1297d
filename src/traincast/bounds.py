"""The ranges a job's numbers may take, wherever they are read (a trace's rows, a features
file, a per-op table): counts, batch sizes, FLOPs and bytes. A leaf module, so that reading a
features file does not load the trace store."""

from __future__ import annotations

COUNT_MAX = 1_000_000
"""The most GPUs, workers, parameter servers or nodes one job may count (and GPUs or workers
per worker or node): no cluster has held a million GPUs for one job."""
BATCH_MAX = 1e9
"""The largest batch size (samples or tokens per iteration)."""
FLOPS_MAX = 1e24
"""The most FLOPs one iteration of one replica may take: a million GPUs at 1 PFLOP/s for
1,000 s."""
BYTES_MAX = 1e18
"""The most bytes one iteration of one replica may move or hold: one exabyte."""
