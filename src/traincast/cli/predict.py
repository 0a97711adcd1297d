"""``traincast predict``: one job's iteration time and breakdown."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from traincast.architectures import ARCHITECTURES
from traincast.bounds import BATCH_MAX
from traincast.cli import app
from traincast.cli.common import (
    MAX_BYTES,
    MAX_FLOPS,
    MAX_GPUS,
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    OverlapOpt,
    catalog_from,
    check_model_spec,
    check_speeds,
    check_text_file,
    console,
    given,
    memory_rates_text,
    one_of,
    parse_number,
    print_full_square_note,
    print_json,
    print_mfu_caution,
    profiling,
    trust_text,
    within,
)
from traincast.cli.tables import Table
from traincast.errors import TraincastError
from traincast.features.io import load_features
from traincast.model import COMPONENT_LABEL, COMPONENT_NAME, COMPONENTS
from traincast.parallel.hybrid import (
    ATTENTION,
    ATTENTION_HELP,
    DEFAULT_FRAMEWORK,
    DTYPES,
    PART_LABEL,
    check_attention,
    check_dtype,
    check_framework,
    recipes,
)
from traincast.parallel.strategies import RECOMPUTE
from traincast.predict import node_assumed
from traincast.predict import predict as predict_job
from traincast.resolve import DEFAULT_NODE
from traincast.units import fmt_amount, fmt_exp, fmt_seconds

ARCH_HELP = ("Training architecture: " + ", ".join(ARCHITECTURES) + " (hybrid: language "
             "models with --dp, --tp, --pp, --ep, --zero ...). Formulas: T_comm in "
             "docs/model.md, hybrid in docs/parallelism.md")
HYBRID_FLAGS = ("dp", "tp", "pp", "ep", "cp", "zero", "shard", "micro_batch", "global_batch",
                "seq", "recompute", "vp", "sp", "dtype", "attention", "framework",
                "uneven_stages", "eager")
"""predict's flags of --arch hybrid only."""
JOB_FLAGS = ("features", "flops", "mem_bytes", "weight_bytes", "embedding_bytes", "input_bytes",
             "batch", "gpus_per_node", "workers", "ps", "amp", "hierarchical", "per_op",
             "synthetic_inputs", "memory_format", "tf32_matmul")
"""predict's flags of the other architectures (a job given by its features), not hybrid's."""
HIERARCHICAL_ARCHS = ("allreduce-cluster", "pearl")
FEATURE_BOUNDS = {"flops_compute_bound": ("--flops", MAX_FLOPS),
                  "bytes_memory_bound": ("--mem-bytes", MAX_BYTES),
                  "weight_bytes": ("--weight-bytes", MAX_BYTES),
                  "embedding_bytes_touched": ("--embedding-bytes", MAX_BYTES),
                  "input_bytes": ("--input-bytes", MAX_BYTES)}
FIELD_FLAGS = {"n_gpus": "--gpus", "gpus_per_node": "--gpus-per-node", "architecture": "--arch",
               "node": "--node", "gpu_type": "--gpu", "n_workers": "--workers", "n_ps": "--ps",
               "nic": "--nic", "intra": "--intra", "pcie": "--pcie"}


def with_flags(exc: TraincastError) -> TraincastError:
    """The core names a job's fields (``(field n_gpus)``); on the command line, name flags."""
    message = str(exc)
    for field, flag in FIELD_FLAGS.items():
        message = message.replace(f"(field {field})", f"({flag})")
    return TraincastError(message, exc.hint)


def check_job_flags(arch: str, gpus: int | None, workers: int | None, ps: int | None,
                    hierarchical: bool = False) -> None:
    """Job flags that contradict each other or do not apply to ``arch`` are an error naming
    them: --workers and --ps belong to ps-worker, where one GPU runs one worker, so --gpus
    (``gpus``: None when not given) and --workers must agree when both are given;
    --hierarchical belongs to allreduce-cluster and pearl."""
    for flag, value in (("--workers", workers), ("--ps", ps)):
        if value is not None and arch != "ps-worker":
            raise TraincastError(f"{flag} applies to --arch ps-worker only, not {arch}",
                                 hint=f"leave out {flag}, or use --arch ps-worker")
    if arch == "ps-worker" and workers is not None and gpus is not None and gpus != workers:
        raise TraincastError(f"--gpus {gpus} and --workers {workers} disagree: ps-worker runs "
                             "one GPU per worker", hint="give --workers M (M GPUs), or --gpus N "
                             "alone (N workers)")
    if hierarchical and arch not in HIERARCHICAL_ARCHS:
        raise TraincastError(f"--hierarchical applies to --arch {' or '.join(HIERARCHICAL_ARCHS)}"
                             f", not {arch}", hint="leave out --hierarchical")


def check_features(feats: dict[str, Any], where: str) -> dict[str, Any]:
    """The job's feature values must be finite, not negative and within the bounds of their
    flags (:data:`FEATURE_BOUNDS`): else a TraincastError naming the feature and ``where``
    (the flag or file they came from)."""
    for key, (flag, high) in FEATURE_BOUNDS.items():
        value = feats.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TraincastError(f"{where}: {key} must be a number, got {value!r}")
        if not 0 <= value <= high:  # also refuses nan and inf
            raise TraincastError(f"{where}: {key} = {value!r} is out of bounds (from 0 to "
                                 f"{high:g}, as {flag})", hint="check the exponent")
    fused, plain = feats.get("bytes_memory_bound_fused"), feats.get("bytes_memory_bound")
    if isinstance(fused, int | float) and isinstance(plain, int | float) and fused > plain:
        raise TraincastError(f"{where}: bytes_memory_bound_fused = {fused!r} is above "
                             f"bytes_memory_bound = {plain!r} (fusing ops only removes bytes)")
    return feats


