"""The README's tour answers on a real trace; one setup, one answer;
no recommendation without a gain; small things a newcomer sees."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from traincast.cli import app

ALIBABA = ("alibaba-gpu-v2023", "openb_pod_list_gpuspec33.csv")


def _run(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_readme_tour_on_alibaba_2023(shared_data: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """ingest, whatif, recommend, colocate as the README runs them: most jobs with GPUs get
    numbers, and the output names the workload it assumed and for how many jobs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    trace = str(shared_data.joinpath(*ALIBABA))
    _run("ingest", trace, "--format", "alibaba-2023")
    char = json.loads(_run("characterize", "--json"))
    with_gpus = char["jobs"] - char["zero_gpu_jobs"]
    assert with_gpus > 5000
    wi = json.loads(_run("whatif", "--scenario", "eth100", "--scenario", "nvlink-allreduce",
                         "--json"))
    assumed = wi["assumed_workload"]
    assert assumed["workload"] == "mix" and assumed["jobs"] >= 0.9 * with_gpus
    assert sum(assumed["by_workload"].values()) == assumed["jobs"]
    assert wi["scenarios"]["eth100"]["predicted"] >= 0.9 * with_gpus
    text = _run("whatif", "--scenario", "eth100", "--scenario", "nvlink-allreduce")
    assert "assumed workload for" in text and "workload mix" in text
    rec = json.loads(_run("recommend", "--price", "aws-on-demand", "--json", "--no-jobs"))
    assert rec["summary"]["best"]["predicted"] >= 0.9 * with_gpus
    assert rec["assumed_workload"]["jobs"] == assumed["jobs"]
    assert "assumed workload for" in _run("recommend", "--price", "aws-on-demand")
    co = json.loads(_run("colocate", "--json"))
    assert co["utilization"]["predicted_jobs"] >= 0.9 * with_gpus
    assert co["assumed_workload"]["jobs"] == assumed["jobs"]
    none = json.loads(_run("whatif", "--scenario", "eth100", "--workload", "none", "--json"))
    assert none["summary"]["predicted"] == 0 and none["assumed_workload"] is None


def test_mix_is_md5_of_job_id_among_models_that_fit() -> None:
    """model = sorted(models fitting the GPU)[int(md5(job_id)[:16], 16) % k], by hand."""
    from traincast.hardware.catalog import load_catalog
    from traincast.trace import default_workload, workload_assumption
    from traincast.trace.sample import zoo_workloads

    ids = [f"job-{i}" for i in range(40)] + ["cpu-job"]
    jobs = pa.table({"job_id": ids, "n_gpus": [1.0] * 40 + [0.0],
                     "gpu_type": ["T4"] * 20 + ["H100"] * 20 + [None],
                     "workload": [None] * 39 + ["resnet50", None]})
    cat = load_catalog()
    out = default_workload(jobs, "mix", cat)
    got = out["workload"].to_pylist()
    for i, job in enumerate(ids[:39]):
        mem = cat.gpu(jobs["gpu_type"][i].as_py()).mem_gb
        pool = sorted(n for n, m in zoo_workloads().items() if not m > mem)
        h = int(hashlib.md5(job.encode()).hexdigest()[:16], 16)
        assert got[i] == pool[h % len(pool)], job
    assert got[39] == "resnet50" and got[40] is None  # given; 0 GPUs: none assumed
    info = workload_assumption(out, "mix")
    assert info["jobs"] == 39 and sum(info["by_workload"].values()) == 39
    # one job's model does not depend on the other jobs
    alone = default_workload(jobs.slice(5, 1), "mix", cat)["workload"][0].as_py()
    assert alone == got[5]


