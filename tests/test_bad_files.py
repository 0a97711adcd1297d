"""User-supplied files with bad values: one error naming the file, the row and the field
(features files and their per-op tables, catalogs, traces), and a BOM read as no part of the
text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import traincast
from traincast.errors import TraincastError
from traincast.features.io import PARQUET_KEY, load_features
from traincast.hardware.catalog import load_catalog
from traincast.trace.store import ingest

FEATS = {"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9, "weight_bytes": 1e8}
ROW = {"op": "aten::mm", "phase": "forward", "flops": 2 * 64 * 512 * 1024, "bytes_read": 1e6,
       "bytes_written": 2.6e5, "bound": "compute", "dtype": "float32",
       "shapes": "64x512;512x1024"}
ONE = {**FEATS, "flops_compute_bound": ROW["flops"], "bytes_memory_bound": 0.0}
"""A record whose totals are its one per-op row's (a features file must agree with its table)."""


def _json(tmp_path: Path, record: dict) -> Path:
    path = tmp_path / "f.json"
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize(("change", "says"), [
    ({"flops": "1e9"}, "ops row 2: field 'flops' must be a number from 0 to 1e+24, got '1e9'"),
    ({"flops": None}, "ops row 2: field 'flops'"),
    ({"flops": -1.0}, "ops row 2: field 'flops'"),
    ({"flops": 1e30}, "ops row 2: field 'flops'"),
    ({"bytes_written": float("inf")}, "ops row 2: field 'bytes_written'"),
    ({"op": None}, "ops row 2: field 'op'"),
    ({"bound": "weird"}, "ops row 2: field 'bound' must be compute or memory"),
    ({"shapes": "64x3x7x7x99999999999"}, "ops row 2: field 'shapes'"),
    ({"shapes": "axb"}, "ops row 2: field 'shapes'"),
])
def test_a_bad_per_op_row_names_the_file_row_and_field(tmp_path: Path, change: dict,
                                                       says: str) -> None:
    path = _json(tmp_path, {**FEATS, "ops": [ROW, {**ROW, **change}]})
    with pytest.raises(TraincastError) as err:
        load_features(path)
    assert str(err.value).startswith(f"{path}: {says}")
    with pytest.raises(TraincastError, match="features: ops row 2"):  # the API alike
        traincast.predict({**FEATS, "ops": [ROW, {**ROW, **change}]})


def test_a_misspelled_feature_is_an_error_and_other_keys_pass(tmp_path: Path) -> None:
    # a misspelled feature would be read as 0: 5 GB of embedding rows and 1 GB of input lost
    for typo, meant in (("embeding_bytes_touched", "embedding_bytes_touched"),
                        ("input_byts", "input_bytes"), ("Weight_Bytes", "weight_bytes")):
        with pytest.raises(TraincastError,
                           match=rf"f\.json: unknown field '{typo}' .*did you mean '{meant}'"):
            load_features(_json(tmp_path, {**FEATS, typo: 5e9}))
    # keys of a fresh profile's record, and notes of the user's own, are read or ignored
    kept = {**FEATS, "bytes_memory_bound_fused": 1e9, "my_experiment": "run 3", "comment": "x"}
    assert load_features(_json(tmp_path, kept)) == kept


def test_a_row_that_is_no_table_and_amp_that_is_no_boolean(tmp_path: Path) -> None:
    with pytest.raises(TraincastError, match="ops row 1: must be a table"):
        load_features(_json(tmp_path, {**FEATS, "ops": ["x"]}))
    with pytest.raises(TraincastError, match="field 'ops' must be a list"):
        load_features(_json(tmp_path, {**FEATS, "ops": "x"}))
    for amp in ("false", 0, "yes"):  # "false" once turned mixed precision on
        with pytest.raises(TraincastError, match="field 'amp' must be true or false"):
            load_features(_json(tmp_path, {**FEATS, "amp": amp}))
    assert load_features(_json(tmp_path, {**ONE, "amp": False, "ops": [ROW]}))["ops"] == [ROW]


