"""The shipped hardware catalog and the loader's errors."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from traincast import CatalogError, load_catalog

DESIGN_GPUS = ["K80", "P100-PCIE-16GB", "P100-SXM2-16GB", "V100-PCIE-16GB", "V100-SXM2-16GB",
               "V100-SXM2-32GB", "T4", "A10", "A100-SXM4-40GB", "A100-SXM4-80GB",
               "H100-SXM5-80GB", "H100-PCIE-80GB", "H200-SXM-141GB", "B200", "L4", "MI250X",
               "MI300X"]
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
