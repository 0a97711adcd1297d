"""``traincast calibrate`` and ``traincast validate``: measure this machine, check the model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from traincast.cli import app
from traincast.cli.common import (
    JsonOpt,
    catalog_from,
    check_output,
    check_text_file,
    console,
    err_console,
    held_out_text,
    is_quiet,
    print_json,
    progress,
    say_above,
)
from traincast.cli.tables import Table
from traincast.errors import TraincastError
from traincast.units import plural

ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Keep a calibration during which other programs held the cores in a stage "
    "even after its retries (else refused, exit 2); the catalog file then names the stages.")]


def _progress(quiet: bool):
    if quiet:
        return None
    return lambda msg: err_console.print(f"[dim]· {msg}[/dim]", highlight=False)


@contextmanager
def _case_progress() -> Iterator[dict[str, Any]]:
    """``progress`` and ``cases_done`` callbacks for ``traincast.validation.validate``: a rich
    progress bar of the cases on stderr, each step's message printed above it; nothing with
    ``traincast --quiet``."""
    with progress() as bar:
        task = bar.add_task("validate", total=None)
        seen = {"base": 0, "total": 0}

        def cases_done(done: int, total: int) -> None:
            if done == 0:  # a new run (one per thread count): its cases join the total
                seen["base"] = seen["total"]
                seen["total"] += total
            bar.update(task, total=seen["total"], completed=seen["base"] + done)

        yield {"progress": say_above(bar, task), "cases_done": cases_done}


@app.command()
def calibrate(
    output: Annotated[Path, typer.Option("-o", "--output", help="Catalog file to write.")]
    = Path("traincast-local.toml"),
    quick: Annotated[bool, typer.Option(help="Fewer sizes and repeats (under 30 s).")] = False,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if present).")]
    = None,
    threads: Annotated[int | None, typer.Option(
        min=1, help="Torch intra-op threads to calibrate at on the CPU (one rank = one "
        "'device'); default: what torch uses here, torch.get_num_threads().")] = None,
    comm: Annotated[bool, typer.Option(
        help="Measure all-reduce and send/recv between 2 local processes.")] = True,
    force: ForceOpt = False,
    kernels: Annotated[list[Path] | None, typer.Option(
        "--kernels", metavar="DIR",
        help="Instead of measuring: fit the GPU kernel model to a folder of "
        "measured kernels (linear/ bmm/ conv/ softmax/ ln/ add/ ...: the NeuSight CSV format, "
        "as scripts/measure_kernels.py writes it; repeat to fit on several folders together) "
        "and write its [kernel_model] table to -o (docs/model.md, 'Kernel model'), with each "
        "GPU's errors when left out of the fit (one more fit per chip). Needs scipy "
        "(traincast[fit]).")] = None,
    catalog: Annotated[Path | None, typer.Option(
        "--catalog", help="With --kernels: a catalog file with the measured GPUs' entries "
        "(datasheet fields), merged over the shipped one.")] = None,
    check: Annotated[list[Path] | None, typer.Option(
        "--check", metavar="DIR",
        help="With --kernels: a folder of measured kernels of GPUs the fit must not "
        "see (data/h200/kernels; scripts/measure_kernels.py on a GPU of your own; repeat for "
        "more): each priced by the fit, its errors kept beside the parameters "
        "([kernel_model.held_out]) with those of the GPUs held out in turn.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Measure this machine and write a catalog file with [gpu.local] and [node.local].

    Microbenchmarks, each the median of repeated runs after warm-up: matmul FLOP/s by shape
    (squares and skinny GEMMs, fp32 and bf16/fp16) as an efficiency curve over arithmetic
    intensity, convolutions, element-wise bandwidth (copy, add, triad) by size, per-op fixed
    overhead, host-to-device copy, all-reduce and send/recv between 2 local processes over
    loopback (gloo; NCCL on 2+ GPUs). Then: traincast predict --catalog FILE --node local ...
    On CUDA the file also sets this host's dispatch floor for every GPU of the catalog
    ([kernel_model] host_floor_us: a one-element add timed alone between CUDA events, the
    median of 200; the kernel model's d, docs/hardware.md), so --catalog FILE --gpu ANY prices
    any GPU on this host.

    Threads (CPU): everything is measured at --threads T (default: torch's own count, the
    cores) and T is recorded as gpu.local.threads. With T > 1 the kernels are also measured
    at 1 thread, and a small op runs on one thread: an element-wise kernel of E elements
    runs at K(E) = K_1 * min(K_T / K_1, max(1, E / g)), with K_1 / K_T its elements/s at 1 / T
    threads on large tensors and g the grain (elements), fitted to exp and add timed over
    sizes at 1 and T threads; a GEMM of F FLOPs at intensity I with m output rows runs at
    P_1(I) * min(S, max(1, F / g_F), S_m(m)), with P_1 the 1-thread curve, S the speedup of
    the largest measured GEMM, S_m(m) the measured speedup of the skinny shapes by their
    output rows m (linear in log m, non-decreasing, within [1, S]: a product of a few rows,
    such as a recurrent step at a small batch, runs on about one thread) and g_F a grain in
    FLOPs fitted to the same shapes timed at 1 and T threads (convolutions alike by FLOPs,
    with their own curves). The fixed cost per op is measured
    at T threads (not scaled with threads). At T > 1 each figure is the fastest sample by
    wall time (other programs only add time); the share of the time other programs held the
    cores is recorded (runqueue_wait_fraction). A stage during which other programs held the
    cores more than 5% of the time is measured again (twice at most); still disturbed, the
    calibration is refused (exit 2, nothing written) unless --force. Train with the same
    thread count you calibrate at.
    """
    check_output(output)  # before minutes of measuring
    _refuse_other_tables(output, kernel_fit=kernels is not None)
    if check and kernels is None:
        raise TraincastError("--check needs --kernels",
                             hint="--kernels DIR is what the fit sees, --check DIR what it is "
                                  "checked on")
    if catalog is not None and kernels is None:
        raise TraincastError("--catalog needs --kernels",
                             hint="--catalog gives the datasheet entries of the GPUs a "
                                  "--kernels fit measured; calibrate alone measures this "
                                  "machine and needs none")
    if kernels is not None:
        _fit_kernels(kernels, output, catalog, json_out, check or [])
        return
    from traincast.calibration import calibrate as run_calibration

    out = run_calibration(output, quick=quick, device=device, threads=threads, comm=comm,
                          force=force, progress=_progress(is_quiet()))
    res = out["results"]
    if json_out:
        print_json({"path": out["path"], "elapsed_s": res["elapsed_s"],
                    "device_name": res["device_name"], "results": res})
        return
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog([output])
    g = cat.gpu("local")
    console.print(f"Wrote [bold]{output}[/bold] in {res['elapsed_s']:.1f} s — "
                  f"{res['device_name']}, torch {res['torch']}, {res['threads']} thread(s).")
    console.print(f"  matmul fp32 best {g.fp32_tflops * 1e3:.1f} GFLOP/s; curve over intensity "
                  + ", ".join(f"{i:.3g}:{t * 1e3:.0f}" for i, t in
                              zip(g.gemm_intensity, g.gemm_tflops, strict=True))
                  + " (FLOP/byte:GFLOP/s)")
    console.print(f"  memory (add, beyond caches) {g.mem_bw_gbs:.1f} GB/s; per-op overhead "
                  f"{g.op_overhead_us:.1f} µs")
    for name in ("local-host", "local-allreduce", "local-loopback"):
        link = cat.link(name)
        measured = not link.stand_in  # --no-comm: memcpy stands in
        latency = (f"latency {link.latency_us:.0f} µs" if name != "local-host" else
                   "latency not measured (the input copy is priced by bandwidth alone)")
        console.print(f"  link {name}: {link.bw_gbs:.3g} GB/s, {latency}"
                      if measured else f"  link {name}: not measured (--no-comm): "
                      f"{link.bw_gbs:.3g} GB/s, the memcpy bandwidth, stands in")
    if res.get("forced"):
        err_console.print("[yellow]warning:[/yellow] written with --force although other "
                          "programs held the cores during: " + ", ".join(res["disturbed"])
                          + "; the file says so. Calibrate again when the machine is quiet.",
                          highlight=False)
    console.print(f"Use: traincast predict --catalog {output} --node local ...")