def test_parquet_features_with_bad_metadata_or_columns(tmp_path: Path) -> None:
    def write(table: pa.Table, meta: bytes) -> Path:
        path = tmp_path / "f.parquet"
        pq.write_table(table.replace_schema_metadata({PARQUET_KEY: meta}), path)
        return path

    good = pa.table({k: [ROW[k]] for k in ROW} | {"recurrent": [None]})
    meta = json.dumps(ONE).encode()
    assert load_features(write(good, meta))["ops"][0]["flops"] == ROW["flops"]
    with pytest.raises(TraincastError, match="features record .* is not valid JSON"):
        load_features(write(good, b"{not json"))
    for other, kind in ((b"[1, 2]", "list"), (b'"hello"', "str"), (b"5", "int"),
                        (b"null", "NoneType")):  # valid JSON, but no object of features
        with pytest.raises(TraincastError, match=rf"features record .* is {kind} JSON, not an "
                                                 "object of features"):
            load_features(write(good, other))
    with pytest.raises(TraincastError, match="has no column\\(s\\) flops"):
        load_features(write(good.drop_columns(["flops"]), meta))
    with pytest.raises(TraincastError, match="ops row 1: field 'flops'"):
        load_features(write(good.set_column(2, "flops", pa.array([None], pa.float64())), meta))


def test_a_bom_is_no_part_of_a_json_or_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(FEATS).encode())
    assert load_features(path)["weight_bytes"] == 1e8
    cat = tmp_path / "c.toml"
    cat.write_bytes(b'\xef\xbb\xbf[alias]\nMYV100 = "V100-SXM2-16GB"\n')
    assert load_catalog(cat).gpu_name("MYV100") == "V100-SXM2-16GB"


GPU = ("[gpu.MY]\nfp32_tflops = {tf}\nmem_bw_gbs = {bw}\nsms = {sms}\nfp32_cores_per_sm = 64\n"
       "boost_clock_mhz = {mhz}\npower_w = {w}\n")
OK = {"tf": 15.7, "bw": 900, "sms": 80, "mhz": 1530, "w": 300}  # 80 x 64 x 2 x 1.53 GHz


@pytest.mark.parametrize(("change", "says"), [
    ({"mhz": 1.53}, "'boost_clock_mhz' = 1.53 is below 100"),  # typed in GHz
    ({"w": 0.3}, "'power_w' = 0.3 is below 5"),                 # in kW
    ({"bw": 0.9}, "'mem_bw_gbs' = 0.9 is below 1"),             # in TB/s
    ({"sms": 8}, "fp32_tflops = 15.7 is not sms x fp32_cores_per_sm x 2 x boost_clock_mhz"),
    ({"tf": 157}, "fp32_tflops = 157 is not sms"),
    ({"bw": 9e5}, "'mem_bw_gbs' = 900000.0 is above 100,000"),  # in MB/s
    ({"w": 3e5}, "'power_w' = 300000.0 is above 5,000"),        # in mW
    ({"bw": 3.35}, "fp32_tflops = 15.7 over mem_bw_gbs = 3.35 is 4,687 FLOP per byte"),  # TB/s
])
def test_a_catalog_value_in_the_wrong_unit_is_an_error(tmp_path: Path, change: dict,
                                                       says: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GPU.format(**OK))
    assert load_catalog(path).gpus["MY"].sms == 80
    path.write_text(GPU.format(**{**OK, **change}))
    with pytest.raises(TraincastError, match=re.escape(says)):
        load_catalog(path)