def test_published_row_through_predict_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """The V100 ResNet-50 fp16 row of published.toml, run by `predict` with the setup flags
    validate prints, gets the row's prediction."""
    pytest.importorskip("torch")
    from traincast.hardware.catalog import load_catalog
    from traincast.validation.published import (
        _row_features,
        check_hardware,
        evaluate_rows,
        load_published,
        row_setup,
        setup_of,
        setup_text,
    )

    monkeypatch.setenv("COLUMNS", "200")
    cat = load_catalog()
    data = load_published()
    check_hardware(data, cat)
    i, row = next((i, r) for i, r in enumerate(data["row"]) if r["model"] == "resnet50"
                  and r["gpu"].startswith("V100") and r["gpus"] == 1 and r["dtype"] == "fp16")
    feats = _row_features(data, row, i, None)
    want = evaluate_rows([row], [feats], data.get("node", {}), cat)["predicted"][0]
    setup = setup_of(feats, **row_setup(data, row), amp=True)  # an fp16 row: --amp
    assert "--synthetic-inputs" in setup_text(setup)
    out = json.loads(_run("predict", "--model", "zoo:resnet50", "--batch",
                          str(row["batch_per_gpu"]), "--gpu", row["gpu"], "--node", row["node"],
                          "--amp", "--synthetic-inputs", "--json"))
    got = row["batch_per_gpu"] / out["time_s"]["total"]
    assert got == pytest.approx(want, rel=1e-9)
    assert out["setup"] == setup
    # the default (inputs copied from the host) is a different setup, and says so
    text = _run("predict", "--model", "zoo:resnet50", "--batch", "256", "--gpu", "V100",
                "--amp")
    assert "inputs copied from the host" in " ".join(text.split())


def test_recommend_changes_only_above_min_gain() -> None:
    """Every changed job is more than min_gain faster; a kept job stays with speedup 1; a
    reason naming a GPU rate change names two different GPUs."""
    import pyarrow.parquet as pq

    from traincast.analysis.recommend import MIN_GAIN, recommend
    from traincast.trace import fill_features
    from traincast.trace.sample import sample_path

    assert MIN_GAIN == 0.05
    jobs = fill_features(pq.read_table(sample_path()).slice(0, 400))
    for gain in (0.05, 0.5):
        rows = recommend(jobs, min_gain=gain)["rows"].to_pylist()
        for r in rows:
            for p in ("arch", "best"):
                sp = r[f"{p}_speedup"]
                if sp is None or not np.isfinite(sp):
                    continue
                if r[f"{p}_reason"].startswith("keep"):
                    assert sp == 1.0
                else:
                    assert sp > 1 + gain, (p, r)
                if " -> " in r[f"{p}_reason"] and "TFLOP/s" in r[f"{p}_reason"]:
                    assert r[f"{p}_gpu"] != r["gpu"], r[f"{p}_reason"]


def test_recommend_bert_base_on_8_v100_keeps_without_gain(monkeypatch) -> None:  # noqa: ANN001
    pytest.importorskip("torch")
    monkeypatch.setenv("COLUMNS", "200")
    base = ("recommend", "--model", "zoo:bert-base", "--arch", "allreduce-local", "--gpus", "8",
            "--gpu", "V100", "--json")
    row = json.loads(_run(*base))["rows"][0]
    if row["arch_architecture"] != "allreduce-local":
        assert row["arch_speedup"] > 1.05
    else:
        assert row["arch_reason"].startswith("keep: no option that fits is more than 5%")
    assert "15.7 -> V100-SXM2-16GB 15.7" not in row["arch_reason"] + row["best_reason"]
    zero = json.loads(_run(*base, "--min-gain", "0"))["rows"][0]
    assert "15.7 -> V100-SXM2-16GB 15.7" not in zero["arch_reason"]


def test_durations_in_hours_and_days() -> None:
    from traincast.units import fmt_seconds

    assert fmt_seconds(1.25e7) == "145 d"  # 1.25e7 / 86400 = 144.7
    assert fmt_seconds(12_500) == "3.47 h"  # / 3600
    assert fmt_seconds(1_500) == "25 min"
    assert fmt_seconds(2.5) == "2.5 s" and fmt_seconds(0.0456) == "45.6 ms"
    assert fmt_seconds(0.0) == "0 s"  # a zero duration, not "0 µs"


