"""``traincast validate``: predict real training steps on this machine, run them, compare.

For each case (a zoo model, a batch size, an architecture):

1. **predict** — profile the model (per-op table), then predict with the calibrated catalog
   (``[node.local]`` of ``traincast calibrate``): data I/O and communication by the core model
   (``traincast.predict``: ``T_data = input_bytes / bw(pcie)``, ``T_comm`` by architecture),
   compute by the per-op roofline with measured efficiency curves (traincast.roofline),
   ``T_total = T_data + T_comp + T_comm`` (no overlap). The paper's additive model with the
   same catalog (one peak, one bandwidth) is reported beside it as ``paper_predicted_s``;
2. **measure** — run real training steps (traincast.validation.runs): warm-up, then the median
   of several; plus a per-component breakdown from ``torch.profiler``;
3. **compare** — ``error = predicted / measured - 1`` per case; the summary gives the median
   and 90th percentile of ``|error|``.

Architectures: ``1w1g`` (this process), ``allreduce-local`` (DistributedDataParallel over 2
local processes) and ``ps-worker`` (1 parameter server + 2 workers, torch.distributed).

Threads (CPU): one run of ``validate`` calibrates (or reads a catalog calibrated) at T torch
threads and runs every case at T threads per process; a case of P processes runs only when
``P * T <= cores`` (else it is listed under ``skipped``: oversubscribed cores measure the
contention, not the model). ``validate_threads`` runs it at 1 thread and at all cores and
reports both.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from traincast.calibration import CONTENTION_LIMIT
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog

__all__ = ["Case", "FULL_CASES", "GPU_CASES", "QUICK_CASES", "validate", "validate_threads",
           "predict_case", "summarize", "thread_counts"]

MEDIAN_TARGET = 0.15
MAX_TARGET = 0.40


@dataclass(frozen=True)
class Case:
    """One validation case: a MODEL spec, its family, batch size per replica, architecture, the
    processes it runs (``1w1g``: 1; ``allreduce-local``: ``gpus``; ``ps-worker``: ``workers``
    + 1 server) and ``crop``: ``(input index, dim, length)`` triples that shorten the inputs
    (tokens, frames, pixels) so a step fits a CPU core."""

    model: str
    family: str
    batch_size: int
    arch: str = "1w1g"
    gpus: int = 1
    workers: int = 0
    crop: tuple[tuple[int, int, int], ...] = ()

    @property
    def name(self) -> str:
        """The zoo name, or FUNC of a ``file.py:FUNC`` spec."""
        return self.model.removeprefix("zoo:").rsplit(":", 1)[-1]

    @property
    def label(self) -> str:
        return f"{self.name} b{self.batch_size} {self.arch}"

    @property
    def processes(self) -> int:
        """Processes of the real run: 1, ``gpus`` (all-reduce) or ``workers`` + 1 (PS)."""
        if self.arch == "1w1g":
            return 1
        return self.gpus if self.arch == "allreduce-local" else self.workers + 1


# Inputs cropped (fewer pixels, tokens or frames) and batches chosen so that one step takes about
# 0.05-1.5 s on one CPU core; the models themselves are the zoo's, unchanged.
_IMG64, _IMG112 = ((0, 2, 64), (0, 3, 64)), ((0, 2, 112), (0, 3, 112))
_NMT16 = ((0, 1, 16), (1, 1, 16), (2, 1, 16))
# the medium PTB LSTM language model (Zaremba et al. 2014), beside the zoo's speech model
PTB_LSTM = f"{Path(__file__).with_name('rnn.py')}:ptb_lstm"
FULL_CASES: tuple[Case, ...] = (
    Case("zoo:resnet50", "CNN", 4, crop=_IMG64),
    Case("zoo:mobilenet-v2", "CNN", 4, crop=_IMG112),
    Case("zoo:transformer-nmt", "transformer", 4, crop=_NMT16),
    Case("zoo:bert-base", "transformer", 2, crop=((0, 1, 32), (1, 1, 32), (2, 1, 32))),
    Case("zoo:gpt2", "transformer", 2, crop=((0, 1, 32), (1, 1, 32))),
    Case("zoo:multi-interest", "recommender", 256),
    Case("zoo:speech", "RNN", 2, crop=((0, 3, 100), (1, 1, 20))),
    Case(PTB_LSTM, "RNN", 20),  # the published batch of the medium PTB model
    Case("zoo:mobilenet-v2", "CNN", 4, "allreduce-local", gpus=2, crop=_IMG112),
    Case("zoo:transformer-nmt", "transformer", 4, "ps-worker", workers=2, crop=_NMT16),
)
# On a GPU: the zoo's own inputs, batches a single GPU trains in well under a second.
GPU_CASES: tuple[Case, ...] = (
    Case("zoo:resnet50", "CNN", 32),
    Case("zoo:mobilenet-v2", "CNN", 64),
    Case("zoo:transformer-nmt", "transformer", 64),
    Case("zoo:bert-base", "transformer", 16),
    Case("zoo:gpt2", "transformer", 2),
    Case("zoo:multi-interest", "recommender", 256),
    Case("zoo:speech", "RNN", 4, crop=((0, 3, 400), (1, 1, 80))),
    Case(PTB_LSTM, "RNN", 20),
    Case("zoo:resnet50", "CNN", 32, "allreduce-local", gpus=2),
    Case("zoo:transformer-nmt", "transformer", 64, "ps-worker", workers=2),
)
QUICK_CASES: tuple[Case, ...] = (
    Case("zoo:mobilenet-v2", "CNN", 2, crop=_IMG112),
    Case("zoo:transformer-nmt", "transformer", 2, crop=_NMT16),
    Case(PTB_LSTM, "RNN", 20),  # recurrent steps: small per-step ops
)


def predict_case(features: dict[str, Any], ops: Sequence[dict[str, Any]], case: Case,
                 catalog: Catalog) -> dict[str, Any]:
    """Predicted seconds of one case: calibrated per-op model and the paper's additive model."""
    from traincast.model import total_time_s
    from traincast.predict import predict
    from traincast.roofline import Curves, compute_breakdown

    kw: dict[str, Any] = {"arch": case.arch, "node": "local", "catalog": catalog,
                          "strategy": "paper"}
    if case.arch == "ps-worker":
        kw.update(workers=case.workers, ps=1)
    elif case.arch != "1w1g":
        kw.update(gpus=case.gpus)
    paper = predict(features, **kw)
    comp = compute_breakdown(ops, Curves.from_gpu(catalog.gpu("local")))
    data, comm = paper.time_s["data_io"], paper.time_s["comm"]
    total = float(total_time_s(data, comp["compute_flop"] + comp["compute_mem"], comm))
    return {"predicted_s": total, "paper_predicted_s": float(paper.time_s["total"]),
            "predicted": {"data_io": data, "compute_flop": comp["compute_flop"],
                          "compute_mem": comp["compute_mem"], "comm": comm,
                          "op_overhead": comp["overhead"], "fresh_alloc": comp["fresh"]},
            "paper": {k: float(paper.time_s[k]) for k in
                      ("data_io", "compute_flop", "compute_mem", "comm")},
            "ops": comp["ops"]}


