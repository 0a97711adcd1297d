"""The hardware catalog: GPUs, links and node presets, read from TOML.

The shipped catalog is ``catalog.toml`` beside this module. User files merge over it key by
key (``load_catalog(["mine.toml"])``): a table that exists is updated field by field, a new
table is added. Every error names the file, the table and the key.

Effective rates (what the time model uses):
``peak_flops = <dtype>_tflops * 1e12 * flop_efficiency``,
``mem_bw_bps = mem_bw_gbs * 1e9 * mem_efficiency``, ``bw(link) = bw_gbs * 1e9 * efficiency``;
an absent efficiency is 1.0.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from traincast.bounds import LINK_BW_MAX_GBS, LINK_BW_MIN_GBS, PEAK_TFLOPS_MAX
from traincast.errors import TraincastError, UnknownNameError, bare_name, did_you_mean

SHIPPED = "traincast/hardware/catalog.toml"
SHIPPED_KERNELS = "traincast/hardware/kernel_model.toml"
"""The shipped fit of the measured-kernel model (``traincast calibrate --kernels``)."""
COMPUTE_STRATEGIES = ("auto", "curves", "kernel", "paper")
"""How compute time is priced (traincast.compute): ``auto`` lets each GPU's entry decide."""
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


class CatalogError(TraincastError):
    """A catalog file is wrong; the message names the file, the table and the key; without a
    hint of its own, the hint points at the format."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint or "the catalog format, key by key: docs/hardware.md")


@dataclass(frozen=True)
class GPU:
    """One device. ``*_tflops`` are dense peaks (0 = unsupported), ``mem_bw_gbs`` in GB/s."""

    name: str
    # (1) datasheet: vendor datasheets and architecture whitepapers
    fp32_tflops: float
    mem_bw_gbs: float
    mem_gb: float = 0.0
    tf32_tflops: float = 0.0
    fp16_tflops: float = 0.0
    bf16_tflops: float = 0.0
    fp8_tflops: float = 0.0
    sms: int = 0  # streaming multiprocessors (compute units); 0 = unknown (no wave quantization)
    fp32_cores_per_sm: int = 0  # FP32 lanes per SM (CU): datasheet CUDA cores / SMs
    sm_partitions: int = 0  # processing blocks (warp schedulers) per SM; 0 = unknown: 4
    boost_clock_mhz: float = 0.0
    base_clock_mhz: float = 0.0
    l2_mb: float = 0.0  # L2 cache, MB
    power_w: float = 0.0  # board power limit / TDP, W
    process_nm: float = 0.0  # process node (nm) of the GPU die, as the whitepaper names it
    compute_capability: float = 0.0  # CUDA compute capability (3.7, 8.0, ...); 0 = not given
    # (2) fitted / published kernel-model parameters (traincast.kernels)
    gemm_max_fraction: dict[str, float] = field(default_factory=dict)  # dtype ("*" = any) -> x
    mem_max_fraction: float = 0.0  # achievable fraction of mem_bw_gbs; 0 = unknown
    kernel_launch_us: float = 0.0  # fixed cost per kernel
    kernel: dict[str, float] = field(default_factory=dict)  # `calibrate --kernels`: name -> x
    # (3) measured by `traincast calibrate` on one machine (traincast.roofline, .calibration)
    flop_efficiency: float = 1.0
    mem_efficiency: float = 1.0
    op_overhead_us: float = 0.0
    gemm_intensity: tuple[float, ...] = ()
    gemm_tflops: tuple[float, ...] = ()
    conv_intensity: tuple[float, ...] = ()
    conv_tflops: tuple[float, ...] = ()
    elementwise_bytes: tuple[float, ...] = ()
    elementwise_gbs: tuple[float, ...] = ()
    kernel_gelems: dict[str, float] = field(default_factory=dict)  # op name -> 1e9 elements/s
    fresh_bytes: tuple[float, ...] = ()  # first-touch cost of new outputs by size
    fresh_gbs: tuple[float, ...] = ()
    foreach_tensor_us: float = 0.0  # fixed cost per tensor of a multi-tensor op
    threads: int = 0  # CPU threads the measured curves were taken at (calibrate); 0 = n/a
    # CPU thread scaling (calibrate at threads > 1; traincast.calibration.threads): kernel rates
    # at 1 thread and the grain (elements) below which an op runs on one thread
    kernel_gelems_1t: dict[str, float] = field(default_factory=dict)
    thread_grain_elems: float = 0.0
    # ... and GEMMs: the 1-thread curve over gemm_intensity, the large-GEMM speedup, the grain
    gemm_tflops_1t: tuple[float, ...] = ()
    thread_gemm_speedup: float = 0.0
    thread_gemm_grain_flops: float = 0.0
    thread_gemm_rows: tuple[float, ...] = ()  # output rows m of a product -> its thread speedup
    thread_gemm_rows_speedup: tuple[float, ...] = ()
    conv_tflops_1t: tuple[float, ...] = ()  # ... and convolutions, over conv_intensity
    thread_conv_speedup: float = 0.0
    thread_conv_grain_flops: float = 0.0
    device: str = ""  # the torch device `calibrate` measured the curves on: "cuda" or "cpu"
    # about the entry
    default_node: str = ""
    source: str = ""
    sources: dict[str, str] = field(default_factory=dict)  # field -> citation of that number
    description: str = ""
    vendor: str = "nvidia"  # VENDORS: whose software stack defaults the model assumes

    def math_dtype(self, dtype: str = "fp32") -> str:
        """The dtype whose peak a job of ``dtype`` runs at: ``amp`` = fp16, else bf16 (the first
        this GPU has); a dtype it lacks (peak 0, or not one of ``DTYPES``) falls back to fp32,
        and so does tf32 where its peak is no higher than the fp32 one (GA102 and AD102
        GeForce cards: their tensor cores run TF32 at the CUDA cores' FP32 rate): TF32
        permits tensor cores for fp32 products, it does not force them, and there they gain
        nothing."""
        for d in ("fp16", "bf16") if dtype == "amp" else (dtype,):
            peak = getattr(self, f"{d}_tflops", 0.0) if d in DTYPES else 0.0
            if peak > 0 and not (d == "tf32" and peak <= self.fp32_tflops):
                return d
        return "fp32"

    def gemm_fraction(self, dtype: str = "fp32") -> float:
        """Achievable large-GEMM fraction of the peak ``dtype`` runs at (``math_dtype``):
        ``gemm_max_fraction`` of that dtype, else its ``"*"`` entry, else the fraction given for
        any other dtype, else 0 (unknown)."""
        frac = self.gemm_max_fraction
        return float(frac.get(self.math_dtype(dtype),
                              frac.get("*", max(frac.values(), default=0.0))))

    def peak_tflops(self, dtype: str = "fp32") -> float:
        """Dense peak of the dtype ``dtype`` runs at (``math_dtype``: ``amp`` = fp16 peak, else
        bf16, else fp32)."""
        return float(getattr(self, f"{self.math_dtype(dtype)}_tflops"))

    def flops_per_s(self, dtype: str = "fp32") -> float:
        """``peak_tflops(dtype) * 1e12 * flop_efficiency``."""
        return self.peak_tflops(dtype) * 1e12 * self.flop_efficiency

    @property
    def mem_bw_bps(self) -> float:
        """``mem_bw_gbs * 1e9 * mem_efficiency`` (bytes/s)."""
        return self.mem_bw_gbs * 1e9 * self.mem_efficiency


FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "datasheet": ("fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "fp8_tflops",
                  "mem_bw_gbs", "mem_gb", "sms", "fp32_cores_per_sm", "sm_partitions",
                  "boost_clock_mhz", "base_clock_mhz", "l2_mb", "power_w", "process_nm",
                  "compute_capability"),
    "fitted": ("gemm_max_fraction", "mem_max_fraction", "kernel_launch_us", "kernel"),
    "measured": ("flop_efficiency", "mem_efficiency", "op_overhead_us", "gemm_intensity",
                 "gemm_tflops", "conv_intensity", "conv_tflops", "elementwise_bytes",
                 "elementwise_gbs", "kernel_gelems", "fresh_bytes", "fresh_gbs",
                 "foreach_tensor_us", "threads", "kernel_gelems_1t", "thread_grain_elems",
                 "gemm_tflops_1t", "thread_gemm_speedup", "thread_gemm_grain_flops",
                 "thread_gemm_rows", "thread_gemm_rows_speedup", "conv_tflops_1t",
                 "thread_conv_speedup", "thread_conv_grain_flops", "device"),
}
"""The GPU fields by where their numbers come from. ``datasheet``: vendor datasheets and
architecture whitepapers (peaks, memory, SMs, clocks, cache, power). ``fitted``: kernel-model
parameters published by microbenchmarks or fitted by ``traincast calibrate --kernels``
(``kernel``: free-form name -> positive number, cited in ``sources["kernel"]``). ``measured``:
efficiencies and rate curves ``traincast calibrate`` measures on one machine. The other fields
(``name``, ``vendor``, ``default_node``, ``source``, ``sources``, ``description``) describe
the entry.
In a catalog file each group may be a sub-table (``[gpu.NAME.datasheet]``, ...) or its keys
may stand directly in ``[gpu.NAME]`` (the older flat format); the GPU object is flat either way
(``gpu.sms``, ``gpu.l2_mb``)."""
FIELD_UNITS: dict[str, str] = {
    **{f"{d}_tflops": "TFLOP/s" for d in DTYPES}, "mem_bw_gbs": "GB/s", "mem_gb": "GB",
    "boost_clock_mhz": "MHz", "base_clock_mhz": "MHz", "l2_mb": "MB", "power_w": "W",
    "process_nm": "nm",
    "kernel_launch_us": "µs", "op_overhead_us": "µs", "foreach_tensor_us": "µs",
    "gemm_tflops": "TFLOP/s", "conv_tflops": "TFLOP/s", "elementwise_gbs": "GB/s",
    "fresh_gbs": "GB/s", "kernel_gelems": "1e9 elem/s", "gemm_intensity": "FLOP/byte",
    "conv_intensity": "FLOP/byte", "elementwise_bytes": "bytes", "fresh_bytes": "bytes",
    "bw_gbs": "GB/s", "latency_us": "µs"}
"""Units of catalog fields, a GPU's and a link's (``bw_gbs``, ``latency_us``), for people
(``traincast hardware show``)."""


@dataclass(frozen=True)
class Link:
    """A link: bandwidth per direction ``bw_gbs`` (GB/s), optional efficiency and latency."""

    name: str
    bw_gbs: float
    efficiency: float = 1.0
    latency_us: float = 0.0
    source: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    description: str = ""
    stand_in: bool = False  # not measured: another figure stands in (source says which)

    @property
    def bw_bps(self) -> float:
        """``bw(x) = bw_gbs * 1e9 * efficiency`` (bytes/s)."""
        return self.bw_gbs * 1e9 * self.efficiency

    def label(self) -> str:
        """A name for people: ``eth25`` -> ``25 Gbit Ethernet``."""
        if self.name.startswith("eth") and self.name[3:].isdigit():
            return f"{self.name[3:]} Gbit Ethernet"
        if self.name.startswith("pcie"):
            return f"PCIe ({self.name})"
        if self.name.startswith("nvlink"):
            return f"NVLink ({self.name})"
        if self.name.startswith("ib-"):
            return f"InfiniBand {self.name[3:].upper()}"
        return self.name


@dataclass(frozen=True)
class Node:
    """A node preset: the GPU, GPUs per node, and its three links (names in the catalog)."""

    name: str
    gpu: str
    gpus: int
    pcie: str
    intra: str
    nic: str
    nics: int = 1  # network ports (rails) per node, each a `nic` link
    source: str = ""
    sources: dict[str, str] = field(default_factory=dict)  # field -> citation (an override)
    description: str = ""


VENDORS: tuple[str, ...] = ("nvidia", "amd")
"""GPU vendors, whose stacks differ in the defaults the model assumes: on ``nvidia`` (CUDA,
cuDNN) an fp32 convolution runs in TF32 (``torch.backends.cudnn.allow_tf32`` is True by
default); on ``amd`` (ROCm, MIOpen) in fp32: PyTorch does not pass its TF32 flag to MIOpen's
convolutions (pytorch/pytorch pull request 190711, open in 2026, proposes wiring it, and
opt-in: "conv/RNN precision flags default to full fp32")."""


_FLOAT_KEYS = {
    "gpu": {f.name for f in fields(GPU) if f.type == "float"},
    "link": {f.name for f in fields(Link) if f.type == "float"},
    "node": set(),
}
_STR_KEYS = {
    "gpu": {"default_node", "source", "description", "device", "vendor"},
    "link": {"source", "description"},
    "node": {"gpu", "pcie", "intra", "nic", "source", "description"},
}
_INT_KEYS = {"gpu": {"sms", "fp32_cores_per_sm", "sm_partitions", "threads"}, "link": set(),
             "node": {"gpus", "nics"}}
_BOOL_KEYS = {"gpu": set(), "link": {"stand_in"}, "node": set()}
# curves: x-array key -> y-array key (equal lengths, x strictly increasing, all positive)
_CURVES = {"gemm_intensity": "gemm_tflops", "conv_intensity": "conv_tflops",
           "elementwise_bytes": "elementwise_gbs", "fresh_bytes": "fresh_gbs",
           "thread_gemm_rows": "thread_gemm_rows_speedup"}
# second curves over the same x: y key -> its x key (given with it, of its length)
_SAME_X = {"gemm_tflops_1t": "gemm_intensity", "conv_tflops_1t": "conv_intensity"}
_ARRAY_KEYS = {"gpu": {*_CURVES, *_CURVES.values(), *_SAME_X},
               "link": set(),
               "node": set()}
_MAP_KEYS = {"gpu": {"kernel_gelems", "kernel_gelems_1t", "gemm_max_fraction",
                     "kernel"}, "link": set(),
             "node": set()}  # tables NAME -> number
_SOURCE_MAPS = {"gpu": {"sources"}, "link": {"sources"}, "node": {"sources"}}  # NAME -> citation
_REQUIRED = {"gpu": ("fp32_tflops", "mem_bw_gbs"), "link": ("bw_gbs",),
             "node": ("gpu", "gpus", "pcie", "intra", "nic")}
_POSITIVE = {"fp32_tflops", "mem_bw_gbs", "mem_gb", "bw_gbs", "gpus"}
_MATRIX_PEAKS = ("tf32_tflops", "fp16_tflops", "bf16_tflops", "fp8_tflops")
"""Matrix-unit peaks that are at least the vector fp32 peak where both are given (0 = the dtype
is unsupported), and (the 16-bit ones) that the fp8 peak is at least (every tensor core runs
fp8 at twice its 16-bit rate or more): checked on datasheet entries, not on peaks
``traincast calibrate`` measured (an entry with ``gemm_intensity``: a CPU's bf16 products can
run slower than its fp32 ones)."""
_EFFICIENCY = {"flop_efficiency", "mem_efficiency", "efficiency", "mem_max_fraction"}
_FRACTION_MAPS = {"gemm_max_fraction"}  # maps whose values are fractions in (0, 1]
_KINDS = {"gpu": GPU, "link": Link, "node": Node}


@dataclass
class Catalog:
    """GPUs, links, nodes and GPU-name aliases; ``files`` lists what was merged, in order."""

    gpus: dict[str, GPU] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    assumed_aliases: dict[str, str] = field(default_factory=dict)
    """Aliases that are a guess, with why (``[alias_assumed]``: a trace's undisclosed model
    priced as the nearest public part), said wherever the alias is used."""
    files: list[str] = field(default_factory=list)
    fallback_node: str | None = None
    """``[defaults] node``: the node preset of trace jobs that name neither a node nor a GPU
    type (None: ``traincast.resolve.DEFAULT_NODE``, the paper's PAI node)."""
    compute: str = "auto"  # the compute strategy for every GPU (COMPUTE_STRATEGIES)
    kernel_model: dict[str, Any] = field(default_factory=dict)  # merged [kernel_model] tables
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """Results derived from this catalog alone (per-op prices of the shipped zoo tables)."""

    def gpu(self, name: str) -> GPU:
        """A GPU by name or alias (case-insensitive)."""
        return self.gpus[self.gpu_name(name)]

    def gpu_name(self, name: str) -> str:
        """Canonical GPU name of ``name`` (an entry or an alias); KeyError lists the known ones."""
        found = canonical_gpu(name, self.gpus, self.aliases)
        if found is None:
            raise unknown_name("GPU", name, self.gpus, aliases=self.aliases)
        return found

    def link(self, name: str) -> Link:
        """A link by its exact name; KeyError names the closest known ones."""
        if name not in self.links:
            raise unknown_name("link", name, self.links)
        return self.links[name]

    def node(self, name: str) -> Node:
        """A node preset by its exact name; KeyError names the closest known ones."""
        if name not in self.nodes:
            raise unknown_name("node", name, self.nodes)
        return self.nodes[name]

    def default_node_of(self, gpu_name: str) -> str:
        """The node preset of jobs on ``gpu_name``: its ``default_node``, else the node preset
        of that GPU with the most GPUs (ties by name: a user's file that adds a GPU and its
        node without ``default_node``), else '' (the caller's default node, whose links it
        then takes: ``predict`` says so)."""
        try:
            g = self.gpu(gpu_name)
        except KeyError:
            return ""
        if g.default_node:
            return g.default_node
        own = self._nodes_of(g.name)
        return min(own, key=lambda nd: (-nd.gpus, nd.name)).name if own else ""

    def _nodes_of(self, gpu_name: str) -> list[Node]:
        """The node presets whose GPU is ``gpu_name`` (a canonical name; presets may name it
        by an alias)."""
        return [nd for nd in self.nodes.values() if self.aliases.get(nd.gpu, nd.gpu) == gpu_name]

    def node_holding(self, gpu_name: str, gpus: float) -> str:
        """The smallest node preset of ``gpu_name`` (by its canonical name) with at least
        ``gpus`` GPUs (ties: the GPU's ``default_node``, then by name), else ''."""
        try:
            g = self.gpu(gpu_name)
        except KeyError:
            return ""
        fits = [nd for nd in self._nodes_of(g.name) if nd.gpus >= gpus]
        if not fits:
            return ""
        return min(fits, key=lambda nd: (nd.gpus, nd.name != g.default_node, nd.name)).name

    def entry(self, name: str) -> tuple[str, Any]:
        """Look ``name`` up as a node, link or GPU (in that order: ``traincast calibrate``
        names its node and its GPU ``local``), or as the table a catalog file writes it in,
        ``gpu.NAME``, ``node.NAME``, ``link.NAME``: ``(kind, entry)``."""
        kind, _, rest = name.partition(".")
        tables = {"node": self.nodes, "link": self.links}
        if rest and kind in tables and rest in tables[kind]:
            return kind, tables[kind][rest]
        if rest and kind == "gpu" and (rest in self.gpus or rest in self.aliases):
            return "gpu", self.gpu(rest)
        for kind, table in tables.items():
            if name in table:
                return kind, table[name]
        try:
            return "gpu", self.gpu(name)
        except UnknownNameError:
            raise UnknownNameError(
                f"{name!r} is no GPU, link or node of the catalog",
                hint=did_you_mean(name, [*self.gpus, *self.aliases, *self.links, *self.nodes])
                + "traincast hardware list shows them all") from None


def canonical_gpu(name: str, gpus: Iterable[str], aliases: Mapping[str, str]) -> str | None:
    """The GPU entry ``name`` names, as ``--gpu`` takes it: the entry, an alias, or either in
    another case, or with other separators (``errors.bare_name``: spaces, ``-``, ``_``, any
    not a letter or digit: Slurm's NVML name ``nvidia_a100-sxm4-80gb``, Kubernetes' label
    ``NVIDIA-A100-SXM4-80GB`` for the alias ``NVIDIA A100-SXM4-80GB``) where that names one
    entry only; None when none does."""
    gpus = list(gpus)
    if name in gpus:
        return name
    if name in aliases:
        return aliases[name]
    low = {k.lower(): k for k in gpus} | {k.lower(): v for k, v in aliases.items()}
    if name.lower() in low:
        return low[name.lower()]
    found = {v for k, v in low.items() if bare_name(k) == bare_name(name)}
    return found.pop() if len(found) == 1 else None


def unknown_name(kind: str, name: str, known: Iterable[str], where: str = "",
                 listed: str = "", aliases: Iterable[str] = ()) -> UnknownNameError:
    """The error of an unknown ``kind`` name (``where``: what named it, as ``(field gpu_type)``):
    the closest known name or alias first (``errors.did_you_mean``; a name before an alias as
    close), then ``listed`` (default: every known name)."""
    known = list(known)
    return UnknownNameError(f"unknown {kind} {name!r}" + (f" {where}" if where else ""),
                            hint=did_you_mean(name, [*known, *aliases])
                            + (listed or f"known: {', '.join(sorted(known))}"))


OP_TIME_MAX_US = 1e6
OP_TIME_WHY = "µs: a second for one op's or message's fixed cost; a time in ns?"
"""The largest fixed time of one op, kernel or message a catalog gives (launch, host
dispatch, floors, latencies): one second; above, a unit or an exponent is wrong."""
_UPPER: dict[tuple[str, str], tuple[float, str]] = {
    ("gpu", "boost_clock_mhz"): (10_000.0, "MHz: no GPU clocks above 10 GHz"),
    ("gpu", "base_clock_mhz"): (10_000.0, "MHz: no GPU clocks above 10 GHz"),
    ("node", "gpus"): (1_024, "GPUs in one node (an NVLink domain; NVL72 holds 72)"),
    ("gpu", "compute_capability"): (20.0, "a CUDA compute capability such as 9.0"),
    ("gpu", "fp32_tflops"): (1_000.0, "TFLOP/s: 10x the fastest FP32 GPU; a peak in GFLOP/s?"),
    ("gpu", "tf32_tflops"): (PEAK_TFLOPS_MAX, "TFLOP/s: a peak in GFLOP/s?"),
    ("gpu", "fp16_tflops"): (PEAK_TFLOPS_MAX, "TFLOP/s: a peak in GFLOP/s?"),
    ("gpu", "bf16_tflops"): (PEAK_TFLOPS_MAX, "TFLOP/s: a peak in GFLOP/s?"),
    ("gpu", "fp8_tflops"): (PEAK_TFLOPS_MAX, "TFLOP/s: a peak in GFLOP/s?"),
    ("gpu", "mem_bw_gbs"): (100_000.0, "GB/s: 12x a B200's 8,000; a bandwidth in MB/s?"),
    ("gpu", "mem_gb"): (10_000.0, "GB: 50x an MI300X's 192; a memory in MiB?"),
    ("gpu", "power_w"): (5_000.0, "W: 5x a B200's 1,000; a power in mW?"),
    ("gpu", "sms"): (2_000, "streaming multiprocessors (compute units): an MI300X has 304"),
    ("gpu", "l2_mb"): (4_096.0, "MB: an L2 (or last-level) cache in KB or bytes?"),
    ("gpu", "process_nm"): (1_000.0, "nm: a process node in another unit?"),
    ("link", "bw_gbs"): (LINK_BW_MAX_GBS, "GB/s (bytes): 100x NVLink 5's 900; a speed in "
                                          "bits/s?"),
    **{(kind, key): (OP_TIME_MAX_US, OP_TIME_WHY) for kind, key in (
        ("gpu", "kernel_launch_us"), ("gpu", "op_overhead_us"), ("gpu", "foreach_tensor_us"),
        ("link", "latency_us"))},
}
"""Physical upper bounds of catalog keys, ``(kind, key) -> (bound, why)``: a value above one
is a typo (a unit or an exponent), an error naming the file, table and key."""
_LOWER: dict[tuple[str, str], tuple[float, str]] = {
    ("gpu", "boost_clock_mhz"): (100.0, "MHz: no GPU runs below 100 MHz; a clock in GHz?"),
    ("gpu", "base_clock_mhz"): (100.0, "MHz: no GPU runs below 100 MHz; a clock in GHz?"),
    ("gpu", "power_w"): (5.0, "W: no accelerator board draws under 5 W; a power in kW?"),
    ("gpu", "mem_bw_gbs"): (1.0, "GB/s: a device memory under 1 GB/s; a bandwidth in TB/s?"),
    ("link", "bw_gbs"): (LINK_BW_MIN_GBS, "GB/s: a link under 100 kB/s; an exponent typo?"),
    ("gpu", "fp32_tflops"): (1e-3, "TFLOP/s: under 1 GFLOP/s; a peak in PFLOP/s?"),
    ("gpu", "mem_gb"): (0.1, "GB: a device memory under 100 MB; a memory in TB?"),
    ("gpu", "process_nm"): (0.1, "nm: a process node in metres?"),
}
"""Physical lower bounds of catalog keys where given (a value of 0 is not given): a value
below one is a unit typed wrong, an error as for :data:`_UPPER`."""
PEAK_TOLERANCE = 1.25
"""How far an entry's ``fp32_tflops`` may be from ``sms x fp32_cores_per_sm x 2 x
boost_clock_mhz`` (each FP32 lane does one fused multiply-add, 2 FLOPs, per clock) when all
four are given: within a factor 1.25 (the shipped entries are within 1.5%, H100 and H200 8.4%:
their datasheets quote the peak at 1980 MHz, the catalog the clock MAMF reproduces it at). An
SM count, a clock or a peak typed wrong is off by far more."""


def _value_keys(kind: str) -> set[str]:
    """The keys of a ``kind`` table that hold a value (not a table of citations)."""
    return _FLOAT_KEYS[kind] | _INT_KEYS[kind] | _STR_KEYS[kind] | _ARRAY_KEYS[kind] | \
        _MAP_KEYS[kind] | _BOOL_KEYS[kind]


def _check_table(path: str, kind: str, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Type- and range-check one table's keys (:data:`_UPPER` bounds some from above);
    returns the cleaned values."""
    where = f"{path}: [{kind}.{name}]"  # a table: the loader checks that first
    if not name.strip():
        raise CatalogError(f"{where}: an entry needs a name", hint=f"[{kind}.NAME]")
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in _FLOAT_KEYS[kind]:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise CatalogError(f"{where} key {key!r} must be a number, got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise CatalogError(f"{where} key {key!r} must be a finite number, got {value!r}")
            if key in _POSITIVE and value <= 0:
                raise CatalogError(f"{where} key {key!r} must be positive, got {value!r}")
            if key in _EFFICIENCY and not 0 < value <= 1:
                raise CatalogError(f"{where} key {key!r} must be in (0, 1], got {value!r}")
            if value < 0:
                raise CatalogError(f"{where} key {key!r} must not be negative, got {value!r}")
        elif key in _ARRAY_KEYS[kind]:
            if not isinstance(value, list) or not value or any(
                    isinstance(v, bool) or not isinstance(v, int | float)
                    or not 0 < v < math.inf for v in value):
                raise CatalogError(f"{where} key {key!r} must be a non-empty array of positive "
                                   f"numbers, each finite, got {value!r}")
            value = tuple(float(v) for v in value)
        elif key in _FRACTION_MAPS and isinstance(value, int | float) \
                and not isinstance(value, bool):
            if not 0 < value <= 1:  # also refuses nan
                raise CatalogError(f"{where} key {key!r} must be in (0, 1], got {value!r}")
            value = {"*": float(value)}
        elif key in _MAP_KEYS[kind]:
            if not _positive_map(value):
                raise CatalogError(f"{where} key {key!r} must be a table of positive numbers, "
                                   f"got {value!r}")
            value = {str(k): float(v) for k, v in value.items()}
            _refuse_long_times(f"{where} key {key!r}", value)
            if key in _FRACTION_MAPS and any(v > 1 for v in value.values()):
                raise CatalogError(f"{where} key {key!r} values must be in (0, 1], got {value!r}")
            if key in _FRACTION_MAPS and (odd := sorted(set(value) - {*DTYPES, "*"})):
                raise CatalogError(f"{where} key {key!r} names no dtype: {', '.join(odd)}",
                                   hint=f"dtypes: {', '.join(DTYPES)}, or * for any")
        elif key in _SOURCE_MAPS[kind]:
            if not isinstance(value, Mapping) or any(not isinstance(v, str)
                                                     for v in value.values()):
                raise CatalogError(f"{where} key {key!r} must be a table of field = "
                                   f"\"citation\", got {value!r}")
            value = {str(k): v for k, v in value.items()}
            if odd := sorted(set(value) - _value_keys(kind)):
                raise CatalogError(f"{where} key {key!r} cites no field of the entry: "
                                   f"{', '.join(odd)}", hint="a source names the key it cites")
        elif key in _INT_KEYS[kind]:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise CatalogError(f"{where} key {key!r} must be a positive integer, got {value!r}")
        elif key in _BOOL_KEYS[kind]:
            if not isinstance(value, bool):
                raise CatalogError(f"{where} key {key!r} must be true or false, got {value!r}")
        elif key in _STR_KEYS[kind]:
            if not isinstance(value, str):
                raise CatalogError(f"{where} key {key!r} must be a string, got {value!r}")
            if kind == "gpu" and key == "device" and value not in ("cuda", "cpu"):
                raise CatalogError(f"{where} key 'device' must be \"cuda\" or \"cpu\", "
                                   f"got {value!r}")
            if kind == "gpu" and key == "vendor" and value not in VENDORS:
                raise CatalogError(f"{where} key 'vendor' must be one of {', '.join(VENDORS)}, "
                                   f"got {value!r}")
        else:
            known = sorted(_value_keys(kind) | _SOURCE_MAPS[kind])
            raise CatalogError(f"{where} unknown key {key!r}; known keys: {', '.join(known)}")
        bound = _UPPER.get((kind, key))
        if bound is not None and value > bound[0]:
            raise CatalogError(f"{where} key {key!r} = {value!r} is above {bound[0]:,g} "
                               f"({bound[1]})", hint="check the unit and the exponent")
        low = _LOWER.get((kind, key))
        if low is not None and 0 < value < low[0]:
            raise CatalogError(f"{where} key {key!r} = {value!r} is below {low[0]:,g} "
                               f"({low[1]})", hint="check the unit and the exponent")
        out[key] = value
    return out


def _check_curves(path: str, name: str, values: Mapping[str, Any]) -> None:
    """Each measured curve: x and y given together, equal lengths, x strictly increasing."""
    for xkey, ykey in _CURVES.items():
        if (xkey in values) != (ykey in values):
            raise CatalogError(f"{path}: [gpu.{name}] key {xkey!r} needs {ykey!r} (and back)")
        if xkey in values:
            x, y = values[xkey], values[ykey]
            if len(x) != len(y):
                raise CatalogError(f"{path}: [gpu.{name}] keys {xkey!r} and {ykey!r} must have "
                                   f"the same length ({len(x)} != {len(y)})")
            if any(b <= a for a, b in zip(x, x[1:], strict=False)):
                raise CatalogError(f"{path}: [gpu.{name}] key {xkey!r} must be strictly "
                                   "increasing")
    for ykey, xkey in _SAME_X.items():
        if ykey in values and len(values[ykey]) != len(values.get(xkey, ())):
            raise CatalogError(f"{path}: [gpu.{name}] key {ykey!r} is a curve over {xkey!r}: "
                               f"give both, of the same length ({len(values[ykey])} != "
                               f"{len(values.get(xkey, ()))})")


def _check_lanes(path: str, name: str, values: Mapping[str, Any]) -> None:
    """One file's GPU table that gives all of ``fp32_tflops``, ``sms``, ``fp32_cores_per_sm``
    and ``boost_clock_mhz`` gives a peak its lanes can do (:data:`PEAK_TOLERANCE`); a file
    that overrides some of them (a power-capped card's lower peak) is not checked against the
    others' figures."""
    keys = ("fp32_tflops", "sms", "fp32_cores_per_sm", "boost_clock_mhz")
    if not all(values.get(k) for k in keys):
        return
    fp32, sms, lanes, boost = (values[k] for k in keys)
    peak = sms * lanes * 2 * boost * 1e-6  # TFLOP/s: one fused multiply-add per lane per clock
    if not peak / PEAK_TOLERANCE <= fp32 <= peak * PEAK_TOLERANCE:
        packed = abs(fp32 / (2 * peak) - 1) < 0.05
        raise CatalogError(f"{path}: [gpu.{name}] fp32_tflops = {fp32:g} is not sms x "
                           f"fp32_cores_per_sm x 2 x boost_clock_mhz = {sms} x {lanes} x 2 x "
                           f"{boost:g} MHz = {peak:.3g} TFLOP/s (within a factor "
                           f"{PEAK_TOLERANCE:g})",
                           hint=(f"{fp32:g} is twice that: a packed FP32 figure (AMD CDNA "
                                 "datasheets quote packed FP32 vector rates, two operations "
                                 f"per lane per clock); give the unpacked {peak:.3g}, as the "
                                 "shipped MI300X does (docs/hardware.md)" if packed else
                                 "one of the four is typed wrong: a unit, an exponent or the "
                                 "SM count; lanes count FP32 fused multiply-adds per clock "
                                 "(docs/hardware.md)"))


RIDGE_MAX_FLOP_PER_BYTE = 1_000.0
"""The most FP32 FLOPs per byte of memory bandwidth an entry may give (its ridge point,
``fp32_tflops 1e12 / (mem_bw_gbs 1e9)``): the shipped GPUs sit at 9 (B200) to 106 (L40S), CPUs
near 10; a bandwidth typed in TB/s (an H100's 3.35 for 3,350) puts it near 20,000."""


def _check_ridge(path: str, name: str, values: Mapping[str, Any]) -> None:
    """A GPU entry, as merged over every file (a file that overrides only ``mem_bw_gbs`` of a
    shipped entry included), has a ridge point of at most :data:`RIDGE_MAX_FLOP_PER_BYTE`;
    ``path`` is the file that wrote the entry last."""
    fp32, bw = values.get("fp32_tflops"), values.get("mem_bw_gbs")
    if fp32 and bw and fp32 * 1e12 / (bw * 1e9) > RIDGE_MAX_FLOP_PER_BYTE:
        raise CatalogError(f"{path}: [gpu.{name}] fp32_tflops = {fp32:g} over mem_bw_gbs = "
                           f"{bw:g} is {fp32 * 1e3 / bw:,.0f} FLOP per byte, above "
                           f"{RIDGE_MAX_FLOP_PER_BYTE:,g} (the shipped GPUs: 9 to 106)",
                           hint="mem_bw_gbs is in GB/s: 3350 for 3.35 TB/s")


def _check_peaks(path: str, name: str, values: Mapping[str, Any]) -> None:
    """A datasheet entry's tf32, fp16, bf16 and fp8 (matrix) peaks are at least its fp32 peak
    (:data:`_MATRIX_PEAKS`; 0 = unsupported), its fp8 peak at least its 16-bit ones (neither
    asked of a calibrated entry, ``gemm_intensity``), and its base clock is at most its boost
    clock."""
    base, boost = values.get("base_clock_mhz", 0.0), values.get("boost_clock_mhz", 0.0)
    if base and boost and base > boost:
        raise CatalogError(f"{path}: [gpu.{name}] key 'base_clock_mhz' = {base:g} is above "
                           f"boost_clock_mhz = {boost:g}",
                           hint="the boost clock is the higher one (docs/hardware.md)")
    fp32 = values.get("fp32_tflops", 0.0)
    if "gemm_intensity" in values:
        return
    for key in _MATRIX_PEAKS:
        peak = values.get(key, 0.0)
        if 0 < peak < fp32:
            raise CatalogError(f"{path}: [gpu.{name}] key {key!r} = {peak:g} is below "
                               f"fp32_tflops = {fp32:g}",
                               hint="a matrix-unit peak is at least the fp32 peak; 0 means the "
                                    "dtype is unsupported (docs/hardware.md)")
    fp8 = values.get("fp8_tflops", 0.0)
    for key in ("fp16_tflops", "bf16_tflops"):
        peak = values.get(key, 0.0)
        if 0 < fp8 < peak:
            raise CatalogError(f"{path}: [gpu.{name}] key 'fp8_tflops' = {fp8:g} is below "
                               f"{key} = {peak:g}",
                               hint="tensor cores run fp8 at least as fast as 16-bit types "
                                    "(twice, dense, on Hopper, Ada and Blackwell); a sparse or "
                                    "dense figure mixed up? (docs/hardware.md)")


def _flatten_groups(path: str, name: str, values: Mapping[str, Any]) -> Mapping[str, Any]:
    """``[gpu.NAME]`` with its ``datasheet``/``fitted``/``measured`` sub-tables merged in
    (each sub-table may hold only its group's keys, and a key may be given once)."""
    if not any(g in values for g in FIELD_GROUPS):
        return values
    flat = {k: v for k, v in values.items() if k not in FIELD_GROUPS}
    for group, keys in FIELD_GROUPS.items():
        sub = values.get(group)
        if sub is None:
            continue
        where = f"{path}: [gpu.{name}.{group}]"
        if not isinstance(sub, Mapping):
            raise CatalogError(f"{where} must be a table")
        for key, value in sub.items():
            if key not in keys:
                other = next((g for g, ks in FIELD_GROUPS.items() if key in ks), None)
                hint = f" (it belongs in [gpu.{name}.{other}])" if other else \
                    f"; known keys: {', '.join(keys)}"
                raise CatalogError(f"{where} unknown key {key!r}{hint}")
            if key in flat:
                raise CatalogError(f"{where} key {key!r} is also given in [gpu.{name}]")
            flat[key] = value
    return flat


DEFAULTS_KEYS: tuple[str, ...] = ("node",)
"""The keys of a catalog file's ``[defaults]`` table."""


def _merge_file(raw: dict[str, dict[str, dict[str, Any]]], aliases: dict[str, str],
                data: Mapping[str, Any], path: str, kernel_model: dict[str, Any],
                assumed: dict[str, str], touched: dict[tuple[str, str], str],
                defaults: dict[str, tuple[str, str]]) -> None:
    """Merge one file's tables into ``raw`` key by key; ``touched``: the last file that gave
    each entry a value (under the entry's own name: an override written with an alias or in
    another case counts for the entry), the file an error of the merged entry names;
    ``defaults``: ``[defaults]`` keys -> (value, the file that gave it)."""
    for top, tables in data.items():
        if top == "calibration":
            continue  # the measurement record of `traincast calibrate`, kept for people
        if top == "defaults":
            if not isinstance(tables, Mapping):
                raise CatalogError(f"{path}: [defaults] must be a table such as node = \"NAME\"")
            for key, value in tables.items():
                if key not in DEFAULTS_KEYS:
                    raise CatalogError(f"{path}: [defaults] unknown key {key!r}",
                                       hint=f"{did_you_mean(key, DEFAULTS_KEYS)}the keys of "
                                            f"[defaults]: {', '.join(DEFAULTS_KEYS)}")
                if not isinstance(value, str):
                    raise CatalogError(f"{path}: [defaults] {key} must name a node preset "
                                       f"(a string), got {value!r}")
                defaults[key] = (value, path)
            continue
        if top == "kernel_model":
            _merge_kernel_model(kernel_model, tables, path)
            continue
        if top == "alias":
            if not isinstance(tables, Mapping):
                raise CatalogError(f"{path}: [alias] must be a table of NAME = \"GPU\"")
            for alias, target in tables.items():
                if not isinstance(target, str):
                    raise CatalogError(f"{path}: [alias] key {alias!r} must name a GPU")
                aliases[alias] = target
            continue
        if top == "alias_assumed":
            if not isinstance(tables, Mapping) or not all(
                    isinstance(v, str) for v in tables.values()):
                raise CatalogError(f"{path}: [alias_assumed] must be a table of ALIAS = \"why "
                                   "it is a guess\"")
            assumed.update(tables)
            continue
        if top not in _KINDS:
            raise CatalogError(f"{path}: unknown table [{top}]; known: gpu, link, node, alias, "
                               "alias_assumed, defaults, kernel_model, calibration")
        if not isinstance(tables, Mapping):
            raise CatalogError(f"{path}: [{top}] must contain tables such as [{top}.NAME]")
        for name, values in tables.items():
            if not isinstance(values, Mapping):  # before anything reads it as a table
                raise CatalogError(f"{path}: [{top}.{name}] must be a table")
            if top == "gpu":
                values = _flatten_groups(path, name, values)
            if top == "gpu" and name not in raw[top] and \
                    not all(k in values for k in _REQUIRED["gpu"]):
                # a part of an entry (an override) names it as --gpu does: any case, or an
                # alias; a whole entry under an alias's name is a GPU of its own
                entry = canonical_gpu(name, raw[top], aliases)
                name = entry if entry in raw[top] else name
            table = raw[top].setdefault(name, {})
            touched[(top, name)] = path
            checked = _check_table(path, top, name, values)
            if top == "gpu":
                _check_lanes(path, name, checked)
            if top == "link" and "bw_gbs" in checked:  # a figure of this file's own: it
                checked.setdefault("stand_in", False)  # stands in only where it says so
            # an entry an earlier file gave keeps its source; the values this file changes
            # cite this file (with its own source where it gives one)
            own = checked.pop("source", None) if table and "source" in table else None
            cited = checked.get("sources", {})
            changed = [k for k, v in checked.items() if k in table and table[k] != v
                       and k != "sources" and k not in cited]
            if "sources" in checked or changed:  # citations merge field by field
                note = f"{own} ({path})" if own else f"{path} (a value of this file)"
                checked["sources"] = {**table.get("sources", {}), **cited,
                                      **dict.fromkeys(changed, note)}
            table.update(checked)


def _build(raw: dict[str, dict[str, dict[str, Any]]], aliases: dict[str, str],
           origin: dict[tuple[str, str], str], order: Mapping[str, int],
           touched: Mapping[tuple[str, str], str]) -> Catalog:
    built: dict[str, dict[str, Any]] = {}
    for kind, cls in _KINDS.items():
        built[kind] = {}
        for name, values in raw[kind].items():
            for key in _REQUIRED[kind]:
                if key not in values:  # a part of an entry whose name is a typo reads as new
                    near = did_you_mean(name, [n for n in raw[kind] if n != name]
                                        + (list(aliases) if kind == "gpu" else []))
                    raise CatalogError(
                        f"{touched[(kind, name)]}: [{kind}.{name}] missing required key {key!r}",
                        hint=(f"no {kind} is named {name!r}: {near}a part of an entry "
                              "changes the entry its name names" if near else
                              "the catalog format, key by key: docs/hardware.md"))
            if kind == "gpu":
                _check_curves(touched[(kind, name)], name, values)
                _check_peaks(touched[(kind, name)], name, values)
                _check_ridge(touched[(kind, name)], name, values)
            built[kind][name] = cls(name=name, **values)
    cat = Catalog(gpus=built["gpu"], links=built["link"], nodes=built["node"], aliases=aliases)
    for name, node in list(cat.nodes.items()):
        where = f"{touched[('node', name)]}: [node.{name}]"
        try:  # a GPU named as --gpu takes it: any case, or an alias
            cat.nodes[name] = node = replace(node, gpu=cat.gpu_name(node.gpu))
        except KeyError as exc:
            raise CatalogError(f"{where} key 'gpu' refers to unknown GPU {node.gpu!r}",
                               hint=getattr(exc, "hint", "")) from None
        for key in ("pcie", "intra", "nic"):
            if getattr(node, key) not in cat.links:
                raise CatalogError(
                    f"{where} key {key!r} refers to unknown link {getattr(node, key)!r}")
    for name, gpu in cat.gpus.items():
        if gpu.default_node and gpu.default_node not in cat.nodes:
            raise CatalogError(f"{touched[('gpu', name)]}: [gpu.{name}] key 'default_node' "
                               f"refers to unknown node {gpu.default_node!r}")
    entries: dict[str, str] = {}  # ``order``: each file's place in the merge
    for gpu in sorted(cat.gpus, key=lambda g: order[origin[("gpu", g)]]):
        other = entries.setdefault(gpu.lower(), gpu)
        if other != gpu:  # --gpu takes any case: which of the two it names cannot be told
            raise CatalogError(f"{origin[('gpu', gpu)]}: [gpu.{gpu}] differs from the GPU entry "
                               f"[gpu.{other}] only in case (--gpu takes either case)",
                               hint=f"write [gpu.{other}] to change that entry, or give this "
                                    "one another name")
    first: dict[str, str] = {}
    for alias in sorted(aliases, key=lambda a: order[origin[("alias", a)]]):
        other = first.setdefault(alias.lower(), alias)
        if other != alias and aliases[other] != aliases[alias]:
            raise CatalogError(f"{origin[('alias', alias)]}: [alias] key {alias!r} differs from "
                               f"the alias {other!r} (of {aliases[other]!r}) only in case, so it "
                               f"cannot name {aliases[alias]!r}",
                               hint=f"write {other!r} to point it elsewhere, or give the alias "
                                    "another name")
    for alias, target in list(aliases.items()):
        gpu = entries.get(alias.lower())
        if gpu is None or gpu == target:
            continue
        if order[origin[("gpu", gpu)]] > order[origin[("alias", alias)]]:
            del aliases[alias]  # a later file's GPU entry takes the name over
            continue
        raise CatalogError(f"{origin[('alias', alias)]}: [alias] key {alias!r} is the name of "
                           f"the GPU entry [gpu.{gpu}], so it cannot also name {target!r}",
                           hint="give the alias another name")
    for alias, target in aliases.items():
        if target not in cat.gpus:
            raise CatalogError(f"{origin[('alias', alias)]}: [alias] key {alias!r} refers to "
                               f"unknown GPU {target!r}")
    return cat


def load_catalog(paths: Iterable[str | Path] | str | Path | None = None,
                 compute: str = "auto") -> Catalog:
    """The shipped catalog with each user file in ``paths`` merged over it, in order.

    ``compute`` sets how every prediction with this catalog prices compute time
    (``paper`` = the paper's flat peaks for every GPU; ``auto`` = what each GPU entry supports).
    """
    if compute not in COMPUTE_STRATEGIES:
        raise CatalogError(f"unknown compute strategy {compute!r}; choose one of "
                           f"{', '.join(COMPUTE_STRATEGIES)}",
                           hint="--compute: the strategies, docs/model.md")
    if isinstance(paths, str | Path):
        paths = [paths]
    raw: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in _KINDS}
    aliases: dict[str, str] = {}
    assumed: dict[str, str] = {}
    origin: dict[tuple[str, str], str] = {}
    touched: dict[tuple[str, str], str] = {}
    sources: list[tuple[str, Mapping[str, Any]]] = []
    shipped = resources.files("traincast.hardware")
    sources.append((SHIPPED, tomllib.loads(shipped.joinpath("catalog.toml").read_text())))
    sources.append((SHIPPED_KERNELS,
                    tomllib.loads(shipped.joinpath("kernel_model.toml").read_text())))
    kernel_model: dict[str, Any] = {}
    defaults: dict[str, tuple[str, str]] = {}
    for p in paths or []:
        path = Path(p)
        try:
            sources.append((str(path), tomllib.loads(path.read_text(encoding="utf-8-sig"))))
        except FileNotFoundError:
            raise CatalogError(f"{path}: catalog file not found") from None
        except IsADirectoryError:
            raise CatalogError(f"{path}: is a folder, not a catalog file",
                               hint="give a TOML file (--catalog FILE.toml)") from None
        except UnicodeDecodeError as exc:
            raise CatalogError(f"{path}: not UTF-8 text (byte {exc.start}), not a TOML catalog "
                               "file", hint="give the TOML text file, not a binary one") from None
        except OSError as exc:
            raise CatalogError(f"{path}: catalog file cannot be read "
                               f"({exc.strerror or exc})",
                               hint="check the path and its permissions") from None
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(f"{path}: not valid TOML: {exc}") from None
    for path, data in sources:
        params = (data.get("kernel_model") or {}).get("params") \
            if isinstance(data.get("kernel_model"), Mapping) else None
        if path not in (SHIPPED, SHIPPED_KERNELS) and isinstance(params, Mapping) and (
                odd := sorted(set(params) - set(kernel_model.get("params", {})))):
            raise CatalogError(f"{path}: [kernel_model.params] unknown parameter(s) "
                               f"{', '.join(odd)}", hint="the parameters of the shipped fit: "
                               + ", ".join(sorted(kernel_model.get("params", {}))))
        _merge_file(raw, aliases, data, path, kernel_model, assumed, touched, defaults)
        for kind in (*_KINDS, "alias", "alias_assumed"):
            for name in data.get(kind, {}) or {}:
                origin[(kind, name)] = path
    order = {path: i for i, (path, _) in enumerate(sources)}
    cat = _build(raw, aliases, origin, order, touched)
    gpus = {g.lower() for g in cat.gpus}
    for alias in assumed:
        if alias not in aliases and alias.lower() not in gpus:  # (a GPU entry took the name)
            raise CatalogError(f"{origin[('alias_assumed', alias)]}: [alias_assumed] key "
                               f"{alias!r} is no [alias]", hint="list the alias under [alias] too")
    # an alias a later file points elsewhere without saying why keeps no earlier guess's reason
    cat.assumed_aliases = {a: why for a, why in assumed.items() if a in aliases and
                           order[origin[("alias", a)]] <= order[origin[("alias_assumed", a)]]}
    _apply_kernel_model(cat, kernel_model)
    if "node" in defaults:
        node, path = defaults["node"]
        if node not in cat.nodes:
            raise CatalogError(f"{path}: [defaults] node {node!r} is no node preset",
                               hint=f"{did_you_mean(node, cat.nodes)}traincast hardware list "
                                    "names them; a [node.NAME] entry in the file adds one")
        cat.fallback_node = node
    cat.files = [path for path, _ in sources]
    cat.compute = compute
    return cat


HELD_OUT_RECORDS = ("held_out", "held_out_uncalibrated")
"""The ``[kernel_model]`` tables of a fit's errors on GPUs held out of it
(``kernel_fit.fit_document``): with each GPU's own host's dispatch, and uncalibrated."""


def _refuse_long_times(where: str, values: Mapping[str, Any], every: bool = False) -> None:
    """An error naming the first time of ``values`` (name -> number: those named ``*_us``, or
    ``every`` one in a table of times such as ``floors_us``) above :data:`OP_TIME_MAX_US`."""
    for name, value in values.items():
        if (every or str(name).endswith("_us")) and float(value) > OP_TIME_MAX_US:
            raise CatalogError(f"{where}: {name} = {value!r} is above {OP_TIME_MAX_US:,g} "
                               f"({OP_TIME_WHY})", hint="check the unit and the exponent")


def _merge_kernel_model(into: dict[str, Any], table: Any, path: str) -> None:
    """Merge a ``[kernel_model]`` table (``params``: name -> number, ``floors_us``: GPU ->
    µs, ``default_floor_us``, ``host_floor_us`` with its ``host_floor_source``, ``held_out``
    and ``held_out_uncalibrated``: GPU -> its errors when held out of the fit, ``source``,
    ``command``, ``fitted_on``, ``host_dispatch_kinds``) over ``into``, key by key. A table of
    a fit of its own (with ``fitted_on``) or of a held-out record replaces both records
    (``HELD_OUT_RECORDS``): errors measured on another fit do not describe it."""
    if not isinstance(table, Mapping):
        raise CatalogError(f"{path}: [kernel_model] must be a table")
    if "fitted_on" in table or any(k in table for k in HELD_OUT_RECORDS):
        for key in HELD_OUT_RECORDS:  # one fit's record, both ways, or none
            into.pop(key, None)
    for key, value in table.items():
        where = f"{path}: [kernel_model] key {key!r}"
        if key in ("params", "floors_us"):
            if not _positive_map(value):
                raise CatalogError(f"{where} must be a table of positive finite numbers")
            _refuse_long_times(where, value, every=key == "floors_us")
            into.setdefault(key, {}).update({str(k): float(v) for k, v in value.items()})
        elif key in ("default_floor_us", "host_floor_us"):
            if not _finite_number(value) or value < 0:
                raise CatalogError(f"{where} must be a finite number >= 0, got {value!r}")
            _refuse_long_times(where, {key: value})
            into[key] = float(value)
        elif key in HELD_OUT_RECORDS:
            if not isinstance(value, Mapping) or not all(
                    isinstance(row, Mapping) and all(_finite_number(v) for v in row.values())
                    for row in value.values()):
                raise CatalogError(f"{where} must be a table of GPU -> table of finite numbers "
                                   "(errors as fractions: gemm_median = 0.12, sum = -0.07)")
            into[key] = {str(g): {str(k): float(v) for k, v in row.items()}
                         for g, row in value.items()}
        elif key in ("fitted_on", "host_dispatch_kinds"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise CatalogError(f"{where} must be a list of names, got {value!r}")
            into[key] = list(value)
        elif key in ("source", "command", "host_floor_source"):
            into[key] = value
        else:
            raise CatalogError(f"{where}: unknown; known: params, floors_us, default_floor_us, "
                               "host_floor_us, host_floor_source, host_dispatch_kinds, "
                               "held_out, held_out_uncalibrated, source, command, fitted_on")


def _apply_kernel_model(cat: Catalog, model: Mapping[str, Any]) -> None:
    """Give every GPU its measured-kernel parameters: ``kernel = {**params, floor_us, **own}``
    (``floor_us``: ``host_floor_us`` when a file gives one, the host the predictions are for,
    measured by ``traincast calibrate`` on a CUDA machine; else ``default_floor_us``, the
    median of the measuring hosts' floors, for every GPU alike: a floor is the host's, not the
    GPU's, so a what-if that changes the GPU keeps it. ``floors_us``, each measured GPU's own
    host, stays the fit's record (checked: GPUs the catalog knows); the entry's own ``kernel``
    keys win)."""
    cat.kernel_model = dict(model)
    params = dict(model.get("params", {}))
    _gpu_names(cat, "floors_us", list(model.get("floors_us", {})), once=False)
    for key in ("fitted_on", *HELD_OUT_RECORDS):  # one file's record: each GPU named once
        if key in model:
            named = _gpu_names(cat, key, list(model[key]))
            cat.kernel_model[key] = named if key == "fitted_on" else dict(
                zip(named, model[key].values(), strict=True))
    default = float(model.get("default_floor_us", 0.0))
    host = float(model.get("host_floor_us", 0.0))
    for name, gpu in list(cat.gpus.items()):
        floor = host or default
        merged = {**params, **({"floor_us": floor} if floor > 0 else {}), **gpu.kernel}
        if merged != gpu.kernel:
            cited = {"kernel": str(model.get("source", "kernel_model")), **gpu.sources}
            if host and "floor_us" not in gpu.kernel:
                cited["floor_us"] = str(model.get("host_floor_source", "host_floor_us"))
            cat.gpus[name] = replace(gpu, kernel=merged, sources=cited)


def _gpu_names(cat: Catalog, key: str, names: list[Any], once: bool = True) -> list[str]:
    """The catalog names of the GPUs ``[kernel_model.KEY]`` names (aliases allowed); an
    unknown GPU is an error naming the table, and so, with ``once``, is one named twice."""
    try:
        named = [cat.gpu_name(str(g)) for g in names]
    except UnknownNameError as exc:
        raise CatalogError(f"[kernel_model.{key}]: {exc.args[0]}",
                           hint="give the GPU's entry with --catalog FILE (the catalog the fit "
                                "was made with)") from None
    twice = sorted({n for n in named if named.count(n) > 1}) if once else []
    if twice:
        raise CatalogError(f"[kernel_model.{key}]: {', '.join(twice)} named twice "
                           f"({', '.join(map(str, names))})",
                           hint="one entry per GPU, by its name or one alias")
    return named


def _finite_number(value: Any) -> bool:
    """A number (not a boolean) that is finite."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _positive_map(value: Any) -> bool:
    """A table of NAME -> positive finite number."""
    return isinstance(value, Mapping) and all(_finite_number(v) and v > 0
                                              for v in value.values())