@pytest.mark.parametrize(("line", "says"), [
    ("mem_gb = 24576", "'mem_gb' = 24576.0 is above 10,000"),    # MiB
    ("mem_gb = 0.024", "'mem_gb' = 0.024 is below 0.1"),         # TB
    ("sms = 16384", "'sms' = 16384 is above 2,000"),
    ("fp16_tflops = 165200", "'fp16_tflops' = 165200.0 is above 100,000"),  # GFLOP/s
    ("process_nm = 4e-9", "'process_nm' = 4e-09 is below 0.1"),  # metres
])
def test_a_catalog_size_in_the_wrong_unit_is_an_error(tmp_path: Path, line: str,
                                                      says: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"[gpu.MY]\nfp32_tflops = 15.7\nmem_bw_gbs = 900\n{line}\n")
    with pytest.raises(TraincastError, match=re.escape(says)) as err:
        load_catalog(path)
    assert err.value.hint  # its own, or the catalog format's page
    link = tmp_path / "l.toml"  # a link speed in bits/s
    link.write_text('[link.mylink]\nbw_gbs = 400e9\nefficiency = 1.0\nsource = "x"\n')
    with pytest.raises(TraincastError, match=re.escape("'bw_gbs' = 400000000000.0 is above")):
        load_catalog(link)


def test_a_bandwidth_override_in_the_wrong_unit_is_caught_on_the_merged_entry(
        tmp_path: Path) -> None:
    path = tmp_path / "bw.toml"  # an H100's 3.35 TB/s typed over the shipped entry
    path.write_text("[gpu.H100-SXM5-80GB]\nmem_bw_gbs = 3.35\n")
    says = "bw.toml: [gpu.H100-SXM5-80GB] fp32_tflops = 67 over mem_bw_gbs = 3.35 is 20,000"
    with pytest.raises(TraincastError, match=re.escape(says)):
        load_catalog(path)


def test_a_catalog_error_without_a_hint_of_its_own_points_at_the_format(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[gpu.MyGPU]\nfp32_tflops = "82.6"\n')  # a number written as text
    with pytest.raises(TraincastError, match="must be a number") as err:
        load_catalog(path)
    assert err.value.hint == "the catalog format, key by key: docs/hardware.md"


def test_a_trace_header_naming_a_column_twice_and_an_empty_trace(tmp_path: Path) -> None:
    twice = tmp_path / "t.csv"
    twice.write_text("job_id,n_gpus,N_GPUS \na,1,8\n")
    with pytest.raises(TraincastError, match="names column 'n_gpus' twice \\(fields 2 and 3\\)"):
        ingest(twice, db=tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(TraincastError, match="e.csv: the file is empty"):
        ingest(empty, db=tmp_path / "s.duckdb")


def test_the_api_refuses_what_the_cli_refuses() -> None:
    """A misspelt keyword, an overlap outside [0, 1] and a GPU count given as text are errors,
    not ignored, clipped or a TypeError."""
    for kw, says in ((dict(gpuz=3), "unknown keyword\\(s\\) gpuz"),
                     (dict(overlap=5.0), "overlap must be a fraction from 0 to 1"),
                     (dict(gpus="8"), "n_gpus must be a number, got '8'")):
        with pytest.raises(TraincastError, match=says):
            traincast.predict(FEATS, **kw)
    # a profile's memory parts and batch, as a features file's are checked
    for part, says in (({"memory_bytes": {"weights": -5e9}}, "memory_bytes.weights must be a "
                        "number of bytes from 0 to 1e\\+18, got -5000000000.0"),
                       ({"memory_bytes": [1]}, "memory_bytes must be a table of parts"),
                       ({"batch_size": 0}, "batch_size must be a whole number")):
        with pytest.raises(TraincastError, match=says):
            traincast.predict({**FEATS, **part})
    mem = {"weights": np.int64(10**9), "grads": 1e9, "optimizer": 2e9, "activations": 0}
    assert traincast.predict({**FEATS, "memory_bytes": mem, "batch_size": np.int32(8)},
                             node="dgx-a100").memory["footprint_gb"] == pytest.approx(4.0)


def test_plan_gpu_lists_and_batches_in_bounds() -> None:
    from typer.testing import CliRunner

    from traincast.cli import app
    from traincast.cli.plan import parse_gpus

    assert parse_gpus("64,48,32") == [64, 48, 32] and parse_gpus("8,") == [8]
    with pytest.raises(TraincastError, match="'16,,32'"):
        parse_gpus("16,,32")
    # a count named twice is a slip, refused as whatif refuses a repeated scenario
    with pytest.raises(TraincastError, match="64 given more than once in '64,32,64'"):
        parse_gpus("64,32,64")
    r = CliRunner().invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "8", "--global-batch",
                                 "99999999999999"])
    assert r.exit_code == 2 and "must be from 1 to 1,000,000,000" in " ".join(r.output.split())


