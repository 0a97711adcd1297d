"""The shipped hardware catalog and the loader's errors."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from traincast import CatalogError, load_catalog

DESIGN_GPUS = ["K80", "P100-PCIE-16GB", "P100-SXM2-16GB", "V100-PCIE-16GB", "V100-SXM2-16GB",
               "V100-SXM2-32GB", "T4", "A10", "A100-SXM4-40GB", "A100-SXM4-80GB",
               "H100-SXM5-80GB", "H100-PCIE-80GB", "H200-SXM-141GB", "B200", "L4", "MI250X-GCD",
               "MI300X", "A100-PCIE-40GB", "A100-PCIE-80GB", "V100-PCIE-32GB", "P4", "L40S",
               "RTX-4090", "RTX-3090", "RTX-A6000", "H100-NVL"]
DESIGN_LINKS = ["pcie3x16", "pcie4x16", "pcie5x16", "nvlink2-v100", "nvlink3-a100",
                "nvlink4-h100", "nvlink5-b200", "eth10", "eth25", "eth40", "eth50", "eth100",
                "eth200", "eth400", "ib-edr", "ib-hdr", "ib-ndr"]
DESIGN_NODES = ["pai-v100-pcie", "pai-v100-nvlink", "paper-2019", "dgx-a100", "dgx-h100"]


def test_shipped_catalog_has_every_design_name_and_a_source_on_every_entry():
    cat = load_catalog()
    assert set(DESIGN_GPUS) <= set(cat.gpus)
    assert set(DESIGN_LINKS) <= set(cat.links)
    assert set(DESIGN_NODES) <= set(cat.nodes)
    raw = tomllib.loads(resources.files("traincast.hardware").joinpath("catalog.toml")
                        .read_text())
    for kind in ("gpu", "link", "node"):
        for name, entry in raw[kind].items():
            assert entry.get("source", "").strip(), f"[{kind}.{name}] has no source"


def test_trace_aliases():
    cat = load_catalog()
    assert cat.gpu("V100").name == "V100-SXM2-16GB"
    assert cat.gpu("V100M32").name == "V100-SXM2-32GB"
    assert cat.gpu("P100").name == "P100-PCIE-16GB"
    assert cat.gpu("MISC").name == "K80"
    assert cat.gpu("t4").name == "T4"


def test_ethernet_speeds_are_gbit_over_8():
    cat = load_catalog()
    for gbit in (10, 25, 40, 50, 100, 200, 400):
        assert cat.link(f"eth{gbit}").bw_gbs == pytest.approx(gbit / 8)


def test_paper_2019_node_uses_the_papers_figures():
    cat = load_catalog()
    node = cat.node("paper-2019")
    assert cat.gpu(node.gpu).fp32_tflops == 11.0
    assert cat.link(node.pcie).bw_gbs == 10.0
    assert cat.link(node.intra).bw_gbs == 50.0
    assert cat.link(node.nic).bw_gbs == 25 / 8


def test_pai_nodes():
    cat = load_catalog()
    pcie, nvl = cat.node("pai-v100-pcie"), cat.node("pai-v100-nvlink")
    assert (pcie.gpus, nvl.gpus) == (8, 8)
    assert pcie.intra.startswith("pcie") and nvl.intra == "nvlink2-v100"
    assert pcie.nic == nvl.nic == "eth25"


def test_user_file_merges_over_shipped(tmp_path: Path):
    f = tmp_path / "mine.toml"
    f.write_text('[link.eth25]\nefficiency = 0.8\n\n[gpu.my-gpu]\nfp32_tflops = 1\n'
                 'mem_bw_gbs = 2\n\n[node.mine]\ngpu = "my-gpu"\ngpus = 2\npcie = "pcie3x16"\n'
                 'intra = "pcie3x16"\nnic = "eth25"\n')
    cat = load_catalog([f])
    assert cat.link("eth25").bw_gbs == 3.125 and cat.link("eth25").efficiency == 0.8
    assert cat.link("eth25").bw_bps == pytest.approx(3.125e9 * 0.8)
    assert cat.node("mine").gpus == 2
    assert cat.files[-1] == str(f)


@pytest.mark.parametrize("text, words", [
    ("[gpu.x]\nfp32_tflops = 1\nmem_bw_gbs = 1\nspeed = 3\n", ["[gpu.x]", "'speed'"]),
    ("[link.eth25]\nbw_gbs = 0\n", ["[link.eth25]", "'bw_gbs'", "positive"]),
    ("[link.eth25]\nbw_gbs = -3\n", ["[link.eth25]", "'bw_gbs'"]),
    # 1e-300 GB/s would price a step at 1e300 s: below 100 kB/s a link is an exponent typo
    ("[link.eth25]\nbw_gbs = 1e-300\n", ["[link.eth25]", "'bw_gbs'", "below 0.0001"]),
    ("[link.x]\nbw_gbs = 1\nefficiency = 1.5\n", ["[link.x]", "'efficiency'"]),
    ('[node.n]\ngpu = "nope"\ngpus = 1\npcie = "pcie3x16"\nintra = "pcie3x16"\nnic = "eth25"\n',
     ["[node.n]", "'gpu'", "'nope'"]),
    ('[node.n]\ngpu = "T4"\ngpus = 1\npcie = "pcie3x16"\nintra = "wire"\nnic = "eth25"\n',
     ["[node.n]", "'intra'", "'wire'"]),
    ('[node.n]\ngpu = "T4"\ngpus = 0\npcie = "pcie3x16"\nintra = "pcie3x16"\nnic = "eth25"\n',
     ["[node.n]", "'gpus'"]),
    ("[gpu.y]\nfp32_tflops = 1\n", ["[gpu.y]", "'mem_bw_gbs'"]),
    ("[cpu.z]\nx = 1\n", ["[cpu]"]),
    ("[link.x\nbw_gbs = 1\n", ["not valid TOML"]),
    # --gpu takes any case: two entries, or two aliases of two GPUs, one name in two cases
    ("[gpu.v100-sxm2-16gb]\nfp32_tflops = 1\nmem_bw_gbs = 10\n",
     ["[gpu.v100-sxm2-16gb]", "[gpu.V100-SXM2-16GB] only in case"]),
    ("[gpu.R]\nfp32_tflops = 1\nmem_bw_gbs = 10\n[gpu.r]\nfp32_tflops = 2\nmem_bw_gbs = 10\n",
     ["[gpu.r]", "[gpu.R] only in case"]),
    ('[alias]\nv100 = "A100-SXM4-80GB"\n', ["'v100'", "'V100'", "only in case"]),
    # a shipped entry this file breaks, named by an alias: the error names this file
    ("[gpu.V100]\nbase_clock_mhz = 2000\n", ["[gpu.V100-SXM2-16GB]", "'base_clock_mhz'"]),
    ('[gpu.v100.datasheet]\nbf16_tflops = 1\n', ["[gpu.V100-SXM2-16GB]", "'bf16_tflops'"]),
    ('[gpu.V100]\ndefault_node = "nonode"\n', ["'default_node'", "'nonode'"]),
    # an entry given as a value, not a table
    ("[gpu]\nV100 = 5\n", ["[gpu.V100] must be a table"]),
    # curves: a second curve over the same x, of another length; x and y of a thread curve
    ("[gpu.c]\nfp32_tflops = 1\nmem_bw_gbs = 10\nsource = \"x\"\n"
     "gemm_intensity = [1.0, 2.0]\ngemm_tflops = [0.5, 0.9]\ngemm_tflops_1t = [0.2]\n",
     ["'gemm_tflops_1t' is a curve over 'gemm_intensity'", "(1 != 2)"]),
    ("[gpu.c]\nfp32_tflops = 1\nmem_bw_gbs = 10\nsource = \"x\"\n"
     "thread_gemm_rows = [1.0, 8.0, 64.0]\nthread_gemm_rows_speedup = [1.0, 1.5]\n",
     ["'thread_gemm_rows' and 'thread_gemm_rows_speedup'", "(3 != 2)"]),
    # a fixed time of one op above a second: a unit or an exponent is wrong
    ("[gpu.V100]\nop_overhead_us = 1e30\n", ["'op_overhead_us' = 1e+30 is above 1e+06"]),
    ("[gpu.V100.fitted]\nkernel = { floor_us = 1e30 }\n", ["'kernel'", "floor_us = 1e+30"]),
    ("[kernel_model]\nhost_floor_us = 1e30\n", ["'host_floor_us'", "is above 1e+06"]),
])
def test_errors_name_file_table_and_key(tmp_path: Path, text: str, words: list[str]):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(CatalogError) as err:
        load_catalog([f])
    message = str(err.value)
    assert str(f) in message
    for w in words:
        assert w in message, message


def test_missing_file_is_named(tmp_path: Path):
    with pytest.raises(CatalogError, match="nothere.toml"):
        load_catalog([tmp_path / "nothere.toml"])


# ------------------------------------------------ datasheet fields, new GPUs, grouped format

DATASHEET = ("sms", "fp32_cores_per_sm", "boost_clock_mhz", "base_clock_mhz", "l2_mb",
             "power_w")


def test_measured_gpus_carry_their_datasheet_figures():
    # NVIDIA datasheets / whitepapers (see the catalog's sources): P4 = GP104, 2560 cores in
    # 20 SMs of 128; T4 40 x 64, 585/1590 MHz, 4 MB, 70 W; P100 PCIe 56 x 64, 1126/1303 MHz,
    # 4 MB, 250 W; V100 PCIe 32 GB 80 x 64, 1230/1380 MHz, 6 MB, 250 W; A100 PCIe 40 GB
    # 108 x 64, 765/1410 MHz, 40 MB, 250 W
    cat = load_catalog()
    want = {"P4": (20, 128, 1063, 810, 2, 75), "T4": (40, 64, 1590, 585, 4, 70),
            "P100-PCIE-16GB": (56, 64, 1303, 1126, 4, 250),
            "V100-PCIE-32GB": (80, 64, 1380, 1230, 6, 250),
            "A100-PCIE-40GB": (108, 64, 1410, 765, 40, 250)}
    for name, figures in want.items():
        assert tuple(getattr(cat.gpus[name], k) for k in DATASHEET) == figures, name
    a80 = cat.gpus["A100-PCIE-80GB"]
    assert (a80.power_w, a80.mem_bw_gbs, a80.mem_gb) == (300, 1935, 80)
    p4 = cat.gpus["P4"]
    assert (p4.mem_bw_gbs, p4.fp32_tflops, p4.sms * p4.fp32_cores_per_sm) == (192, 5.5, 2560)


def test_every_gpu_has_the_datasheet_fields_with_a_source():
    cat = load_catalog()
    for name, g in cat.gpus.items():
        if name == "V100-paper-2019":
            continue
        for key in DATASHEET:
            value = getattr(g, key)
            if value:
                assert g.sources.get(key), (name, key)
        assert g.sms and g.fp32_cores_per_sm and g.power_w, name


def test_fp32_peak_is_sms_x_cores_x_2_x_boost():
    # FP32 peak = SMs x FP32 lanes per SM x 2 FLOP (FMA) x boost clock, within 1.5 %; H100
    # SXM5 / H200 quote 67 TFLOP/s at 1980 MHz while the catalog's clock is the 1830 MHz the
    # MAMF table reproduces the bf16 peak at: 132 x 128 x 2 x 1.98 GHz = 66.9
    cat = load_catalog()
    for name, g in cat.gpus.items():
        if not g.fp32_cores_per_sm:
            continue
        mhz = 1980 if name in ("H100-SXM5-80GB", "H200-SXM-141GB") else g.boost_clock_mhz
        peak = g.sms * g.fp32_cores_per_sm * 2 * mhz * 1e6 / 1e12
        assert peak == pytest.approx(g.fp32_tflops, rel=0.015), name


def test_nvidia_smi_names_resolve():
    cat = load_catalog()
    for smi, name in {"Tesla P4": "P4", "Tesla T4": "T4",
                      "Tesla V100-PCIE-32GB": "V100-PCIE-32GB",
                      "NVIDIA A100-PCIE-40GB": "A100-PCIE-40GB",
                      "NVIDIA A100 80GB PCIe": "A100-PCIE-80GB",
                      "Tesla P100-PCIE-16GB": "P100-PCIE-16GB"}.items():
        assert cat.gpu(smi).name == name


def test_mi250x_entry_is_one_gcd_and_the_old_name_resolves():
    # AMD MI250X datasheet per module of 2 GCDs: 47.9 TFLOP/s FP32, 3276.8 GB/s, 128 GB
    cat = load_catalog()
    gcd = cat.gpu("MI250X")
    assert gcd.name == "MI250X-GCD" and "GCD" in gcd.description
    assert (gcd.fp32_tflops, gcd.mem_bw_gbs, gcd.mem_gb) == pytest.approx((47.9 / 2, 3276.8 / 2,
                                                                            128 / 2))
    node = cat.node("mi250x-node")
    assert node.gpu == "MI250X-GCD" and node.gpus == 8  # 4 modules x 2 GCDs
    # a ring over the 8 GCDs crosses single xGMI links (50 GB/s), not the in-package 200
    assert cat.link(node.intra).bw_gbs == 50.0


def test_dgx1_p100_uses_nvlink1():
    # P100 whitepaper: 4 NVLink 1.0 links x 20 GB/s per direction
    cat = load_catalog()
    assert cat.link(cat.node("dgx-1-p100").intra).bw_gbs == 4 * 20


def test_network_links_follow_the_payload_rule():
    # docs/hardware.md: Ethernet TCP/IPv4 at MTU 1500: 1500 - 20 (IP) - 20 (TCP) - 12 (TCP
    # timestamps) = 1448 payload of 1500 + 14 + 4 + 8 + 12 = 1538 wire bytes; InfiniBand at
    # MTU 4096: 4096 of 4096 + 8 + 12 + 4 + 2 = 4122; both rounded to 4 places
    cat = load_catalog()
    eth = round((1500 - 20 - 20 - 12) / (1500 + 14 + 4 + 8 + 12), 4)
    ib = round(4096 / (4096 + 8 + 12 + 4 + 2), 4)
    for name, link in cat.links.items():
        if name.startswith("eth") and name[3:].isdigit():
            assert link.efficiency == eth, name
        if name.startswith("ib-"):
            assert link.efficiency == ib, name
    assert cat.link("eth25").bw_bps == pytest.approx(3.125e9 * 0.9415)
    assert cat.link("eth25-paper-2019").efficiency == 1.0  # the paper's own figure


def test_nvlink_links_carry_nccls_own_bandwidth_per_link():
    # docs/hardware.md "Link efficiency": NCCL's per-link NVLink figure (src/graph/topo.h:
    # SM60 18.0, SM70 20.0, SM80 20.0, SM90 20.6, SM100 40.1 GB/s) over the line rate per link
    # (NVLink 1 20 GB/s, NVLink 2-4 25 GB/s, NVLink 5 50 GB/s); the paper's own 50 GB/s kept
    cat = load_catalog()
    expected = {"nvlink1-p100": 18.0 / 20, "nvlink2-v100": 20.0 / 25, "nvlink3-a100": 20.0 / 25,
                "nvlink4-h100": 20.6 / 25, "nvlink5-b200": 40.1 / 50, "nvlink-paper-2019": 1.0}
    assert {n for n in cat.links if n.startswith("nvlink")} == set(expected)
    for name, eff in expected.items():
        assert cat.link(name).efficiency == pytest.approx(eff, abs=5e-4), name
        assert eff == 1.0 or "src/graph/topo.h" in cat.link(name).sources["efficiency"], name
    # an H100 node's tensor-parallel ring: 18 links x 20.6 GB/s
    assert cat.link(cat.node("dgx-h100").intra).bw_bps == pytest.approx(18 * 20.6e9, rel=1e-3)


def test_grouped_sub_tables_load_like_the_flat_format(tmp_path: Path):
    grouped = tmp_path / "grouped.toml"
    grouped.write_text('[gpu.mine]\nsource = "x"\n[gpu.mine.datasheet]\nfp32_tflops = 10\n'
                       'mem_bw_gbs = 500\nsms = 40\nl2_mb = 4\n[gpu.mine.fitted]\n'
                       'kernel_launch_us = 4\nkernel = { tile_eff = 0.9 }\n'
                       '[gpu.mine.measured]\nflop_efficiency = 0.5\n'
                       '[gpu.mine.sources]\nkernel = "calibrate --kernels"\n')
    flat = tmp_path / "flat.toml"
    flat.write_text('[gpu.mine]\nsource = "x"\nfp32_tflops = 10\nmem_bw_gbs = 500\nsms = 40\n'
                    'l2_mb = 4\nkernel_launch_us = 4\nkernel = { tile_eff = 0.9 }\n'
                    'flop_efficiency = 0.5\nsources = { kernel = "calibrate --kernels" }\n')
    a, b = load_catalog([grouped]).gpus["mine"], load_catalog([flat]).gpus["mine"]
    assert a == b
    assert (a.sms, a.l2_mb, a.kernel["tile_eff"], a.flop_efficiency) == (40, 4.0, 0.9, 0.5)


@pytest.mark.parametrize(("text", "words"), [
    ('[gpu.T4.datasheet]\ngemm_max_fraction = 0.5\n', ["[gpu.T4.datasheet]",
                                                       "'gemm_max_fraction'", "fitted"]),
    ('[gpu.T4.fitted]\nkernel = { x = -1 }\n', ["[gpu.T4", "'kernel'", "positive"]),
    ('[gpu.T4]\nsms = 4\n[gpu.T4.datasheet]\nsms = 5\n', ["[gpu.T4.datasheet]", "'sms'"]),
    ('[gpu.T4.measured]\nnonsense = 1\n', ["[gpu.T4.measured]", "'nonsense'"]),
])
def test_group_errors_name_file_table_and_key(tmp_path: Path, text: str, words: list[str]):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(CatalogError) as err:
        load_catalog([f])
    for w in [str(f), *words]:
        assert w in str(err.value), (w, str(err.value))


def test_field_groups_cover_every_number_field_once():
    from dataclasses import fields

    from traincast.hardware.catalog import FIELD_GROUPS, GPU

    grouped = [k for keys in FIELD_GROUPS.values() for k in keys]
    assert len(grouped) == len(set(grouped))
    about = {"name", "default_node", "source", "sources", "description", "vendor"}
    assert set(grouped) | about == {f.name for f in fields(GPU)}


def test_an_unknown_name_suggests_the_closest_known_ones() -> None:
    from traincast.errors import TraincastError, UnknownNameError
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    for lookup, name, close in ((cat.gpu, "B100", "B200"), (cat.gpu, "l4x", "L4"),
                                (cat.gpu, "V10", "V100"),  # an alias counts
                                (cat.node, "dgx-h10", "dgx-h100"), (cat.link, "eth10O", "eth10")):
        with pytest.raises(UnknownNameError) as err:
            lookup(name)
        assert err.value.hint.startswith(f"did you mean {close!r}? known: "), err.value.hint
    with pytest.raises(UnknownNameError) as err:
        cat.gpu("zzz")  # nothing close: the list alone
    assert err.value.hint.startswith("known: A10, ")
    # a scenario file names the same way
    from traincast.scenarios import check_change

    with pytest.raises(TraincastError) as err:
        check_change("s.toml", "gpu", "B100", cat)
    assert err.value.hint.startswith("did you mean 'B200'? known: ")


def test_fp32_convolutions_run_in_tf32_on_nvidia_only(tmp_path: Path):
    # cuDNN's default (torch.backends.cudnn.allow_tf32 = True) against ROCm's opt-in TF32
    # (pytorch/pytorch pull request 190711): docs/hardware.md, catalog.VENDORS
    from traincast.compute import op_operand_dtypes

    cat = load_catalog()
    ops = [{"op": "convolution", "dtype": "float32"}, {"op": "mm", "dtype": "float32"}]
    assert cat.gpu("MI300X").vendor == "amd" and cat.gpu("MI300X").tf32_tflops > 0
    assert op_operand_dtypes(ops, cat.gpu("MI300X"), "fp32") == ["fp32", "fp32"]
    assert op_operand_dtypes(ops, cat.gpu("A100"), "fp32") == ["tf32", "fp32"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[gpu.mine]\nvendor = "intel"\nfp32_tflops = 10\nmem_bw_gbs = 500\n')
    with pytest.raises(CatalogError, match=r"key 'vendor' must be one of nvidia, amd, got 'intel'"):
        load_catalog([bad])


def test_no_cudnn_layout_transposes_on_an_amd_gpu():
    # kernels.layout_transpose_bytes: an NCHW fp16 convolution on matrix units pays
    # 2 (B_read + B_written) of transposes under cuDNN, none on an AMD GPU (docs/model.md)
    from traincast.kernels import layout_transpose_bytes

    cat = load_catalog()
    op = [{"op": "convolution", "dtype": "float16", "bytes_read": 300.0,
           "bytes_written": 100.0, "shapes": "8x64x56x56;64x64x3x3"}]
    assert layout_transpose_bytes(op, ["fp16"], cat.gpu("A100")).tolist() == [800.0]
    assert layout_transpose_bytes(op, ["fp16"], cat.gpu("MI300X")).tolist() == [0.0]


def test_a_file_names_gpus_as_gpu_names_them_and_its_changes_cite_it(tmp_path: Path):
    # an override by alias or in any case changes the shipped entry (not a new one without
    # its fields); a node's gpu is found the same way; a changed value cites the file that
    # changed it, the entry keeping its source and the other fields theirs
    shipped = load_catalog()
    h100 = shipped.gpu_name("H100")
    path = tmp_path / "mine.toml"
    path.write_text('[gpu.H100.datasheet]\npower_w = 350\n'
                    '[gpu.a10]\nsource = "my lab, 2026"\n[gpu.a10.datasheet]\nmem_bw_gbs = 500\n'
                    '[node.n1]\ngpu = "tesla t4"\ngpus = 4\npcie = "pcie4x16"\n'
                    'intra = "pcie4x16"\nnic = "eth25"\nsource = "mine"\n')
    cat = load_catalog([path])
    assert cat.gpus[h100].power_w == 350 and cat.gpus[h100].fp32_tflops == \
        shipped.gpus[h100].fp32_tflops
    assert cat.gpus[h100].sources["power_w"] == f"{path} (a value of this file)"
    assert cat.gpus[h100].sources.get("sms") == shipped.gpus[h100].sources.get("sms")
    assert "a10" not in cat.gpus and cat.gpus["A10"].mem_bw_gbs == 500
    assert cat.gpus["A10"].source == shipped.gpus["A10"].source
    assert cat.gpus["A10"].sources["mem_bw_gbs"] == f"my lab, 2026 ({path})"
    assert cat.nodes["n1"].gpu == shipped.gpu_name("T4")
    path.write_text('[node.n1]\ngpu = "tesla t5"\ngpus = 4\npcie = "pcie4x16"\n'
                    'intra = "pcie4x16"\nnic = "eth25"\nsource = "mine"\n')
    with pytest.raises(CatalogError, match="unknown GPU 'tesla t5'") as err:
        load_catalog([path])
    assert "Tesla T4" in err.value.hint


def test_a_file_changing_one_key_of_a_shipped_node_or_link_cites_itself(tmp_path: Path):
    # a node and a link take a part of their entry as a GPU does: the rest shipped, the
    # changed value citing the file (a node once had no field citations: a TypeError)
    shipped = load_catalog()
    path = tmp_path / "mine.toml"
    path.write_text('[node.dgx-a100]\nnics = 1\n[link.eth25]\nbw_gbs = 2\n')
    cat = load_catalog([path])
    node = cat.nodes["dgx-a100"]
    assert node.nics == 1 and node.gpu == shipped.nodes["dgx-a100"].gpu
    assert node.source == shipped.nodes["dgx-a100"].source
    assert node.sources["nics"] == f"{path} (a value of this file)"
    assert cat.links["eth25"].bw_gbs == 2
    assert cat.links["eth25"].sources["bw_gbs"] == f"{path} (a value of this file)"
    link, shipped_link = cat.links["eth25"], shipped.links["eth25"]
    assert (link.efficiency, link.source) == (shipped_link.efficiency, shipped_link.source)
    # a node's value may cite its own source, as a GPU's and a link's may
    path.write_text('[node.dgx-a100]\nnics = 2\n[node.dgx-a100.sources]\nnics = "my lab"\n')
    assert load_catalog([path]).nodes["dgx-a100"].sources["nics"] == "my lab"


def test_a_matrix_peak_below_the_one_it_must_exceed_is_refused(tmp_path: Path) -> None:
    # tf32 below fp32, or fp8 below bf16 (a sparse/dense mix-up), would price an fp8 job
    # slower than a bf16 one; the A100's and H100's own figures load
    def entry(**peaks: float) -> Path:
        path = tmp_path / "c.toml"
        path.write_text('[gpu.X]\nsource = "t"\n[gpu.X.datasheet]\nmem_bw_gbs = 3350\n'
                        + "".join(f"{k} = {v}\n" for k, v in peaks.items()))
        return path

    load_catalog([entry(fp32_tflops=67, tf32_tflops=494.7, bf16_tflops=989.5,
                        fp8_tflops=1979)])
    with pytest.raises(CatalogError, match="'tf32_tflops' = 10 is below fp32_tflops = 19.5"):
        load_catalog([entry(fp32_tflops=19.5, tf32_tflops=10)])
    with pytest.raises(CatalogError, match="'fp8_tflops' = 500 is below bf16_tflops = 989.5"):
        load_catalog([entry(fp32_tflops=67, bf16_tflops=989.5, fp8_tflops=500)])
    # an entry without 16-bit peaks: fp8 is still a matrix peak, at least the fp32 one
    with pytest.raises(CatalogError, match="'fp8_tflops' = 30 is below fp32_tflops = 67"):
        load_catalog([entry(fp32_tflops=67, fp8_tflops=30)])


def test_a_packed_fp32_figure_is_named_as_such(tmp_path: Path) -> None:
    # MI300X: 304 CUs x 64 lanes x 2 x 2100 MHz = 81.7 TFLOP/s; AMD's datasheet quotes packed
    # FP32 at 163.4, twice that: the hint says so and gives the unpacked figure
    path = tmp_path / "c.toml"
    path.write_text('[gpu.M]\nsource = "t"\n[gpu.M.datasheet]\nfp32_tflops = 163.4\n'
                    "mem_bw_gbs = 5300\nsms = 304\nfp32_cores_per_sm = 64\n"
                    "boost_clock_mhz = 2100\n")
    with pytest.raises(CatalogError) as err:
        load_catalog([path])
    assert "packed FP32" in err.value.hint and "unpacked 81.7" in err.value.hint


def test_a_part_of_an_entry_under_a_misspelled_name_says_which_entry_it_resembles(
        tmp_path: Path) -> None:
    # [gpu.V100-SXM2-16G] mem_gb = 32 reads as a new GPU without its required keys: the error
    # names the key, and the hint the entry the name was meant for
    f = tmp_path / "typo.toml"
    f.write_text("[gpu.V100-SXM2-16G]\nmem_gb = 32\n")
    with pytest.raises(CatalogError, match="missing required key 'fp32_tflops'") as err:
        load_catalog([f])
    assert "did you mean 'V100-SXM2-16GB'?" in err.value.hint
    f.write_text("[gpu.Zeta9]\nmem_gb = 32\n")
    with pytest.raises(CatalogError) as err:
        load_catalog([f])
    assert "did you mean" not in err.value.hint


def test_hardware_show_says_which_gemm_fractions_are_assumed() -> None:
    # MI300X lists bf16 and fp16 only: its tf32 and fp8 products take the largest given,
    # said as assumed; fp32 products are the measured-kernel model's (not listed)
    from traincast.compute import _assumed_fractions

    gpu = load_catalog().gpu("MI300X")
    assert set(gpu.gemm_max_fraction) == {"bf16", "fp16"}
    top = max(gpu.gemm_max_fraction.values())
    text = _assumed_fractions(gpu, skip=("fp32",))
    assert text == f"; assumed: tf32 {top:g}, fp8 {top:g} (no figure of their own: the " \
                   "largest given)"
    assert "fp32" in _assumed_fractions(gpu)
    # what hardware show prints (compute.basis): the kernel model prices MI300X's fp32
    # products, so fp32 is not among the assumed
    from traincast.compute import basis

    shown = basis(gpu, "kernel")["inputs"]["gemm_max_fraction"]
    assert shown.endswith(text) and "fp32 products" in basis(gpu, "kernel")["inputs"]


def test_a_catalog_file_sets_the_node_of_jobs_without_hardware(tmp_path) -> None:
    # a Helios-like trace names no GPU type and no node: the catalog's [defaults] node prices
    # it; a job naming its GPU keeps its own
    import numpy as np

    from traincast.hardware.catalog import CatalogError, load_catalog
    from traincast.resolve import DEFAULT_NODE, resolve

    f = tmp_path / "c.toml"
    f.write_text('[defaults]\nnode = "dgx-a100"\n')
    cat = load_catalog(f)
    assert cat.fallback_node == "dgx-a100" and load_catalog().fallback_node is None
    jobs = {"architecture": np.array(["allreduce-local", "1w1g"], dtype=object),
            "n_gpus": np.array([8.0, 1.0]), "gpu_type": np.array(["", "T4"], dtype=object)}
    r = resolve(jobs, cat)
    assert list(r.node.strings()) == ["dgx-a100", "pai-t4"]
    assert list(resolve(jobs, load_catalog()).node.strings())[0] == DEFAULT_NODE
    for text, said in (('[defaults]\nnode = "dgx-a10"\n', "no node preset"),
                       ('[defaults]\nnodes = "dgx-a100"\n', "unknown key 'nodes'"),
                       ('[defaults]\nnode = 8\n', "must name a node preset")):
        f.write_text(text)
        with pytest.raises(CatalogError, match=said) as err:
            load_catalog(f)
        assert str(f) in str(err.value)


def test_every_physical_link_has_a_latency_with_its_source() -> None:
    # the hybrid model charges each hop its latency: a link without one is free per hop; only
    # the paper's idealized 2019 links (bandwidth only, as the paper models them) have none
    cat = load_catalog()
    free = sorted(n for n, link in cat.links.items() if not link.latency_us)
    assert free == ["nvlink-paper-2019", "pcie-paper-2019"]
    raw = tomllib.loads(resources.files("traincast.hardware").joinpath("catalog.toml")
                        .read_text())["link"]
    for name, link in raw.items():
        if "latency_us" in link:
            assert "latency_us" in link.get("sources", {}), name


def test_gpu_names_with_other_separators_name_the_entry() -> None:
    """Slurm's NVML names and Kubernetes' GPU labels spell a catalog alias with ``_`` or ``-``
    for its spaces: the same GPU; a name that, so read, would fit two entries names none."""
    from traincast.hardware.catalog import canonical_gpu

    cat = load_catalog()
    for name in ("nvidia_a100-sxm4-80gb", "NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-32GB"):
        assert cat.gpu(name).name == cat.gpu(name.replace("_", " ").replace("NVIDIA-", "NVIDIA ")
                                             .replace("Tesla-", "Tesla ")).name
    assert canonical_gpu("x_y", ["X-Y", "XY"], {}) is None
    assert canonical_gpu("x_y", ["X-Y"], {}) == "X-Y"
    # any character not a letter or digit separates, as in a column name (one rule for both)
    assert cat.gpu("nvidia.a100/sxm4 (80gb)").name == cat.gpu("A100-SXM4-80GB").name
    assert canonical_gpu("x.y", ["X-Y"], {}) == canonical_gpu("x_y", ["X-Y"], {})


def test_an_entry_is_found_by_its_table_where_a_name_is_both(tmp_path) -> None:
    # a catalog file names a node and a GPU "local", as traincast calibrate writes them
    from traincast.hardware.catalog import load_catalog

    path = tmp_path / "local.toml"
    path.write_text('[gpu.local]\nfp32_tflops = 0.09\nmem_bw_gbs = 23\nsource = "test"\n'
                    '[node.local]\ngpu = "local"\ngpus = 2\npcie = "pcie3x16"\n'
                    'intra = "pcie3x16"\nnic = "eth25"\nsource = "test"\n')
    cat = load_catalog([path])
    assert cat.entry("local")[0] == "node"
    kind, gpu = cat.entry("gpu.local")
    assert (kind, gpu.fp32_tflops) == ("gpu", 0.09)
    assert cat.entry("node.local")[0] == "node" and cat.entry("link.eth25")[0] == "link"
    assert cat.entry("gpu.V100")[1].name == "V100-SXM2-16GB"  # an alias after the table
