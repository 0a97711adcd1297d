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

import re
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


PART_NAME = re.compile(r"part-\d{5,}\.parquet")
"""The name of a partition :func:`write_partitions` writes (and removes when stale)."""


def write_partitions(jobs: pa.Table | Iterable[pa.Table], folder: Path,
                     rows_per_partition: int = 250_000) -> list[Path]:
    """Write a job table (sliced by ``rows_per_partition``) or a stream of chunks (one
    partition each) as ``part-00000.parquet``, ... (row order kept) into ``folder``. A folder
    written before keeps only this run's partitions: its ``part-NNNNN.parquet`` files past the
    last one written now are removed (read back as a folder, they would add old jobs); other
    files are left alone."""
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(jobs, pa.Table):
        table, step = jobs, max(int(rows_per_partition), 1)
        jobs = (table.slice(start, step) for start in range(0, max(table.num_rows, 1), step))
    paths = []
    for i, chunk in enumerate(jobs):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(chunk, path)
        paths.append(path)
    written = {p.name for p in paths}
    for old in folder.glob("part-*.parquet"):
        if PART_NAME.fullmatch(old.name) and old.name not in written:
            old.unlink()
    return paths


@contextmanager
def partitioned(jobs: pa.Table | Iterable[pa.Table] | str | Path,
                parquet_dir: str | Path | None = None,
                rows_per_partition: int = 250_000) -> Iterator[list[str]]:
    """The Parquet partition files of ``jobs``: those of a Parquet file or folder given, else
    a table or a stream of chunks written by :func:`write_partitions` into ``parquet_dir``
    (else a temporary folder, removed afterwards). Without Dask installed it fails here,
    before any partition is written (ImportError: ``pip install 'traincast[dask]'``)."""
    import distributed  # noqa: F401 - checked before the work it would waste

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


CONNECT_TIMEOUT_S = 30
"""Seconds to reach a scheduler at ``--address``, handshake included (a port that accepts and
never answers is no scheduler)."""


def probe_tcp(address: str) -> None:
    """A ``tcp://`` address must answer as a Dask scheduler does: its listener writes its
    handshake as soon as a connection opens (``distributed.comm``), so a port that accepts
    and stays silent for :data:`CONNECT_TIMEOUT_S` (a web server waiting for a request) is a
    TraincastError, not a client waiting forever. A refused connection is left to Dask's own
    error."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme != "tcp":
        return
    host, port = parse_host_port(location)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as sock:
            sock.settimeout(CONNECT_TIMEOUT_S)
            if sock.recv(1):
                return
            why = "it closed the connection without a word"
    except TimeoutError:
        why = f"it accepted a connection and sent nothing for {CONNECT_TIMEOUT_S} s"
    except OSError:
        return  # refused, unreachable: Dask says so below
    raise TraincastError(f"--address {address}: no Dask scheduler answered there ({why})",
                         hint=SCHEDULER_HINT)


@contextmanager
def dask_client(address: str | None = None, workers: int = 1, threads: int = 2) -> Any:
    """A ``distributed.Client``: to ``address`` (:func:`check_address`; a scheduler that does
    not answer is a TraincastError naming it), else to a LocalCluster on 127.0.0.1."""
    from distributed import Client, LocalCluster

    if address:
        check_address(address)
        probe_tcp(address)
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a service that is no Dask scheduler answers
            # anything: a refused or timed-out connect, or bytes read as a huge message
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
    (at most :data:`IN_FLIGHT` tasks ahead of the one yielded). ``args`` (the catalog with its
    cache of per-op step times, the scenarios) go to each worker once (``scatter``,
    broadcast): every task of a worker shares them, so a workload's per-op table is priced
    once per worker, not once per partition."""
    with dask_client(address) as client:
        [args] = client.scatter([args], broadcast=True, hash=False)
        pending = []
        todo = iter(files)
        done = 0
        for f in todo:
            pending.append(client.submit(_read_and_run, f, part, args, pure=False))
            if len(pending) >= IN_FLIGHT:
                break
        while pending:
            try:
                result = pending.pop(0).result()
            except Exception as exc:  # noqa: BLE001 - the cluster's failures, not the input's
                if type(exc).__name__ != "KilledWorker":
                    raise
                raise TraincastError(f"a Dask worker died while running a partition "
                                     f"({str(exc).splitlines()[0][:200]})",
                                     hint="give the workers more memory, or run with a nanny "
                                          "(dask worker restarts a dead one); nothing was "
                                          "written") from None
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(client.submit(_read_and_run, nxt, part, args, pure=False))
            done += 1
            if progress:
                progress(done, len(files))
            yield result
