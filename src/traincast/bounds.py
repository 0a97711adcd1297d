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
USD_PER_GPU_HOUR_MAX = 10_000.0
"""The highest price one GPU-hour may have in a price file: a hundred times any cloud's list
price; above it a figure is a typo of its unit (cents, a month, a whole cluster)."""
LINK_BW_MIN_GBS = 1e-4
"""The slowest link a catalog entry or a speed given as text may have, GB/s: 100 kB/s
(0.8 Mbit/s), below any network a cluster trains over; below it, an exponent typo (a
1e-300Gbit link would price a step at 1e300 seconds)."""
LINK_BW_MAX_GBS = 100_000.0
"""The fastest link a catalog entry or a speed given as text may have, GB/s: a hundred times
NVLink 5's 900; above it, a speed in bits written as bytes or an exponent typo."""
PEAK_TFLOPS_MAX = 100_000.0
"""The highest tensor peak (TF32, FP16, BF16, FP8) a GPU entry, or a rate a published row
reports, may have, TFLOP/s: above it, a peak in GFLOP/s."""


def feature_max(column: str) -> float:
    """The largest value of a job feature column: ``flops_compute_bound`` at most
    :data:`FLOPS_MAX`, ``n_ops`` (a count of ops, no physical bound) unbounded, every other
    feature (bytes) at most :data:`BYTES_MAX`."""
    return {"flops_compute_bound": FLOPS_MAX, "n_ops": float("inf")}.get(column, BYTES_MAX)