def features_from_flags(features: Path | None, model: str | None, batch: int | None,
                        flops: str | None, mem_bytes: str | None, weight_bytes: str | None,
                        embedding_bytes: str | None, input_bytes: str | None,
                        amp: bool, ops: bool = False) -> dict[str, Any]:
    """The job's features from exactly one of --features, --model, or --flops/--mem-bytes/...
    (``ops``: a --model profile keeps its per-op table, priced op by op)."""
    sources = [x is not None for x in (features, model, flops)]
    if sum(sources) != 1:
        raise TraincastError("give exactly one of --features FILE, --model MODEL, or "
                             "--flops F --mem-bytes B --weight-bytes W")
    if batch is not None and model is None:
        raise TraincastError("--batch applies to --model: a features file holds the batch it "
                             "was profiled at, and --flops the work of one iteration",
                             hint="profile again with --batch N, or give --model")
    if features is not None:
        check_text_file(features, "--features", "features",
                        text=features.suffix.lower() not in (".parquet", ".pq"))
        return check_features(load_features(features), str(features))
    if model is not None:
        check_model_spec(model, "--model")
        from traincast.features.profile import profile_model  # needs torch: imported on demand

        with profiling(model):
            return profile_model(model, batch_size=batch, amp=amp, ops=ops)
    if mem_bytes is None or weight_bytes is None:
        raise TraincastError("--flops needs --mem-bytes and --weight-bytes too")
    return {"flops_compute_bound": parse_number(flops, "--flops", MAX_FLOPS, "flops"),
            "bytes_memory_bound": parse_number(mem_bytes, "--mem-bytes", MAX_BYTES, "bytes"),
            "weight_bytes": parse_number(weight_bytes, "--weight-bytes", MAX_BYTES, "bytes"),
            "embedding_bytes_touched": parse_number(embedding_bytes or "0", "--embedding-bytes",
                                                    MAX_BYTES, "bytes"),
            "input_bytes": parse_number(input_bytes or "0", "--input-bytes", MAX_BYTES, "bytes")}


