"""``traincast validate`` on one small model in one process: the measuring code runs end to end.

Structure and sanity only (no timing targets: those are in benchmarks/bench_validate.py).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from traincast.calibration import calibrate  # noqa: E402
from traincast.errors import TraincastError  # noqa: E402
from traincast.validation import Case, summarize, thread_counts, validate  # noqa: E402
from traincast.validation.measure import classify  # noqa: E402
from traincast.validation.runs import crop_inputs  # noqa: E402


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    cat = tmp_path_factory.mktemp("val") / "local.toml"
    calibrate(cat, tiny=True, device="cpu", comm=False, threads=1)
    case = Case("zoo:mobilenet-v2", "CNN", 2, crop=((0, 2, 32), (0, 3, 32)))
    return validate(cat, cases=[case], device="cpu", steps=3, warmup=1, profile_steps=1)


def test_validate_json_structure(result: dict) -> None:
    assert {"cases", "median_abs_error", "p90_abs_error", "failed", "skipped"} <= set(result)
    assert result["failed"] == [] and result["skipped"] == []
    assert result["threads"] == 1 and result["cases"][0]["threads"] == 1
    (case,) = result["cases"]
    for key in ("model", "arch", "batch_size", "measured_s", "predicted_s", "error"):
        assert key in case
    assert case["model"] == "mobilenet-v2" and case["arch"] == "1w1g"
    assert case["batch_size"] == 2 and case["processes"] == 1


def test_validate_numbers_are_sane(result: dict) -> None:
    (case,) = result["cases"]
    assert 0 < case["measured_s"] < 60 and 0 < case["predicted_s"] < 60
    assert case["measured_wall_s"] >= case["measured_s"] * 0.5
    assert case["error"] == pytest.approx(case["predicted_s"] / case["measured_s"] - 1)
    assert result["median_abs_error"] == pytest.approx(abs(case["error"]))
    pred = case["predicted"]
    # 1w1g: no communication; the total is the sum of the components
    assert pred["comm"] == 0.0
    assert case["predicted_s"] == pytest.approx(pred["data_io"] + pred["compute_flop"]
                                                + pred["compute_mem"])
    assert pred["compute_flop"] > 0 and pred["compute_mem"] > 0
    m = case["measured"]
    parts = [m[k] for k in ("data_io", "compute_flop", "compute_mem", "comm", "framework")]
    assert all(p >= 0 for p in parts)
    assert m["compute_flop"] > 0 and m["compute_mem"] > 0 and m["comm"] == 0
    assert sum(parts) == pytest.approx(m["profiled_step_s"], rel=1e-6)


def test_summary_by_hand() -> None:
    rows = [{"error": 0.1, "paper_error": -0.5}, {"error": -0.2, "paper_error": -0.4},
            {"error": 0.5, "paper_error": -0.3}]
    s = summarize(rows)
    assert s["median_abs_error"] == pytest.approx(0.2)
    # 90th percentile of [0.1, 0.2, 0.5] (linear): 0.2 + 0.8 * (0.5 - 0.2) = 0.44
    assert s["p90_abs_error"] == pytest.approx(0.44)
    assert s["max_abs_error"] == pytest.approx(0.5)
    assert s["paper_median_abs_error"] == pytest.approx(0.4)
    assert s["targets_met"] is False  # 0.5 > 0.40


def test_profiler_event_classes() -> None:
    assert classify("aten::addmm") == "compute_flop"
    assert classify("aten::_slow_conv2d_backward") == "compute_flop"
    assert classify("aten::add_") == "compute_mem"
    assert classify("gloo:all_reduce") == "comm"
    assert classify("traincast.data") == "data_io"
    assert classify("Optimizer.step#Adam.step") == ""


def test_crop_keeps_the_first_entries() -> None:
    import torch

    x = torch.arange(24).view(2, 3, 4)
    (y,) = crop_inputs((x,), ((0, 2, 2),))
    assert y.shape == (2, 3, 2) and y[1, 2].tolist() == [20, 21]


def test_threads_follow_the_catalog_and_oversubscribed_cases_are_skipped(
        result: dict) -> None:
    import os

    cat = result["catalog"]  # calibrated at 1 thread
    with pytest.raises(TraincastError, match="calibrated at threads = 1"):
        validate(cat, cases=[], device="cpu", threads=2)
    cores = os.cpu_count() or 1
    big = Case("zoo:mobilenet-v2", "CNN", 2, "allreduce-local", gpus=cores + 1)
    out = validate(cat, cases=[big], device="cpu", steps=1, warmup=1, profile_steps=0)
    assert out["cases"] == [] and len(out["skipped"]) == 1
    assert f"{cores + 1} processes x 1 threads > {cores} cores" in out["skipped"][0]["reason"]


def test_thread_counts_are_one_and_all_cores(monkeypatch) -> None:
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert thread_counts() == [1, 4]
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert thread_counts() == [1]


def test_validate_threads_reports_each_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    v = sys.modules["traincast.validation"]  # the package (the name may be re-exported)

    def fake(catalog=None, *, threads=None, **kwargs):  # noqa: ANN001, ANN003, ANN202
        rows = [{"error": 0.1 * threads, "paper_error": -0.5}]
        return {"threads": threads, "cases": rows, "failed": [], "skipped": [],
                **summarize(rows)}

    monkeypatch.setattr(v, "validate", fake)
    out = v.validate_threads([1, 2], quick=True)
    assert [r["threads"] for r in out["runs"]] == [1, 2]
    assert out["threads"] == 1 and out["cases"] == out["runs"][0]["cases"]  # 1 thread on top
    assert out["by_threads"]["1"]["median_abs_error"] == pytest.approx(0.1)
    assert out["by_threads"]["2"]["max_abs_error"] == pytest.approx(0.2)
    assert out["by_threads"]["2"]["cases"] == 1 and out["by_threads"]["2"]["skipped"] == 0


def test_a_later_thread_count_that_cannot_run_keeps_the_runs_before_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the 2-thread calibration refused (other programs held the cores): the finished 1-thread
    # run is the result, and the 2-thread one says why it is missing; a first run's error stops
    import sys

    v = sys.modules["traincast.validation"]

    def fake(catalog=None, *, threads=None, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if threads == 2:
            raise TraincastError("calibration refused: other programs held the cores 45%")
        rows = [{"error": 0.1, "paper_error": -0.5}]
        return {"threads": threads, "cases": rows, "failed": [], "skipped": [],
                **summarize(rows)}

    monkeypatch.setattr(v, "validate", fake)
    out = v.validate_threads([1, 2], quick=True)
    assert [r["threads"] for r in out["runs"]] == [1] and list(out["by_threads"]) == ["1"]
    assert out["not_run"] == {"2": "calibration refused: other programs held the cores 45%"}
    with pytest.raises(TraincastError, match="calibration refused"):
        v.validate_threads([2, 1], quick=True)