@pytest.mark.parametrize(("text", "says"), [
    ('[gpu.V100-SXM2-16GB.fitted]\ngemm_max_fraction = { fp99 = 0.5 }\n', "names no dtype: fp99"),
    ('[gpu.V100-SXM2-16GB.sources]\nwhatever = "x"\n', "cites no field of the entry: whatever"),
    ('[gpu.""]\nfp32_tflops = 1\nmem_bw_gbs = 10\n', "an entry needs a name"),
    ('[alias]\nT4 = "V100-SXM2-16GB"\n', "'T4' is the name of the GPU entry"),
    ('[kernel_model.params]\nnot_a_param = 1\n', "unknown parameter\\(s\\) not_a_param"),
])
def test_a_catalog_name_that_names_nothing_is_an_error(tmp_path: Path, text: str,
                                                       says: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(TraincastError, match=says):
        load_catalog(path)


def test_a_user_gpu_takes_a_shipped_alias_name_and_a_repointed_guess_loses_its_reason(
        tmp_path: Path) -> None:
    """A user file's [gpu.A100] replaces the shipped alias A100 (its own entry is priced); a
    user alias G2 pointed at another GPU drops the shipped guess's reason; a user file that
    overrides only fp32_tflops of a shipped GPU (a power cap) is not held to the shipped lanes;
    an alias naming a GPU entry of the same or an earlier file is an error."""
    path = tmp_path / "c.toml"
    path.write_text("[gpu.K80.datasheet]\nmem_bw_gbs = 240\n"  # a shipped entry first
                    "[gpu.A100]\nfp32_tflops = 19.5\nmem_bw_gbs = 2039\n"
                    '[alias]\nG2 = "L4"\n'
                    "[gpu.H100-SXM5-80GB.datasheet]\nfp32_tflops = 40\n")
    cat = load_catalog(path)
    assert cat.gpu("A100").name == "A100" and "A100" not in cat.aliases
    assert cat.gpu_name("G2") == "L4" and "G2" not in cat.assumed_aliases
    assert "G3" in cat.assumed_aliases and cat.gpus["H100-SXM5-80GB"].fp32_tflops == 40
    path.write_text('[gpu.MY]\nfp32_tflops = 1\nmem_bw_gbs = 10\n[alias]\nMY = "T4"\n')
    with pytest.raises(TraincastError, match="'MY' is the name of the GPU entry"):
        load_catalog(path)


def test_per_op_flags_on_features_without_a_per_op_table_are_refused(tmp_path: Path) -> None:
    """--tf32-matmul and --memory-format change how a per-op table is priced: on aggregate
    features they would change nothing while the setup line said they had."""
    from typer.testing import CliRunner

    from traincast.cli import app

    path = _json(tmp_path, FEATS)
    for flags in (["--tf32-matmul"], ["--memory-format", "nhwc"]):
        r = CliRunner().invoke(app, ["predict", "--features", str(path), *flags])
        assert isinstance(r.exception, TraincastError)  # exit 2 under traincast's main
        assert "the file has no per-op table" in str(r.exception)
    r = CliRunner().invoke(app, ["predict", "--features", str(path)])
    assert r.exit_code == 0, r.output


def test_the_python_api_refuses_a_misspelled_feature_too() -> None:
    with pytest.raises(TraincastError, match=r"^features: unknown field 'embeding_bytes_touched'"):
        traincast.predict({**FEATS, "embeding_bytes_touched": 5e9})