@app.command()
def predict(
    ctx: typer.Context,
    arch: Annotated[str, typer.Option("--arch", help=ARCH_HELP)] = "1w1g",
    features: Annotated[Path | None, typer.Option(help="Features JSON (traincast profile -o).")]
    = None,
    model: Annotated[str | None, typer.Option(
        help="zoo:NAME, hf:CONFIG or file.py:FUNC (imported: the file's code runs).")] = None,
    batch: Annotated[int | None, typer.Option(
        callback=within(1), help="Batch size per GPU (per data-parallel replica) for --model; "
        "default the model's own (traincast zoo list).")] = None,
    flops: Annotated[str | None, typer.Option(
        help=f"FLOPs of compute-bound ops per iteration, at most {fmt_exp(MAX_FLOPS)} (2.4e13, "
        "24T or 24TFLOP: k/M/G/T decimal, M mega, not m; the byte flags alike, ending in B "
        "for bytes, or with KiB/MiB/GiB binary prefixes; b, bits, is refused).")] = None,
    mem_bytes: Annotated[str | None, typer.Option(
        help="Bytes read+written by memory-bound ops per iteration.")] = None,
    weight_bytes: Annotated[str | None, typer.Option(
        help="Dense parameter bytes (= gradient bytes exchanged).")] = None,
    embedding_bytes: Annotated[str | None, typer.Option(
        help="Embedding bytes touched per iteration.")] = None,
    input_bytes: Annotated[str | None, typer.Option(
        help="Input batch bytes copied to the GPU per iteration.")] = None,
    gpus: Annotated[int, typer.Option(
        callback=within(1, MAX_GPUS), help="GPUs of the job (n); ps-worker: the workers' "
        "(--workers, if given, must agree).")] = 1,
    gpus_per_node: Annotated[int | None, typer.Option(
        callback=within(1, MAX_GPUS),
        help="GPUs per node used by the job (g); default min(n, node GPUs).")] = None,
    workers: Annotated[int | None, typer.Option(
        callback=within(1, MAX_GPUS), help="ps-worker only: workers m (1 GPU each).")] = None,
    ps: Annotated[int | None, typer.Option(
        callback=within(1, MAX_GPUS), help="ps-worker only: parameter servers p (default 1).")]
    = None,
    node: Annotated[str | None, typer.Option(
        help="Node preset (traincast hardware list; default: the --gpu's own node preset, else "
             f"a --catalog file's [defaults] node, else {DEFAULT_NODE}, or dgx-a100 with "
             "--arch hybrid).")] = None,
    gpu: Annotated[str | None, typer.Option(
        help="GPU or alias, overriding the node's (default: the node's).")] = None,
    nic: Annotated[str | None, typer.Option(
        help="NIC link name (eth25: its framing efficiency and latency) or speed (25Gbit: "
             "all of it payload, no latency); default: the node's.")] = None,
    intra: Annotated[str | None, typer.Option(
        help="GPU-GPU link inside the node, a name or a speed as --nic (default: the node's).")]
    = None,
    pcie: Annotated[str | None, typer.Option(
        help="GPU-host link, a name or a speed as --nic (default: the node's).")] = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    overlap: OverlapOpt = 0.0,
    amp: Annotated[bool, typer.Option(
        "--amp", help="Mixed precision: FLOP-bound work at the fp16 (else bf16) matrix peak.")
    ] = False,
    hierarchical: Annotated[bool, typer.Option(
        "--hierarchical", help="allreduce-cluster and pearl: hierarchical all-reduce "
        "(intra-node ring, then across nodes).")] = False,
    per_op: Annotated[bool, typer.Option(
        "--per-op/--aggregate", help="--model: price compute op by op from the profile's "
        "per-op table (as validate --published and trace workloads do), or from its aggregate "
        "FLOPs and bytes.")] = True,
    synthetic_inputs: Annotated[bool, typer.Option(
        "--synthetic-inputs", help="The data is made on the GPU (benchmarks' synthetic "
        "data): no input copy, input_bytes = 0.")] = False,
    memory_format: Annotated[str, typer.Option(
        "--memory-format", help="nchw or nhwc (channels_last: no cuDNN layout transposes; "
        "needs the per-op table).")] = "nchw",
    tf32_matmul: Annotated[bool, typer.Option(
        "--tf32-matmul", help="fp32 matrix products in TF32 (allow_tf32, as NGC containers "
        "set; needs the per-op table).")] = False,
    json_out: JsonOpt = False,
    dp: Annotated[int, typer.Option(callback=within(1),
                                    help="hybrid: data-parallel size.")] = 1,
    tp: Annotated[int, typer.Option(callback=within(1),
                                    help="hybrid: tensor-parallel size.")] = 1,
    pp: Annotated[int, typer.Option(callback=within(1),
                                    help="hybrid: pipeline stages.")] = 1,
    ep: Annotated[int, typer.Option(callback=within(1),
                                    help="hybrid: expert-parallel size.")] = 1,
    cp: Annotated[int, typer.Option(callback=within(1), help=(
        "hybrid: context-parallel size: each sequence split over cp GPUs (2 cp must divide "
        "--seq; needs a fused --attention), the key/value chunks passed around a ring and "
        "overlapped with attention; GPUs = dp x tp x pp x cp."))] = 1,
    zero: Annotated[int | None, typer.Option(
        callback=within(0, 3), help="hybrid: ZeRO stage 0 to 3 (default: the --framework "
        "recipe's, else 0); 2 and 3 need --pp 1, but under torchtitan, which prices them "
        "with a pipeline as ZeRO 1.")] = None,
    shard: Annotated[int | None, typer.Option(
        callback=within(1), help="hybrid: HSDP: ZeRO shards the model state over this many "
        "of the dp x cp data-parallel ranks (a divisor; typically one node's) and replicates "
        "it over the rest: its collectives in the shard group, then an all-reduce of each "
        "gradient shard across the r = dp x cp / N replicas, 2(r-1)/r of it per GPU (PyTorch "
        "FSDP HYBRID_SHARD; needs --zero 1 to 3 and --ep 1; default: all ranks).")] = None,
    micro_batch: Annotated[int, typer.Option(
        callback=within(1, BATCH_MAX), help="hybrid: sequences per micro-batch, 1 to 1e9.")] = 1,
    global_batch: Annotated[int | None, typer.Option(
        callback=within(1, BATCH_MAX), help="hybrid: sequences per iteration B, 1 to 1e9 (default: "
        "about 4M tokens, B = k max(1, round(2^22 / (s k))) with k = dp x micro-batch, x pp "
        "with --vp > 1; the default of traincast plan).")] = None,
    seq: Annotated[int | None, typer.Option(
        callback=within(1), help="hybrid: sequence length, at least 1 (default: the "
        "model's; the pre-training one of a RoPE-scaled config).")] = None,
    recompute: Annotated[str, typer.Option(
        help=f"hybrid: {one_of(RECOMPUTE)}; selective is the --framework's (Megatron's "
             "attention core, which with a fused attention reruns its forward and frees "
             "nothing priced: none is faster; torchtitan's op policy, selective-op)."
    )] = "selective",
    vp: Annotated[int, typer.Option(callback=within(1),
                                    help="hybrid: interleaved chunks per stage.")] = 1,
    uneven_stages: Annotated[bool, typer.Option(
        "--uneven-stages", help="hybrid: layers need not divide over pp x vp chunks; the "
        "slowest stage holds ceil(layers / (pp x vp)) per chunk (Llama 3.1 405B's 126 "
        "layers on pp 16).")] = False,
    sp: Annotated[bool | None, typer.Option(
        "--sp/--no-sp", help="hybrid: sequence parallelism (default: on where --tp > 1).")]
    = None,
    dtype: Annotated[str, typer.Option(help=f"hybrid: {one_of(DTYPES)}.")] = "bf16",
    attention: Annotated[str | None, typer.Option(
        help=f"hybrid: {one_of(ATTENTION)} ({ATTENTION_HELP}; default: the --framework "
        "recipe's).")] = None,
    framework: Annotated[str, typer.Option(
        help=f"hybrid: framework recipe, {one_of(recipes())}: its attention, dropout, ZeRO "
        "and layer-kernel defaults, what --recompute selective runs and whether ZeRO 2/3 "
        "takes a pipeline (Framework recipes in the parallelism docs); --attention, --zero "
        "and --eager override them.")] = DEFAULT_FRAMEWORK,
    eager: Annotated[bool | None, typer.Option(
        "--eager/--no-eager", help="hybrid: the layer's RMSNorms, rotary embedding and gated "
        "activation as eager PyTorch ops, one kernel per op, as a stack without torch.compile "
        "runs them (default: the --framework recipe's: torchtitan's are eager).")] = None,
) -> None:
    """Predict one training iteration's time and its breakdown.

    T_total = T_data + T_comp_flop + T_comp_mem + T_comm; with overlap f: T_data + max(T_comp,
    f·T_comm) + (1−f)·T_comm. T_data = input_bytes / bw(pcie); T_comp_flop = FLOPs / R_flop;
    T_comp_mem = bytes / R_mem. The rates (--compute auto: the GPU's catalog entry decides):
    with SM figures, the kernel model, R_flop = peak × eta (fp32: the fitted measured-kernel
    model; tensor cores: the published large-product fraction) and R_mem = mem_bw ×
    f_elementwise, op by op where the job has a per-op table (tiles, waves, the host's issue
    time; a product whose operands take longer to move than its FLOPs to compute, below the
    GPU's ridge point, is priced by its bytes and counted in T_comp_mem, so T_comp_flop can
    be less than the profile's FLOPs / R_flop); with curves from calibrate, the measured
    curves; else (--compute paper) peak × flop_efficiency and mem_bw × mem_efficiency.
    bw(x) = GB/s × 1e9 × efficiency. T_comm (W weight bytes, E embedding bytes touched, E_ar
    embedding bytes an AllReduce moves (whole tables with dense gradients), n GPUs, g per node
    (default packed: min(n, node GPUs)), N = ceil(n/g) nodes, R = min(node NICs, g) rails):

    - 1w1g: 0
    - allreduce-local (all n GPUs on one node): 2(n−1)/n · (W+E_ar) / bw(intra)
    - allreduce-cluster: 2(n−1)/n · (W+E_ar) / min(bw(intra), R·bw(nic)); --hierarchical:
      2(g−1)/g · (W+E_ar)/bw(intra) + 2(N−1)/N · (W+E_ar)/(R·bw(nic))
    - ps-worker (m workers, p servers (default 1), k = min(g, m) per node): 2(W+E)/bw(pcie) +
      max(2(W+E)·k/(min(NICs, k)·bw(nic)), 2m(W+E)/(p·bw(nic)))
    - pearl: T_ring(W) + 2E(n−1)/n / bw(ring link), T_ring(W) allreduce-cluster's time for W
    - hybrid (table rows): the all-reduce of allreduce-cluster

    The paper's architectures: bandwidth only (a link's latency is not counted), no overlap by
    default, as the paper; the hybrid model adds each link's latency per message (a speed
    typed as --nic 25Gbit has none). Details: docs/model.md, docs/parallelism.md.

    Flags of another architecture than --arch are an error (--workers with allreduce-local,
    --dp without hybrid), and so are --gpus and --workers that disagree. Bounds: --flops at
    most 1e24 FLOPs per iteration, byte flags at most 1e18 bytes, GPU, worker and server counts
    at most 1,000,000; every number finite.
    """
    if arch not in ARCHITECTURES:
        raise TraincastError(f"unknown architecture {arch!r} (--arch)",
                             hint=f"choose one of {', '.join(ARCHITECTURES)}")
    check_dtype(dtype)
    check_framework(framework)
    check_speeds(nic=nic, intra=intra, pcie=pcie)
    if arch == "hybrid":
        stray = given(ctx, *JOB_FLAGS)
        if stray:
            raise TraincastError(f"{', '.join(stray)} {'does' if len(stray) == 1 else 'do'} "
                                 "not apply to --arch hybrid",
                                 hint="--arch hybrid prices --model with --dp, --tp, --pp, "
                                      "--micro-batch, ... (traincast predict --help)")
    else:
        stray = given(ctx, *HYBRID_FLAGS)
        if stray:
            profiled = {"--attention": "attention implementation", "--seq": "sequence"}
            raise TraincastError(f"{', '.join(stray)} {'applies' if len(stray) == 1 else 'apply'}"
                                 f" to --arch hybrid only, not {arch}",
                                 hint=f"leave out {stray[0]}, or use --arch hybrid"
                                 + (f"; a per-op profile takes its {profiled[stray[0]]} when "
                                    f"it is made: traincast profile MODEL {stray[0]} ... -o "
                                    "FILE, then predict --features FILE"
                                    if stray[0] in profiled else ""))
        check_job_flags(arch, gpus if given(ctx, "gpus") else None, workers, ps, hierarchical)
    if attention is not None:
        check_attention(attention)
    cat = catalog_from(catalog, compute)
    if arch == "hybrid":
        from traincast.parallel.hybrid import predict_hybrid

        if model is None:
            raise TraincastError("--arch hybrid needs --model zoo:NAME or hf:config.json")
        n_gpus = dp * tp * pp * cp
        if n_gpus > MAX_GPUS:
            raise TraincastError(f"--dp {dp} x --tp {tp} x --pp {pp} x --cp {cp} = {n_gpus:,} "
                                 f"GPUs is out of bounds (at most {MAX_GPUS:,})",
                                 hint="check the sizes")
        if gpus not in (1, n_gpus):
            raise TraincastError(f"--gpus {gpus} must equal dp x tp x pp x cp = {n_gpus}",
                                 hint="leave out --gpus (--arch hybrid counts dp x tp x pp x "
                                      "cp), or change --dp, --tp, --pp or --cp")
        node_name = node or (cat.default_node_of(gpu) if gpu else "") or cat.fallback_node \
            or "dgx-a100"
        result = predict_hybrid(model, node=node_name, dp=dp, tp=tp, pp=pp, ep=ep, cp=cp,
                                zero=zero, shard=shard, micro_batch=micro_batch,
                                global_batch=global_batch,
                                seq=seq, recompute=recompute, vp=vp, sp=sp, dtype=dtype,
                                uneven_stages=uneven_stages,
                                overlap=overlap, gpu=gpu, nic=nic, intra=intra, pcie=pcie,
                                catalog=cat, attention=attention, framework=framework,
                                eager=eager)
        from traincast.parallel.validation import shipped_gpu_checks

        result["published_checks"] = shipped_gpu_checks(result["hardware"]["gpu"],
                                                        dtype=result["job"]["dtype"])
        result["hardware"]["node_assumed"] = node_assumed(cat, gpu, node)
        if json_out:
            print_json(result)
        else:
            render_hybrid(result)
        return
    from traincast.validation.published import apply_setup, memory_layout, setup_of

    per_op_flags = memory_layout(memory_format) != "nchw" or tf32_matmul
    if per_op_flags and (flops is not None or not per_op):
        raise TraincastError("--memory-format and --tf32-matmul change how a per-op table is "
                             "priced; " + ("--flops gives aggregate features, which have none"
                                           if flops is not None else "--aggregate leaves it out"),
                             hint="give --model or --features FILE (traincast profile -o)"
                             if flops is not None else "leave out --aggregate")
    if flops is not None and (said := given(ctx, "per_op")):
        raise TraincastError(f"{said[0]} chooses how a profile's compute is priced; --flops "
                             "gives aggregate features, which are priced as they are",
                             hint=f"leave out {said[0]}, or give --model or --features FILE")
    if synthetic_inputs and input_bytes is not None:
        raise TraincastError("--input-bytes and --synthetic-inputs disagree: synthetic data is "
                             "made on the GPU, no input is copied (input_bytes = 0)",
                             hint="leave out one of them")
    feats = features_from_flags(features, model, batch, flops, mem_bytes, weight_bytes,
                                embedding_bytes, input_bytes, amp, ops=per_op)
    if not per_op:
        feats = {k: v for k, v in feats.items() if k != "ops"}
    if per_op_flags and not feats.get("ops"):
        raise TraincastError("--memory-format and --tf32-matmul change how a per-op table is "
                             "priced; the file has no per-op table",
                             hint="profile with it: traincast profile MODEL -o FILE (without "
                                  "--no-ops)")
    setup = {"synthetic_inputs": synthetic_inputs, "memory_format": memory_format,
             "tf32_matmul": tf32_matmul}
    # under --amp autocast runs the products in 16 bits: no fp32 product is left for TF32
    mixed = amp or bool(feats.get("amp", False))
    feats = apply_setup(feats, **{**setup, "tf32_matmul": tf32_matmul and not mixed})
    try:
        result = predict_job(feats, arch=arch, gpus=gpus, gpus_per_node=gpus_per_node,
                             workers=workers, ps=ps, node=node, gpu=gpu, nic=nic, intra=intra,
                             pcie=pcie, catalog=cat, overlap=overlap,
                             amp=mixed,
                             hierarchical=hierarchical).to_dict()
    except TraincastError as exc:
        raise with_flags(exc) from None
    result["setup"] = setup_of(feats, **setup, per_op_asked=per_op,
                               from_flags=features is None and model is None, amp=amp,
                               gpu=cat.gpu(result["hardware"]["gpu"]))
    result["notes"] = record_notes(feats)
    # what one iteration is: the batch the features were profiled at (per replica) and seq
    result["job"]["batch_per_replica"] = feats.get("batch_size")
    result["job"]["seq"] = feats.get("seq_len")
    if json_out:
        print_json(result)
        return
    render_prediction(result)