def measure_case(case: Case, *, device: str, threads: int, steps: int, warmup: int,
                 profile_steps: int) -> dict[str, Any]:
    """Run the case for real; ``{"times", "breakdown"}`` of the measuring rank."""
    from traincast.calibration.dist import backend_for, run_local
    from traincast.validation import runs

    args = {"model": case.model, "batch_size": case.batch_size, "crop": case.crop,
            "device": device,
            "threads": threads, "steps": steps, "warmup": warmup,
            "profile_steps": profile_steps}
    if case.arch == "1w1g":
        return runs.single(args)
    if case.arch == "allreduce-local":
        return run_local(runs.ddp_target, case.gpus, args,
                         backend=backend_for(device, case.gpus))[0]
    if case.arch == "ps-worker":
        return run_local(runs.ps_target, case.workers + 1, args, backend="gloo")[1]
    raise TraincastError(f"validate has no real run for architecture {case.arch!r}",
                         hint="cases run as 1w1g, allreduce-local or ps-worker")


def summarize(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Median / 90th percentile / max of ``|error|`` (and of the paper model's), targets
    (``traincast.validation.published.summarize``; NaN with no cases, and the targets are not
    met when an error is not finite)."""
    from traincast.validation.published import summarize as stats

    ours = stats([c["error"] for c in cases])
    paper = stats([c["paper_error"] for c in cases])
    out = {k: ours[k] for k in ("median_abs_error", "p90_abs_error", "max_abs_error")}
    out.update(paper_median_abs_error=paper["median_abs_error"],
               paper_p90_abs_error=paper["p90_abs_error"])
    out["targets_met"] = bool(ours["n"] == len(cases)
                              and out["median_abs_error"] <= MEDIAN_TARGET
                              and out["max_abs_error"] <= MAX_TARGET)
    return out


def _catalog(path: str | Path | None, quick: bool, device: str, threads: int | None,
             say: Callable[[str], None], force: bool = False) -> tuple[Catalog, str, int]:
    """The catalog, its path and the thread count to run at: a given catalog's recorded
    ``threads`` (an explicit different ``threads`` is an error), else a fresh calibration at
    ``threads`` (default: torch's count)."""
    if path is not None:
        cat = load_catalog([path])
        recorded = int(getattr(cat.gpu("local"), "threads", 0) or 0)
        if threads is not None and recorded and threads != recorded and \
                not device.startswith("cuda"):
            raise TraincastError(
                f"{path}: [gpu.local] was calibrated at threads = {recorded}, not {threads}",
                hint=f"run validate with --threads {recorded}, or calibrate again with "
                     f"--threads {threads}")
        return cat, str(path), threads or recorded or 1
    import torch

    from traincast.calibration import calibrate

    threads = threads or torch.get_num_threads()
    say(f"calibrating this machine at {threads} thread(s)" + (" (quick)" if quick else ""))
    tmp = Path(tempfile.mkdtemp(prefix="traincast-")) / "local.toml"
    calibrate(tmp, quick=quick, device=device, threads=threads, force=force, progress=say)
    return load_catalog([tmp]), str(tmp), threads


def _recorded(path: str, key: str) -> float | None:
    """A value of the catalog file's ``[calibration.local]`` record (None when absent)."""
    import tomllib

    try:
        value = tomllib.loads(Path(path).read_text()).get("calibration", {}).get(
            "local", {}).get(key)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def thread_counts() -> list[int]:
    """The thread counts validation runs at on the CPU: 1 and all cores (once if 1 core)."""
    import os

    return sorted({1, os.cpu_count() or 1})


def validate_threads(counts: Sequence[int] | None = None, **kwargs: Any) -> dict[str, Any]:
    """``validate`` at each thread count (default ``thread_counts()``: 1 and all cores), each
    with its own calibration. Returns the first run's result (the JSON of docs/validation.md:
    ``cases``, ``median_abs_error``, ...) plus ``runs`` (every run's result) and
    ``by_threads`` (T -> ``median_abs_error``, ``p90_abs_error``, ``max_abs_error``,
    ``paper_median_abs_error``, ``targets_met`` and the counts of ``cases``, ``failed``,
    ``skipped``), and ``not_run`` (T -> why: a later thread count whose run stopped, as a
    calibration refused for other programs' load; the runs before it are kept; an error of
    the first run is raised)."""
    runs, not_run = [], {}
    for i, t in enumerate(counts or thread_counts()):
        try:
            runs.append(validate(threads=t, **kwargs))
        except TraincastError as exc:
            if i == 0:
                raise
            not_run[str(t)] = str(exc)
    keys = ("median_abs_error", "p90_abs_error", "max_abs_error", "paper_median_abs_error",
            "targets_met")
    return {**runs[0], "runs": runs, "not_run": not_run,
            "by_threads": {str(r["threads"]): {**{k: r[k] for k in keys},
                                               "cases": len(r["cases"]),
                                               "failed": len(r["failed"]),
                                               "skipped": len(r["skipped"])} for r in runs}}


def validate(catalog: str | Path | None = None, *, quick: bool = False,
             cases: Sequence[Case] | None = None, device: str | None = None,
             threads: int | None = None, steps: int | None = None, warmup: int | None = None,
             profile_steps: int = 2, force: bool = False,
             progress: Callable[[str], None] | None = None,
             cases_done: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Predict, run and compare every case; the JSON of docs/validation.md (``cases``,
    ``median_abs_error``, ``p90_abs_error``) plus predicted/measured components and the paper
    model's error.

    ``catalog``: a ``traincast calibrate`` file; None = calibrate now (quick with ``quick``).
    ``threads``: torch threads per process (default: the catalog's recorded count, else
    torch's); cases of P processes with ``P * threads > cores`` go to ``skipped``.
    ``force``: keep a calibration measured under contention (``traincast.calibration``).
    ``progress(message)`` hears each step; ``cases_done(done, total)`` is called before each
    case (``done`` cases finished; ``0`` first) and once all are. A case is ``disturbed`` when
    other programs held the cores more than ``CONTENTION_LIMIT`` of its steps' time
    (``disturbed`` lists them).
    """
    import torch

    from traincast.calibration import default_device

    device = device or default_device()
    before = torch.get_num_threads()
    try:
        return _validate(catalog, quick=quick, cases=cases, device=device, threads=threads,
                         steps=steps, warmup=warmup, profile_steps=profile_steps,
                         force=force, say=progress or (lambda _msg: None),
                         cases_done=cases_done or (lambda _done, _total: None))
    finally:
        torch.set_num_threads(before)


def _validate(catalog: str | Path | None, *, quick: bool, cases: Sequence[Case] | None,
              device: str, threads: int | None, steps: int | None, warmup: int | None,
              profile_steps: int, force: bool, say: Callable[[str], None],
              cases_done: Callable[[int, int], None]) -> dict[str, Any]:
    import os

    import torch

    from traincast.calibration import device_name
    from traincast.features.profile import profile
    from traincast.validation.runs import build

    if cases is None:
        cases = QUICK_CASES if quick else (GPU_CASES if device.startswith("cuda") else FULL_CASES)
    steps = steps or (5 if quick else 9)
    warmup = warmup or 2
    cat, cat_path, threads = _catalog(catalog, quick, device, threads, say, force)
    torch.set_num_threads(threads)
    cores = os.cpu_count() or 1
    fits = [device.startswith("cuda") or c.processes * threads <= cores for c in cases]
    skipped = [{"model": c.name, "arch": c.arch, "batch_size": c.batch_size,
                "reason": f"{c.processes} processes x {threads} threads > {cores} cores"}
               for c, ok in zip(cases, fits, strict=True) if not ok]
    cases = [c for c, ok in zip(cases, fits, strict=True) if ok]
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for done, case in enumerate(cases):
        cases_done(done, len(cases))
        say(f"{case.label}: profile and predict")
        model, inputs = build(case.model, case.batch_size, case.crop)
        # the step runs on `device`: dropout fused on a GPU, decomposed on a CPU
        feats = profile(model, inputs, optimizer="adam", ops=True,
                        fused_dropout=device.startswith("cuda"))
        ops = feats.pop("ops")
        pred = predict_case(feats, ops, case, cat)
        del model, inputs
        say(f"{case.label}: {warmup} warm-up + {steps} timed steps")
        try:
            run = measure_case(case, device=device, threads=threads, steps=steps, warmup=warmup,
                               profile_steps=profile_steps)
        except (TraincastError, RuntimeError) as exc:  # reported, not hidden
            failed.append({"model": case.name, "arch": case.arch,
                           "batch_size": case.batch_size,
                           "reason": str(exc).strip().splitlines()[-1]})
            say(f"{case.label}: the real run failed: {failed[-1]['reason']}")
            continue
        times = np.asarray(run["times"])
        busy = run.get("runqueue_wait_fraction")
        measured = float(np.median(times))
        p10, p90 = np.percentile(times, [10, 90])
        rows.append({
            "model": case.name, "family": case.family, "arch": case.arch,
            "batch_size": case.batch_size, "crop": [list(c) for c in case.crop],
            "processes": case.processes, "threads": threads,
            "measured_s": measured, "measured_spread": float((p90 - p10) / measured),
            "measured_wall_s": float(np.median(run["wall"])), "clock": run["clock"],
            "runqueue_wait_fraction": busy,
            "disturbed": bool(busy is not None and busy > CONTENTION_LIMIT),
            "predicted_s": pred["predicted_s"],
            "error": pred["predicted_s"] / measured - 1.0,
            "paper_predicted_s": pred["paper_predicted_s"],
            "paper_error": pred["paper_predicted_s"] / measured - 1.0,
            "predicted": pred["predicted"], "paper": pred["paper"],
            "measured": run["breakdown"], "ops": pred["ops"],
            "flops_compute_bound": feats["flops_compute_bound"],
            "bytes_memory_bound": feats["bytes_memory_bound"],
            "weight_bytes": feats["weight_bytes"]})
        say(f"{case.label}: measured {measured * 1e3:.1f} ms, predicted "
            f"{pred['predicted_s'] * 1e3:.1f} ms ({rows[-1]['error']:+.0%})"
            + (f"; disturbed: other programs held the cores {busy:.0%} of its steps' time"
               if rows[-1]["disturbed"] else ""))
    cases_done(len(cases), len(cases))
    return {"device": device, "device_name": device_name(device), "torch": torch.__version__,
            "threads": threads, "catalog": cat_path,
            "calibration_contention": _recorded(cat_path, "runqueue_wait_fraction"),
            "steps": steps, "warmup": warmup,
            "cases": rows, "failed": failed, "skipped": skipped,
            "disturbed": [{"model": r["model"], "arch": r["arch"], "batch_size": r["batch_size"],
                           "runqueue_wait_fraction": r["runqueue_wait_fraction"]}
                          for r in rows if r["disturbed"]], **summarize(rows),
            "case_specs": [asdict(c) for c in cases]}