@app.command()
def validate(
    catalog: Annotated[Path | None, typer.Option(
        "--catalog", help="A `traincast calibrate` file; default: calibrate now.")] = None,
    quick: Annotated[bool, typer.Option(help="Three small one-process cases, quick calibration.")]
    = False,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda if present).")]
    = None,
    threads: Annotated[list[int] | None, typer.Option(
        min=1, help="Torch threads per process; repeat for several runs (--threads 1 "
        "--threads 2), each with its own calibration. Default on the CPU: 1 and all cores "
        "(with --catalog: the catalog's threads).")] = None,
    steps: Annotated[int | None, typer.Option(
        min=1, help="Timed steps per case (default 9; 5 with --quick).")] = None,
    published: Annotated[bool, typer.Option(
        "--published", help="Predict published GPU training throughputs instead (no "
        "measurement; --catalog is merged over the shipped catalog); on a terminal as tables, "
        "piped as the Markdown of docs/validation.md.")] = False,
    rows: Annotated[Path | None, typer.Option(
        "--rows", help="Published rows of your own (TOML; every field: docs/validation.md, "
        "\"Row format\"); implies --published. A file of the hybrid model's form ([[row]] "
        "with t, p, d) is priced by predict --arch hybrid.")] = None,
    trust_specs: Annotated[bool, typer.Option(
        "--trust-specs", help="Let --rows run Python: a [model.NAME] spec = \"FILE.py:FUNC\" "
        "imports FILE.py (beside the rows file, or an absolute path), which runs its code. "
        "Without the flag such a rows file is refused before anything runs; traincast's own "
        "model files (squad.py, rnn.py) need no flag.")] = False,
    force: ForceOpt = False,
    kernels: Annotated[list[Path] | None, typer.Option(
        "--kernels", metavar="DIR",
        help="Validate the GPU kernel model leave-one-GPU-out on a folder of "
        "measured kernels (for each GPU: fit on the others, predict it; repeat to pool "
        "folders, e.g. the NeuSight data and your own GPU's); median and p90 |error| per "
        "kernel family and the error of each GPU's summed time.")] = None,
    sample: Annotated[int, typer.Option(
        min=0, help="With --kernels: rows read per file (0 = all; seeded sample).")] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Predict real training steps on this machine, run them, and report the error.

    Per case (zoo model, batch, architecture: 1w1g in this process, allreduce-local = PyTorch
    DistributedDataParallel over 2 local processes, ps-worker = 1 parameter server + 2 workers):
    profile + predict with the calibrated catalog (compute by the per-op roofline with measured
    efficiency curves; data and communication by the core model), then warm-up and the median
    of timed steps, and a torch.profiler breakdown. error = predicted / measured - 1 of the
    step time (-: the forecast is faster). --published and --rows compare throughputs: error =
    predicted / published throughput - 1 (+: the forecast is faster).

    Per op: t = o + n*o_t + max(F / P_eff(F/B), B / M_eff(B), E / K(op)) + fresh outputs /
    A(size); T_comp = sum of t; T_total = T_data + T_comp + T_comm (docs/validation.md).
    At T > 1 threads a kernel of E elements runs at K_1 * min(K_T / K_1, max(1, E / g)).
    A case of P processes runs at T threads only when P * T <= cores (else: skipped).

    Python from files: --rows with a spec = "FILE.py:FUNC" imports (runs) FILE.py only with
    --trust-specs; without it the rows file is refused, naming the row and spec.
    """
    if sample and kernels is None:
        raise TraincastError(f"--sample {sample} needs --kernels",
                             hint="--sample N reads N rows per file of a --kernels folder")
    if published or rows is not None:
        _validate_published(catalog, json_out, rows, trust_specs)
        return
    if kernels is not None:
        _validate_kernels(kernels, catalog, sample, json_out)
        return
    from traincast.calibration import check_device
    from traincast.validation import thread_counts, validate, validate_threads

    dev = check_device(device)
    if catalog is not None or dev.startswith("cuda"):
        if threads and len(threads) > 1:
            raise TraincastError("validate: one --threads value with --catalog or on CUDA",
                                 hint="a catalog is calibrated at one thread count")
        counts = [threads[0] if threads else None]
    else:
        counts = list(threads or thread_counts())
    kw = {"quick": quick, "device": dev, "steps": steps, "force": force}
    with _case_progress() as report:  # on stderr, with --json too; none with --quiet
        both = validate(catalog, threads=counts[0], **kw, **report) if len(counts) == 1 \
            else validate_threads(counts, **kw, **report)
    if json_out:
        print_json(both)
        return
    if len(counts) == 1:
        render_validation(both)
        return
    for run in both["runs"]:
        render_validation(run)
    for t, summ in both["by_threads"].items():
        console.print(f"{t} thread(s): median |error| {100 * summ['median_abs_error']:.1f}%, "
                      f"p90 {100 * summ['p90_abs_error']:.1f}%, max "
                      f"{100 * summ['max_abs_error']:.1f}% over {summ['cases']} case(s), "
                      f"{summ['skipped']} skipped, {summ['failed']} failed")
    for t, why in both["not_run"].items():
        console.print(f"{t} thread(s): not run ({why})", style="yellow", highlight=False,
                      markup=False)


def _validate_published(catalog: Path | None, json_out: bool, rows: Path | None = None,
                        trust_specs: bool = False) -> None:
    """``validate --published [--rows FILE] [--trust-specs]``: traincast.validation.published
    (docs/validation.md); a rows file naming Python of its own needs ``--trust-specs``."""
    from traincast.cli.tables import print_markdown
    from traincast.validation.published import render_markdown, validate_published

    if rows is not None:
        check_text_file(rows, "--rows", "rows")
    out = validate_published(catalog_from([catalog] if catalog else None), path=rows,
                             progress=_progress(json_out or is_quiet()), trust_specs=trust_specs)
    if json_out:
        print_json(out)
    else:
        text = render_markdown(out)
        if console.is_terminal:  # tables for people; piped, the Markdown to paste in a report
            print_markdown(text, console)
        else:
            typer.echo(text)


def render_validation(out: dict) -> None:
    """Rich tables: predicted vs measured per case, then per component."""
    from traincast.units import fmt_seconds

    t = Table(title=f"traincast validate — {out['device_name']}, torch {out['torch']}, "
                    f"{out['threads']} thread(s) per process", title_justify="left")
    for col in ("model", "arch", "batch", "procs", "measured", "spread", "predicted", "error",
                "paper model", "paper error"):
        t.add_column(col, justify="left" if col in ("model", "arch") else "right")
    for c in out["cases"]:
        t.add_row(c["model"], c["arch"], str(c["batch_size"]), str(c["processes"]),
                  fmt_seconds(c["measured_s"]), f"{100 * c['measured_spread']:.0f}%",
                  fmt_seconds(c["predicted_s"]), f"{100 * c['error']:+.0f}%",
                  fmt_seconds(c["paper_predicted_s"]), f"{100 * c['paper_error']:+.0f}%")
    console.print(t)
    comp = Table(title="per component: predicted / measured (torch.profiler)",
                 title_justify="left")
    for col in ("model", "arch", "FLOP-bound", "memory-bound", "communication", "data copy",
                "framework (measured)"):
        comp.add_column(col, justify="left" if col in ("model", "arch") else "right")
    for c in out["cases"]:
        m = c.get("measured") or {}
        p = c["predicted"]

        def pair(key: str, p: dict = p, m: dict = m) -> str:
            return f"{fmt_seconds(p[key])} / {fmt_seconds(m.get(key, float('nan')))}"

        comp.add_row(c["model"], c["arch"], pair("compute_flop"), pair("compute_mem"),
                     pair("comm"), pair("data_io"),
                     fmt_seconds(m.get("framework", float("nan"))))
    console.print(comp)
    for f in out.get("failed", []):
        console.print(f"[red]failed:[/red] {f['model']} {f['arch']} b{f['batch_size']}: "
                      f"{f['reason']}")
    for f in out.get("skipped", []):
        console.print(f"skipped: {f['model']} {f['arch']} b{f['batch_size']}: {f['reason']}")
    for d in out.get("disturbed", []):
        console.print(Text("disturbed: ", style="yellow") + Text(
            f"{d['model']} {d['arch']} b{d['batch_size']}: other programs held the cores "
            f"{d['runqueue_wait_fraction']:.0%} of the time of its steps; its measured time is "
            "a busy machine's"))
    console.print(f"median |error| {100 * out['median_abs_error']:.1f}%, p90 "
                  f"{100 * out['p90_abs_error']:.1f}%, max {100 * out['max_abs_error']:.1f}% "
                  f"(paper's additive model: median {100 * out['paper_median_abs_error']:.1f}%)"
                  f" — targets (median <= 15%, none beyond 40%) "
                  + ("[green]met[/green]" if out["targets_met"] else "[red]missed[/red]"))


def _refuse_other_tables(output: Path, kernel_fit: bool) -> None:
    """``-o`` names a file that holds the other kind of calibration: an error, before any work,
    so that one does not replace the other (both default to ``traincast-local.toml``). A
    kernel fit writes ``[kernel_model]`` alone, with ``fitted_on``: it refuses a file with any
    other table (a machine calibration's ``[gpu.local]``, ``[node.local]``, ...); a machine
    calibration (its CUDA host's floor in ``[kernel_model]`` too, without ``fitted_on``)
    refuses a file holding a kernel fit. A file that is not TOML is replaced as before."""
    import tomllib

    try:
        held = tomllib.loads(output.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return
    fitted = "fitted_on" in (held.get("kernel_model") or {})
    other = sorted(set(held) - {"kernel_model"}) if kernel_fit else \
        (["kernel_model"] if fitted else [])
    if other:
        what = "a kernel fit" if kernel_fit else "a machine calibration"
        raise TraincastError(
            f"{output}: holds {', '.join(f'[{t}]' for t in other)}"
            + (" (a kernel fit)" if fitted and not kernel_fit else "")
            + f", which {what} does not write: it would replace them",
            hint="write to another file (-o FILE) and give both with --catalog, or remove it "
                 "first")


def _fit_kernels(directory: list[Path], output: Path, catalog: Path | None,
                 json_out: bool, check: list[Path]) -> None:
    """``calibrate --kernels DIR [--kernels DIR ...] [--check DIR ...] -o FILE``:
    traincast.calibration.kernel_fit on the folders' rows together; each GPU held out in turn,
    and the ``--check`` folders' GPUs priced by the fit (``held_out``)."""
    import shlex
    import time

    from traincast.calibration import kernel_fit
    from traincast.kernels import held_out_range

    kernel_fit.write_fit_checks(output)
    cat = catalog_from([catalog] if catalog else None)
    say = _progress(is_quiet())
    start = time.perf_counter()
    data = kernel_fit.read_kernels(directory, cat)
    unseen = kernel_fit.read_kernels(check, cat) if check else None
    if say:
        say(f"read {len(data):,} measured kernels of "
            f"{plural(len(set(data.gpu.tolist())), 'GPU')}")
    if unseen is not None:
        kernel_fit.refuse_seen_chips(data, unseen, cat, " ".join(map(str, check)))
    kernel_fit.refuse_floorless_folds(data, cat)  # the held-out fits come after the fit
    result = kernel_fit.fit(data, cat, progress=say)
    held_out = kernel_fit.held_out_records(data, result, cat, unseen, progress=say)
    command = "traincast calibrate " + " ".join(
        [f"--kernels {shlex.quote(str(d))}" for d in directory]
        + [f"--check {shlex.quote(str(d))}" for d in check]) + " -o " \
        + shlex.quote(str(output)) + (f" --catalog {shlex.quote(str(catalog))}" if catalog else "")
    kernel_fit.write_fit(output, kernel_fit.fit_document(result, directory, command, held_out))
    if json_out:
        print_json({"path": str(output), "elapsed_s": time.perf_counter() - start, **result,
                    **held_out})
        return
    console.print(f"Wrote [bold]{output}[/bold]: the kernel model fitted to {len(data):,} "
                  f"kernels of {', '.join(result['gpus'])} in "
                  f"{time.perf_counter() - start:.0f} s.", highlight=False)
    unfitted = set(result.get("unfitted", ()))
    for key, value in result["params"].items():
        if key not in unfitted:
            console.print(f"  {key} = {value:.4g}", highlight=False)
    if unfitted:
        err_console.print(Text(
            "warning: the folders hold no kernel of the families that fit "
            + ", ".join(sorted(unfitted))
            + f": not written to {output}, so the catalog it is merged over keeps its own "
            "(docs/model.md, 'The measured-kernel model')", style="yellow"))
    for key in result["at_bound"]:
        lo, hi = kernel_fit.BOUNDS[key]
        err_console.print(f"[yellow]warning:[/yellow] {key} = {result['params'][key]:.4g} is on "
                          f"the edge of its search range [{lo:g}, {hi:g}]: these rows do not pin "
                          "it down (few rows of its family, or one GPU)", highlight=False)
    if held_out["held_out"]:
        console.print("  held out, each with its own host's floor and dispatch ratios, median "
                      f"|error|: {held_out_text(held_out_range(held_out['held_out']))}",
                      highlight=False)
    given = f"--catalog {catalog} " if catalog else ""
    console.print(f"Use: traincast predict {given}--catalog {output} ...", highlight=False)


def _validate_kernels(directory: list[Path], catalog: Path | None, sample: int,
                      json_out: bool) -> None:
    """``validate --kernels DIR [--kernels DIR ...]``: leave-one-GPU-out over the folders' GPUs
    together (traincast.calibration.kernel_fit)."""
    from traincast.calibration import kernel_fit

    cat = catalog_from([catalog] if catalog else None)
    data = kernel_fit.read_kernels(directory, cat, sample=sample)
    out = kernel_fit.leave_one_gpu_out(data, cat, progress=_progress(is_quiet()))
    if json_out:
        print_json({"rows": len(data), **{k: v for k, v in out.items() if k != "held"}})
        return
    from traincast.cli.tables import RULES_OFF, print_table

    table = Table(title=f"Leave-one-GPU-out, {len(data):,} kernels: median/p90 |error| "
                  "(%), sum = error of the GPU's summed time", title_justify="left",
                  **RULES_OFF)  # no vertical rules: the eight columns fit 80
    cols = ("gemm", "conv", "elementwise", "softmax", "norm", "memory")
    table.add_column("GPU", no_wrap=True)
    for c in cols:
        table.add_column("elem." if c == "elementwise" else c, justify="right")
    table.add_column("sum", justify="right")
    for g, row in out["gpus"].items():
        table.add_row(g, *[f"{100 * row[f'{c}_median']:.1f}/{100 * row[f'{c}_p90']:.0f}"
                           if f"{c}_median" in row else "-" for c in cols],
                      f"{100 * row['sum']:+.1f}")
    print_table(table, console)
    console.print("elem. = element-wise; memory = the memory-bound families together; sum = "
                  "predicted over "
                  "measured summed time - 1 (below 0: predicted too fast); - = the data has no "
                  "kernel of that family for the GPU; the held-out GPU is priced "
                  "with its own host's floor and dispatch ratios, as traincast calibrate measures "
                  "them on a CUDA host (--json: default_floor repeats it with the others' median "
                  "floor and fitted ratios, a catalog without that calibration).",
                  highlight=False)