def record_notes(feats: dict[str, Any]) -> list[str]:
    """The profile record's ``notes`` as lines: a list's items as text, one string as one
    line, anything else nothing (a hand-written features file may carry notes of its own)."""
    notes = feats.get("notes")
    if isinstance(notes, str):
        return [notes]
    return [str(n) for n in notes if n is not None] if isinstance(notes, list) else []


def batch_text(job: dict[str, Any]) -> str:
    """One iteration's samples: the profile's batch per replica (a worker of ps-worker, else
    a GPU) and the global batch over the replicas, with the tokens per sequence; empty for
    features without a batch (--flops)."""
    batch = job.get("batch_per_replica")
    if not batch:
        return ""
    replicas = (job.get("workers") if job["arch"] == "ps-worker" else job["gpus"]) or 1
    seq, unit = job.get("seq"), "worker" if job["arch"] == "ps-worker" else "GPU"
    return (f"one iteration: batch {batch:,} per {unit}"
            + (f", {batch * replicas:,} over the {replicas:,} replicas" if replicas > 1 else "")
            + (f"; {seq:,} tokens per sequence" if seq else "") + " (as profiled)")


def node_assumed_text(hw: dict[str, Any]) -> Text | None:
    """The line that says a GPU without a node preset took the default node's links."""
    if not hw.get("node_assumed"):
        return None
    return Text(f"assumed: no node preset of the catalog holds {hw['gpu']}: its links are "
                f"{hw['node']}'s (give --node, or a [node] with gpu = \"{hw['gpu']}\" or "
                "default_node in its entry, docs/hardware.md)", style="yellow")


