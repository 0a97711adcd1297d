#!/usr/bin/env bash
# Calibrate and validate traincast on a CUDA GPU machine (under 8 minutes), writing JSON.
#
#   scripts/gpu_validate.sh [OUT_DIR]        (default: gpu-validate)
#
# Writes OUT_DIR/local.toml (the calibrated catalog of this GPU, its host link and the local
# all-reduce / loopback links), OUT_DIR/calibrate.json and OUT_DIR/validate.json (the
# `traincast validate --json` object: cases, median_abs_error, p90_abs_error). Needs a CUDA
# build of torch; with one GPU the 2-process cases share it (gloo), with 2+ they use NCCL.
set -euo pipefail
OUT="${1:-gpu-validate}"
TRAINCAST="${TRAINCAST:-traincast}"
mkdir -p "$OUT"
python - <<'PY'
import sys
import torch
if not torch.cuda.is_available():
    sys.exit("gpu_validate.sh: torch sees no CUDA GPU (torch " + torch.__version__ + ")")
print(f"GPU: {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}, torch {torch.__version__}",
      file=sys.stderr)
PY
start=$(date +%s)
timeout 150 "$TRAINCAST" calibrate --device cuda -o "$OUT/local.toml" --json > "$OUT/calibrate.json"
timeout 300 "$TRAINCAST" validate --device cuda --catalog "$OUT/local.toml" --json \
    > "$OUT/validate.json"
python - "$OUT/validate.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["cases"]:
    print(f"{c['model']:18s} {c['arch']:16s} b{c['batch_size']:<4d} measured {c['measured_s']*1e3:9.2f} ms"
          f"  predicted {c['predicted_s']*1e3:9.2f} ms  error {c['error']:+.1%}")
for f in r.get("failed", []):
    print(f"failed: {f['model']} {f['arch']}: {f['reason']}")
print(f"median |error| {r['median_abs_error']:.1%}, p90 {r['p90_abs_error']:.1%}")
PY
echo "done in $(( $(date +%s) - start )) s; JSON in $OUT/" >&2
