"""Run an analysis over a trace partitioned as Parquet, one Dask task per partition.

Each Parquet partition (file) is one task: the worker reads it with pyarrow and runs the
analysis's part function on its rows (the same function the local engine runs on a chunk of
rows), which returns a small mergeable part (sums and quantile sketches, not per-job arrays:
``traincast.analysis.whatif.Outcome``, ``traincast.analysis.characterize.Characterization``);
the client merges the parts in partition order as they arrive, so its memory does not grow
with the trace. Results are the local engine's: the same arithmetic on the same rows.

Without an address a ``LocalCluster`` bound to 127.0.0.1 is started (threads in this process,
no dashboard) and closed afterwards. A remote cluster (``tcp://HOST:PORT``) must see the
Parquet folder: pass one on a shared file system.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from traincast.errors import TraincastError

IN_FLIGHT = 4
"""Partitions submitted ahead of the one being merged (bounds the client's memory)."""


def write_partitions(jobs: pa.Table | Iterable[pa.Table], folder: Path,
                     rows_per_partition: int = 250_000) -> list[Path]:
    """Write a job table (sliced by ``rows_per_partition``) or a stream of chunks (one
    partition each) as ``part-00000.parquet``, ... (row order kept) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(jobs, pa.Table):
        table, step = jobs, max(int(rows_per_partition), 1)
        jobs = (table.slice(start, step) for start in range(0, max(table.num_rows, 1), step))
    paths = []
    for i, chunk in enumerate(jobs):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(chunk, path)
        paths.append(path)
    return paths


@contextmanager
def partitioned(jobs: pa.Table | Iterable[pa.Table] | str | Path,
                parquet_dir: str | Path | None = None,
                rows_per_partition: int = 250_000) -> Iterator[list[str]]:
    """The Parquet partition files of ``jobs``: those of a Parquet file or folder given, else
    a table or a stream of chunks written by :func:`write_partitions` into ``parquet_dir``
    (else a temporary folder, removed afterwards)."""
    if isinstance(jobs, str | Path):
        yield partition_files(jobs)
        return
    with tempfile.TemporaryDirectory(prefix="traincast-dask-") as tmp:
        folder = Path(parquet_dir) if parquet_dir else Path(tmp)
        yield [str(p) for p in write_partitions(jobs, folder, rows_per_partition)]


def partition_files(path: str | Path) -> list[str]:
    """The Parquet files of a partitioned folder (sorted by name), or the one file given."""
    path = Path(path)
    if path.is_file():
        return [str(path)]
    files = sorted(str(p) for p in path.rglob("*.parquet"))
    if not files:
        raise TraincastError(f"{path}: no Parquet files to evaluate",
                             hint="give a job table or a folder of *.parquet partitions")
    return files


SCHEDULER_HINT = ("give the scheduler's address as dask-scheduler prints it, "
                  "tcp://HOST:PORT (default port 8786), or leave --address out for a local "
                  "cluster")


def check_address(address: str) -> None:
    """A Dask scheduler address ``--address`` names: ``[SCHEME://]HOST:PORT`` with a scheme
    ``distributed`` has a transport for (``get_backend``: ``tcp``, ``tls``, ``ws``, ``wss``,
    ``ucx``, ``inproc`` and any a plugin registers; none: tcp) and, for tcp and tls, a port
    number; else a TraincastError naming the flag."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    try:
        scheme, location = parse_address(address)
        get_backend(scheme)  # Dask's own transports and those its plugins register
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise TraincastError(f"--address {address!r}: not a Dask scheduler address ({exc})",
                             hint=SCHEDULER_HINT) from None


@contextmanager
def dask_client(address: str | None = None, workers: int = 1, threads: int = 2) -> Any:
    """A ``distributed.Client``: to ``address`` (:func:`check_address`; a scheduler that does
    not answer is a TraincastError naming it), else to a LocalCluster on 127.0.0.1."""
    from distributed import Client, LocalCluster

    if address:
        check_address(address)
        try:
            client = Client(address)  # Dask's connect timeout (distributed.comm.timeouts)
        except (OSError, TimeoutError) as exc:
            raise TraincastError(f"--address {address}: no Dask scheduler answered there "
                                 f"({type(exc).__name__}: {exc})", hint=SCHEDULER_HINT) from None
        with client:
            yield client
        return
    with LocalCluster(n_workers=workers, threads_per_worker=threads, processes=False,
                      protocol="tcp", host="127.0.0.1", scheduler_port=0,
                      dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def _read_and_run(path: str, part: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """One task: read one Parquet partition and run ``part(table, *args)`` on it."""
    return part(pq.read_table(path), *args)


def map_partitions(files: list[str], part: Callable[..., Any], *args: Any,
                   address: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> Iterator[Any]:
    """``part(table, *args)`` of every partition file, in file order, computed on Dask
    (at most :data:`IN_FLIGHT` tasks ahead of the one yielded)."""
    with dask_client(address) as client:
        pending = []
        todo = iter(files)
        done = 0
        for f in todo:
            pending.append(client.submit(_read_and_run, f, part, args, pure=False))
            if len(pending) >= IN_FLIGHT:
                break
        while pending:
            result = pending.pop(0).result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(client.submit(_read_and_run, nxt, part, args, pure=False))
            done += 1
            if progress:
                progress(done, len(files))
            yield result