def stand_in_text(hw: dict[str, Any]) -> Text | None:
    """The line that says the job's communication is priced over a link never measured."""
    links = hw.get("links_stand_in") or {}
    if not links:
        return None
    return Text("assumed: " + "; ".join(f"link {n} is a stand-in" + (f" ({source})" if source
                                                                      else "")
                                       for n, source in links.items())
                + ": the communication rests on a figure nobody measured on that link "
                "(traincast calibrate without --no-comm measures the local ones)",
                style="yellow")


MISALIGNED_SHOWN_SHARE = 0.001
"""The share of a step's matrix-product FLOPs from which predict names its misaligned products
(in ``--json`` always: ``misaligned``, null when none is charged or the step is not priced op
by op under the kernel strategy)."""
HOST_WAIT_LABEL = "  of both compute rows: GPU waits for the host"
"""The row under the compute rows: the part of both (FLOP- and memory-bound) that the GPU
spends waiting for the host to issue its ops, which can exceed either one alone."""
HOST_WAIT_SHOWN_SHARE = 0.01
"""The share of the step from which predict's table shows the GPU's wait for the host (in
``--json`` always: ``time_s.host_wait``)."""


def render_prediction(result: dict[str, Any]) -> None:
    """A rich table of one prediction: components in seconds and percent, then the bottleneck."""
    job, hw = result["job"], result["hardware"]
    title = (f"{job['arch']} ({job['arch_label']}), {job['gpus']} GPU(s) on {job['nodes']} "
             f"node(s) of {hw['node']} — {hw['gpu']}")
    table = Table(title=title, title_justify="left")
    table.add_column("component")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    wait = result["time_s"].get("host_wait") or 0.0
    total = sum(result["time_s"][c] or 0.0 for c in COMPONENTS)  # the shares' denominator
    for c in COMPONENTS:
        share = result["share"][c]  # null for a step of no work: no share of nothing
        table.add_row(COMPONENT_LABEL[c], fmt_seconds(result["time_s"][c]),
                      "-" if share is None else f"{100 * share:.1f}%")
        if c == "compute_mem" and total and wait >= HOST_WAIT_SHOWN_SHARE * total:
            table.add_row(HOST_WAIT_LABEL, fmt_seconds(wait),
                          f"({100 * wait / total:.1f}%)", style="dim")
    hidden = total - (result["time_s"]["total"] or 0.0)  # --overlap: comm under compute
    shows_hidden = bool(total) and hidden > 1e-9 * total
    if shows_hidden:
        table.add_row(f"hidden: communication under compute (--overlap {job['overlap']:g})",
                      f"−{fmt_seconds(hidden)}", f"(−{100 * hidden / total:.1f}%)", style="dim")
    table.add_row("total per iteration", fmt_seconds(result["time_s"]["total"]),
                  f"{100 * (total - hidden) / total:.1f}%" if shows_hidden else
                  "100%" if total else "-", style="bold")
    table.caption = "share = of the four components' sum"
    table.caption_justify = "left"
    console.print(table)
    label = result.get("bottleneck_label")
    if result.get("bottleneck") in (None, "unknown") or label in (None, "unknown"):
        label = "none (every component is 0 s)" if result["time_s"]["total"] == 0 else "unknown"
    util = result.get("gpu_util")
    util_text = f"{100 * util:.0f}%" if isinstance(util, int | float) and util == util else "n/a"
    unit = "CPU" if hw.get("device") == "cpu" else "GPU"
    console.print(f"Bottleneck: [bold]{label}[/bold]. Predicted {unit} utilization {util_text}.")
    if said := batch_text(job):
        console.print(said, style="dim")
    mem = result.get("memory")
    if isinstance(mem, dict) and mem.get("fits") is None:
        console.print(Text(f"memory not checked on {hw['gpu']}: the catalog entry gives no "
                           f"mem_gb (the job needs {mem['footprint_gb']:.3g} GB per GPU; add "
                           "mem_gb to the entry, docs/hardware.md)", style="yellow"))
    if isinstance(mem, dict) and mem.get("fits") is False:
        state = mem.get("state_gb", 0.0)
        how = (f"the weights, gradients and optimizer state alone take {state:.3g} GB, which "
               "no batch size changes: choose a GPU with more memory, or profile a lighter "
               "optimizer (profile --optimizer sgd); sharded over GPUs (ZeRO, FSDP): predict "
               "--arch hybrid, for a decoder-only LLM" if state > mem["capacity_gb"] else
               "profile a smaller --batch, or choose a GPU with more memory")
        console.print(f"[red]Does not fit: {mem['footprint_gb']:.3g} GB per GPU of "
                      f"{mem['capacity_gb']:.3g} GB[/red] ({how}; the time is for the job as "
                      "given).")
    links = ", ".join(f"{r} {hw[r]} ({hw[r + '_bw_gbs']:.3g} GB/s effective)"
                      for r in ("pcie", "intra", "nic"))
    if result.get("setup"):
        from traincast.validation.published import setup_text

        console.print(Text("setup: " + setup_text(result["setup"]), style="dim"))
    curves = hw["compute"] == "curves"  # a calibrated entry: its peak is a measured point too
    peak, rate = ("best measured", "at the curves' largest point") if curves else \
        ("peak", "achievable")
    console.print(f"[dim]compute by the {hw['compute']} strategy: {unit} {peak} "
                  f"{hw['peak_tflops']:.4g} TFLOP/s, {hw['achievable_tflops']:.4g} {rate} for "
                  f"large GEMMs; memory {hw['mem_bw_gbs']:.4g} GB/s, "
                  f"{hw['achievable_mem_gbs']:.4g} GB/s {rate}; {links}; overlap "
                  f"{job['overlap']:g}.[/dim]")
    if hw.get("compute_asked") == "curves" and hw["compute"] != "curves":
        console.print(Text(
            f"assumed: --compute curves, but {hw['gpu']} has no measured curves (traincast "
            f"calibrate writes them for the machine it runs on): priced by the "
            f"{hw['compute']} strategy, the flat peak times flop_efficiency "
            f"({hw['flop_efficiency']:g}); leave --compute out for the catalog's default (the "
            "kernel model, where the entry has an SM count)",
            style="yellow"))
    if hw["compute"] == "kernel" and not job.get("amp") and hw.get("fp32_unthrottled_by"):
        console.print(Text(
            f"assumed: fp32 on {hw['gpu']} at its boost clock, not held to a power limit: the "
            f"entry gives no {' or '.join(hw['fp32_unthrottled_by'])} (the sustained clock of "
            "docs/model.md, \"The measured-kernel model\", needs them)", style="yellow"))
    for said in (node_assumed_text(hw), stand_in_text(hw)):
        if said:
            console.print(said)
    setup = result.get("setup") or {}
    for note in result.get("notes") or ():
        console.print(Text("note: " + note, style="dim"))
    if setup.get("amp_unprofiled"):
        console.print(Text(
            "assumed: --amp on a profile recorded without autocast: its matrix products and "
            "convolutions are priced in 16 bits, but its memory-bound ops and its memory stay "
            "fp32 as recorded (profile with autocast: traincast profile MODEL --amp -o FILE)",
            style="yellow"))
    if setup.get("tf32_matmul_why") == "gpu":
        console.print(Text(
            f"--tf32-matmul changes nothing on {hw['gpu']}: its entry gives no TF32 peak, so "
            "its fp32 products run at the fp32 peak" + (
                " (TF32 tensor cores came with NVIDIA compute capability 8.0; PyTorch ignores "
                "allow_tf32 without them)" if hw.get("vendor", "nvidia") == "nvidia" else ""),
            style="yellow"))
    elif setup.get("tf32_matmul_why") == "no faster":
        console.print(Text(
            f"--tf32-matmul changes nothing on {hw['gpu']}: its TF32 tensor-core peak is no "
            "higher than its FP32 one, so its fp32 products are priced on the CUDA cores "
            "(TF32 permits tensor cores, it does not force them; docs/model.md)",
            style="yellow"))
    elif setup.get("tf32_matmul_no_effect"):
        console.print(Text(
            "--tf32-matmul changes nothing here: the job has no fp32 matrix products to run "
            "in TF32 (under mixed precision they run in 16 bits)", style="yellow"))
    if hw.get("amp_dtype") == "fp32":
        console.print(Text(f"assumed: --amp on {hw['gpu']}, whose entry gives no fp16 or bf16 "
                           "peak: it is priced as fp32 (the fp32 peak and fp32 operands)",
                           style="yellow"))
    if result.get("tf32_unpriced"):
        console.print(Text(
            f"assumed: TF32 ops on {hw['gpu']} (fp32 convolutions, which cuDNN runs as TF32 by "
            "default, and --tf32-matmul products) at its fp32 peak: the entry gives no "
            "tf32_tflops, though its compute capability has TF32 tensor cores (add tf32_tflops "
            "to the entry, docs/hardware.md)",
            style="yellow"))
    issue_s = result.get("host_issue_s")
    if hw["compute"] != "kernel" and issue_s and result["time_s"]["total"] < issue_s:
        fix = ("--compute kernel prices it with the kernel model"
               if result.get("kernel_strategy_available") else
               f"the kernel model would price it, but the catalog entry of {hw['gpu']} has no "
               "SM count or GEMM fraction for it (traincast hardware show)")
        console.print(Text(f"caution: the {hw['compute']} strategy does not charge the host's "
                           f"issue of each op at the kernel model's floor: the host alone takes "
                           f"{fmt_seconds(issue_s)} to issue these ops, longer than this step; "
                           f"{fix} (docs/model.md).", style="yellow"))
    bad = result.get("misaligned")
    if bad and bad["flop_share"] >= MISALIGNED_SHOWN_SHARE:
        big = bad["largest"]
        console.print(Text(
            f"misaligned: {bad['products']} matrix product(s) per step, "
            f"{100 * bad['flop_share']:.1f}% of the products' FLOPs, have a size that is no "
            f"multiple of 16 bytes and are priced up to {bad['slowdown_max']:.3g}x slower "
            f"(cuBLAS's narrow-load kernels on {hw['gpu']}; the largest, {big['op']} "
            f"{big['shape']}, {big['slowdown']:.3g}x): "
            "padding that size (a vocabulary, say) to a multiple of 64 removes it "
            "(docs/model.md, \"Misaligned tensor-core products\").", style="yellow"))
    km = hw.get("kernel_model")
    if km:
        console.print(Text(kernel_model_text(hw["gpu"], km, bool(job.get("amp"))), style="dim"))
        if job.get("amp") and hw.get("amp_dtype") not in (None, "fp32"):
            eta = hw["achievable_tflops"] / hw["peak_tflops"] if hw["peak_tflops"] else 0.0
            console.print(Text(
                f"Its {hw['amp_dtype']} products run on matrix units at {eta:.2f} of the dense "
                f"peak, the large-GEMM fraction "
                + ("assumed for a GPU without a published figure (the median of the "
                   "published ones, docs/hardware.md)" if hw.get("gemm_fraction_default") else
                   "the catalog cites for it (traincast hardware show)")
                + ", times each product's tile and wave efficiency: no measured kernel of the "
                "fit checks them, so the error figures above are of its memory-bound kernels "
                "only.", style="dim"))
    elif hw["compute"] == "kernel" and not (result.get("setup") or {}).get("per_op", True):
        console.print(Text(aggregate_text(result["setup"]), style="dim"))


