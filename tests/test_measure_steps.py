"""scripts/measure_steps.py: whole training steps of hf: models, one CSV row per case."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "measure_steps.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT / "src"),
                                            "PATH": "/usr/bin:/bin"})


def test_a_case_is_a_row_and_a_failed_case_a_row_with_its_error(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"model_type": "bert", "hidden_size": 32,
                                  "num_hidden_layers": 1, "num_attention_heads": 2,
                                  "intermediate_size": 64, "vocab_size": 100,
                                  "max_position_embeddings": 64}))
    out = tmp_path / "steps.csv"
    done = _run(str(out), f"hf:{config},batch=2,seq=16,attention=eager",
                f"hf:{config},batch=1,seq=999", "--device", "cpu", "--calls", "2",
                "--fastest", "1", "--profile")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open()))
    assert [r["batch"] for r in rows] == ["2", "1"]
    ok, bad = rows
    assert float(ok["step_ms"]) > 0 and float(ok["median_ms"]) >= float(ok["step_ms"])
    assert (ok["seq"], ok["attention"], ok["optimizer"], ok["device"]) == \
        ("16", "eager", "none", "cpu")
    assert float(ok["issue_ms"]) > 0 and ok["kernels"] == "0"  # no device events on the CPU
    # 999 tokens do not fit 64 positions: the case fails, the file goes on
    assert bad["step_ms"] == "" and bad["error"]


@pytest.mark.parametrize("case", ["zoo:bert-base", "hf:gpt2,batch=x", "hf:gpt2,optimizer=sgd",
                                  "hf:gpt2,colour=red", "hf:gpt2,attention=flash",
                                  "hf:gpt2,batch=0", "hf:gpt2,seq=-1"])
def test_a_bad_case_is_refused_before_anything_runs(tmp_path: Path, case: str) -> None:
    done = _run(str(tmp_path / "o.csv"), case, "--device", "cpu")
    assert done.returncode != 0 and f"case {case!r}" in done.stderr
    assert not (tmp_path / "o.csv").exists()


def test_more_fastest_steps_than_calls_is_refused(tmp_path: Path) -> None:
    done = _run(str(tmp_path / "o.csv"), "hf:gpt2", "--device", "cpu", "--calls", "2",
                "--fastest", "5")
    assert done.returncode == 2 and "--fastest must be between 1 and --calls (2)" in done.stderr
    assert not (tmp_path / "o.csv").exists()


def test_no_cuda_gpu_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    done = _run(str(tmp_path / "o.csv"), "hf:gpt2")
    assert done.returncode == 1 and "sees no CUDA GPU" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_step_time_is_the_mean_of_the_fastest_calls_and_the_median_of_all(monkeypatch) -> None:
    # a clock the steps advance by 5, 1, 3 and 2 ms (after 3 untimed warm-up steps): the
    # fastest 2 average (1 + 2) / 2 = 1.5 ms; the median of the 4 is (2 + 3) / 2 = 2.5 ms
    import importlib.util

    pytest.importorskip("torch")  # samples_ms imports it, on the CPU too

    spec = importlib.util.spec_from_file_location("measure_steps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    spec.loader.exec_module(module)
    kernels_module = sys.modules["measure_kernels"]
    durations_ms = iter([7.0, 7.0, 7.0, 5.0, 1.0, 3.0, 2.0])
    clock = {"now": 0.0}

    def step() -> None:
        clock["now"] += next(durations_ms) / 1e3

    monkeypatch.setattr(kernels_module, "time", SimpleNamespace(perf_counter=lambda: clock["now"]))
    fastest_ms, median_ms = module.time_step_ms(step, "cpu", calls=4, fastest=2)
    assert fastest_ms == pytest.approx(1.5) and median_ms == pytest.approx(2.5)