def test_user_strings_are_not_emoji() -> None:
    from traincast.cli.common import console

    with console.capture() as cap:
        console.print("hf:llama: batch 8")
    assert "hf:llama:" in cap.get() and "\U0001f999" not in cap.get()


def test_missing_file_is_named(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    def tc(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                               *args], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})

    res = tc("characterize", "nosuch.csv")
    said = " ".join(res.stderr.split())
    assert res.returncode == 2 and "nosuch.csv: no such trace file" in said, said
    assert "--help" not in said and str(tmp_path) in said  # where a relative path starts
    res = tc("predict", "--features", "x.json")
    assert res.returncode == 2 and "x.json: no such features file" in res.stderr


def test_no_reference_to_missing_design_md() -> None:
    root = Path(__file__).resolve().parents[1]
    if (root / "DESIGN.md").exists():
        pytest.skip("DESIGN.md exists")
    files = [*root.joinpath("src").rglob("*.py"), *root.joinpath("docs").rglob("*.md"),
             root / "README.md"]
    bad = [str(f.relative_to(root)) for f in files if "DESIGN" in f.read_text()]
    assert not bad


def test_zero_gpu_jobs_are_not_1w1g() -> None:
    from traincast.analysis.characterize import characterize
    from traincast.trace import infer_architecture

    jobs = pa.table({"job_id": ["a", "b", "c", "d"], "n_gpus": [0.0, 1.0, 4.0, 0.0],
                     "architecture": pa.nulls(4, pa.string()),
                     "start_time_s": [0.0] * 4, "end_time_s": [10.0] * 4})
    out = characterize(infer_architecture(jobs), fill=False)
    arch = out["by_architecture"]
    assert out["zero_gpu_jobs"] == 2
    assert arch["1w1g"]["jobs"] == 1 and arch["allreduce-local"]["jobs"] == 1
    assert arch["1w1g"]["job_share"] == 0.5 and "unknown" not in arch


def test_unknown_gpu_type_is_said_assumed(monkeypatch: pytest.MonkeyPatch) -> None:
    from traincast.analysis.recommend import recommend
    from traincast.cli.whatif import print_recommend
    from traincast.trace import fill_features

    monkeypatch.setenv("COLUMNS", "200")
    jobs = fill_features(pa.table({"job_id": ["a", "b"], "n_gpus": [1.0, 1.0],
                                   "architecture": ["1w1g", "1w1g"],
                                   "gpu_type": [None, "T4"],
                                   "workload": ["resnet50", "resnet50"]}))
    res = recommend(jobs)
    rows = res.pop("rows")
    assert rows["gpu_type_given"].to_pylist() == [False, True]
    from traincast.cli.common import console

    monkeypatch.setattr(console, "width", 200)
    with console.capture() as cap:
        print_recommend(res, rows)
    text = " ".join(cap.get().split())
    assert "pai-v100-nvlink*" in text and "pai-t4*" not in text
    assert "* the trace names no GPU type or node: the default node" in text


def test_reason_has_names() -> None:
    from traincast.predict import predict_table

    bd = predict_table({"architecture": ["1w1g", "1w1g"], "n_gpus": [1.0, 0.0],
                        "flops_compute_bound": [1e12, 1e12],
                        "bytes_memory_bound": [1e9, 1e9], "weight_bytes": [1e8, 1e8]})
    assert bd.reason_name.tolist() == ["ok", "no GPUs (n_gpus missing or 0)"]
    assert bd.reasons() == {"no GPUs (n_gpus missing or 0)": 1}


def test_profile_json_to_file_prints_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "m.json"
    res = CliRunner().invoke(app, ["profile", "zoo:mobilenet-v2", "--batch", "2", "--json",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == {"wrote": str(out)}  # stdout stays JSON under --json
    assert json.loads(out.read_text())["batch_size"] == 2