def aggregate_text(setup: dict[str, Any]) -> str:
    """What ``predict`` says of a prediction from aggregate features under the kernel strategy,
    and how to get the op-by-op time from where the features came (``setup_of``)."""
    how = ("Profile the model (traincast profile MODEL -o FILE) for" if setup.get("from_flags")
           else "Write the profile with -o FILE (it keeps the per-op table) for"
           if setup.get("no_ops_table") else
           "Leave out --aggregate for")
    host = "" if setup.get("from_flags") else (
        "no faster than the host issues the profile's ops at the cheapest op's floor, ")
    return ("From aggregate features every FLOP runs at the large-GEMM rate and every "
            f"memory-bound byte at the rate above, {host}without the per-op model's tiles, "
            "waves and dispatch per kind: a lower bound of the op-by-op time (except where "
            "fp32 convolutions run in TF32): 2-21% below it for large training steps on fast "
            "GPUs, up to two fifths for small ones (BERT-base at batch 1 on H100: 38%; "
            f"docs/validation.md). {how} the op-by-op time and how far to trust it.")


def kernel_model_text(gpu: str, km: dict[str, Any], amp: bool) -> str:
    """What the measured-kernel model priced a per-op table with (``kernels.simt_figures``)
    and how far to trust it on this GPU (``kernels.fit_trust``)."""
    products = "" if amp else (
        f"fp32 products from the SIMT rate R = {km['simt_tflops']:.3g} TFLOP/s (sustained "
        f"clock {km['sustained_clock_mhz']:.0f} MHz, {km['clock_fraction']:.2f} of boost) by "
        "their tiles and waves, ")
    return (f"op by op, the measured-kernel model: {products}memory-bound kernels at "
            f"{memory_rates_text(km)}, the host's floor {km['floor_us']:.1f} µs per op times "
            f"its kind's ratio (traincast hardware show {gpu}). " + trust_text(gpu, km, amp))


