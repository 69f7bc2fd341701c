#!/usr/bin/env bash
# One device call: install carried pure-Python deps, then run the GPU check for the oldest and newest
# supported vLLM kernel files (carried in .gpu_vllm/<version>/). Results land in $OUT.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())'
for version in "$@"; do
    python3 benchmarks/turing_gpu_graph_check.py --vllm-file ".gpu_vllm/$version/triton_unified_attention.py" \
        --out "$OUT/gpu_check_$version.json" 2>&1 | tee "$OUT/gpu_check_$version.log"
done