def hybrid_compute_text(hw: dict[str, Any]) -> str:
    """How the hybrid model priced the GPU's compute: the strategy, the dense peak and the GEMM
    rate's share of it; under ``paper`` that the peaks are taken flat, and why
    (``compute_why``)."""
    text = (f"compute by the {hw['compute']} strategy on {hw['gpu']}: dense peak "
            f"{hw['peak_tflops']:g} TFLOP/s, GEMMs at {hw['gemm_efficiency']:.2f} of it, memory "
            f"{hw['mem_bw_gbs']:g} GB/s")
    if hw["compute"] == "paper":
        from traincast.compute import FLAT_PEAK_WHY

        why = hw.get("compute_why") or FLAT_PEAK_WHY
        text += (f" (flat peaks, as the paper prices them: {why}, so this "
                 "forecast is optimistic beside one priced by the kernel model; traincast "
                 "hardware show, docs/hardware.md)")
    return text


def render_hybrid(result: dict[str, Any]) -> None:
    """A rich table of one hybrid-parallel prediction."""
    from traincast.parallel.hybrid import zero_label
    from traincast.units import fmt_bytes

    job = result["job"]
    # the title above the table at the terminal's width: the two-column table is narrow
    console.print(Text(f"{job['model']} hybrid dp={job['dp']} tp={job['tp']} pp={job['pp']} "
                       f"ep={job['ep']}" + (f" cp={job['cp']}" if job["cp"] > 1 else "")
                       + f" {zero_label(job['zero'], job['zero_priced'])}"
                       + (f" shard={job['shard']}" if job["replicas"] > 1 else "")
                       + f" on {job['gpus']} GPU(s) of "
                       f"{result['hardware']['node']} — {result['hardware']['gpu']}",
                       style="italic"))
    table = Table()
    table.add_column("component")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    time_s, share = result["time_s"], result["share"]
    labels = {**PART_LABEL, "data_io": COMPONENT_LABEL["data_io"],
              "comm": COMPONENT_NAME["comm"]}
    wait, parts_s = time_s.get("host_wait") or 0.0, sum(time_s[k] for k in share)
    for k in (*COMPONENTS, "bubble"):
        table.add_row(labels[k], fmt_seconds(time_s[k]), f"{100 * share[k]:.1f}%")
        if k == "compute_mem" and parts_s and wait >= HOST_WAIT_SHOWN_SHARE * parts_s:
            table.add_row(HOST_WAIT_LABEL, fmt_seconds(wait),
                          f"({100 * wait / parts_s:.1f}%)", style="dim")
        if k == "comm":
            for strategy, v in result["comm_s"].items():
                if v > 0:
                    table.add_row(f"  {PART_LABEL['comm_' + strategy]}", fmt_seconds(v),
                                  f"({100 * v / time_s['total']:.1f}%)", style="dim")
    table.add_row("total per iteration", fmt_seconds(time_s["total"]), "100%", style="bold")
    console.print(table)
    for said in (node_assumed_text(result["hardware"]), stand_in_text(result["hardware"])):
        if said:
            console.print(said)
    mem = result["memory_gb"]
    peak = result["hardware"].get("peak_tflops") or 0.0
    mfu = None if result["mfu"] is None else 100 * result["mfu"]
    console.print(f"Bottleneck: [bold]{result['bottleneck_label']}[/bold]. "
                  f"{fmt_amount(result['tokens_per_s_per_gpu'])} tokens/s/GPU, "
                  f"{fmt_amount(result['model_tflops_per_gpu'])} model TFLOP/s/GPU"
                  + (f" (MFU {mfu:.0f}% of the {peak:g} TFLOP/s dense peak)" if mfu else "")
                  + ". Memory per GPU "
                  f"{fmt_bytes(mem['total'] * 1e9)} of "
                  + (fmt_bytes(mem['capacity'] * 1e9) if math.isfinite(mem["capacity"]) else
                     "a capacity the entry does not give (not checked)")
                  + ("" if result["fits"] else " [red](does not fit)[/red]") + ".")
    rate = result.get("attention_rate")
    if rate:
        head = f"{rate['head_dim']}"
        if rate["head_dim_kernel"] != rate["head_dim"]:
            head += (f", run by its {rate['head_dim_kernel']}-wide kernel ("
                     f"{rate['head_dim'] / rate['head_dim_kernel']:.3g} of its products useful)")
        if rate["head_dim_priced"] != rate["head_dim_kernel"]:
            head += f", priced as {rate['head_dim_priced']}, the widest its curve rests on"
        console.print(Text(
            f"Attention: {rate['kernel']} at {rate['tflops']:.0f} TFLOP/s per GPU, "
            f"{rate['fraction_of_peak']:.2f} of the dense {rate['peak_dtype']} peak (its "
            f"fraction {rate['fraction']:.3g} x {rate['shape_factor']:.2f} for "
            f"{rate['seq_per_rank']} tokens per rank and head size {head}: docs/parallelism.md, "
            f"\"Fused attention's rate by shape\"); the fraction: {rate['source']}."))
    m, gb = job["micro_batches"], job["global_batch"]
    console.print(Text(
        f"Pipeline: {m} micro-batch{'' if m == 1 else 'es'} per pipeline (m = B / (dp x "
        f"micro-batch) = {gb} / ({job['dp']} x {job['micro_batch']})) through {job['pp']} "
        f"stage(s)"
        + (f" x {job['vp']} chunks" if job["vp"] > 1 else "")
        + f"; bubble {fmt_seconds(result['time_s']['bubble'])} = "
        f"{100 * result['bubble_share']:.1f}% of the step "
        f"({100 * result['bubble_fraction']:.1f}% of the pipeline time, "
        f"(p - 1) / (v m + p - 1))."))
    console.print(Text("assumed: " + result["assumed"]["text"] + ".", style="dim"))
    console.print(Text(hybrid_compute_text(result["hardware"]), style="dim"))
    for warning in result["warnings"]:
        console.print(Text("warning: " + warning + ".", style="yellow"))
    if mfu is not None and mfu > 100:
        print_full_square_note(f"MFU {mfu:.0f}%", f"the {peak:g} TFLOP/s dense {job['dtype']} "
                               "peak")
    if mfu is not None:
        print_mfu_caution([("this job", mfu, 100 * result["hfu"])], job["dtype"],
                          mixture=job["experts"] > 1)
    checks = result.get("published_checks")
    if checks:
        gpu = result["hardware"]["gpu"]
        console.print(Text(
            f"Published {job['dtype']} runs on {gpu} as the shipped model prices them "
            "(+ = forecast faster): "
            + "; ".join(f"{c['title']} {100 * c['median_error']:+.1f}% median, faster than "
                        f"published in {c['too_fast']} of {c['rows']}" for c in checks)
            + f" (traincast hardware show {gpu}).", style="dim"))
