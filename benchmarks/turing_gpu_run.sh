#!/usr/bin/env bash
# One GPU-machine call (H200, vLLM 0.26.0 kit in /tmp/site), about 5-6 minutes, results in $OUT:
#   1. gemmaserve from this tree into /tmp/site, so its vllm.general_plugins entry point is live;
#   2. in the background, on the CPU: `turing smem --search` for sm_75 with this machine's Triton;
#   3. benchmarks/turing_engine_check.py: the real engine clamped (diagnostic T4 limit) and stock;
#   4. benchmarks/turing_gpu_graph_check.py on vLLM's real kernel (0.26.0, then 0.34.0 if time is left).
# The kernel files travel in .cache/turing-vllm/<version>/ (git-ignored: name it in `carry`).
# Usage: bash benchmarks/turing_gpu_run.sh    (OUT must be set; BUDGET_S defaults to 400)
set -uo pipefail
: "${OUT:?set OUT to the results folder}"
BUDGET_S="${BUDGET_S:-400}"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
exec > >(tee "$OUT/run.log") 2>&1
# shellcheck disable=SC1091
source /tmp/site/env.sh
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
SITE=/tmp/site
KERNELS=.cache/turing-vllm

echo "== $(date -u +%FT%TZ) $(nvidia-smi -L)"
python3 -c 'import torch, triton, vllm; print("torch", torch.__version__, "triton", triton.__version__, "vllm", vllm.__version__)'
if ! diff -rq src/gemmaserve "$SITE/gemmaserve" -x __pycache__ >/dev/null 2>&1; then
    # Copy the package over the installed one; never `pip install --upgrade --target $SITE`, which
    # replaces $SITE/bin and with it the kit's `vllm` script. The entry point is declared by the
    # dist-info already there, or by a minimal one written here (what pip would write).
    echo "== copying gemmaserve from this tree into $SITE"
    rm -rf "$SITE/gemmaserve" && cp -r src/gemmaserve "$SITE/gemmaserve"
    if ! ls -d "$SITE"/gemmaserve-*.dist-info >/dev/null 2>&1; then
        mkdir -p "$SITE/gemmaserve-0.1.0.dist-info"
        printf 'Metadata-Version: 2.1\nName: gemmaserve\nVersion: 0.1.0\n' > "$SITE/gemmaserve-0.1.0.dist-info/METADATA"
        printf '[vllm.general_plugins]\ngemmaserve_turing = gemmaserve.turing.plugin:register\n' \
            > "$SITE/gemmaserve-0.1.0.dist-info/entry_points.txt"
    fi
fi
command -v vllm >/dev/null || { echo "!! no vllm on PATH (is /tmp/site/bin/vllm there?)"; exit 1; }
cmp -s src/gemmaserve/turing/plugin.py "$SITE/gemmaserve/turing/plugin.py" || { echo "!! gemmaserve not installed"; exit 1; }
python3 -c 'import importlib.metadata as m; print("vllm.general_plugins:", [(p.name, p.value) for p in m.entry_points(group="vllm.general_plugins")])'

echo "== [$(elapsed)s] sm_75 launch search with this machine's Triton (background, CPU only)"
CUDA_VISIBLE_DEVICES="" timeout 300 python3 -m gemmaserve turing smem --search --json \
    --vllm-file "$KERNELS/0.26.0/triton_unified_attention.py" > "$OUT/smem_search_sm75.json" 2> "$OUT/smem_search.log" &
SEARCH=$!

echo "== [$(elapsed)s] engine check: vLLM 0.26.0 clamped (diagnostic T4 limit) and stock"
timeout 300 python3 benchmarks/turing_engine_check.py --out "$OUT" --preset tiny --start-timeout-s 150
echo "engine check exit $?"

for version in 0.26.0 0.34.0; do
    left=$(( BUDGET_S - $(elapsed) ))
    if [ "$left" -lt 60 ]; then echo "== skip graph check $version: ${left}s left"; continue; fi
    echo "== [$(elapsed)s] graph check on vLLM $version's kernel (budget $(( left - 30 ))s)"
    timeout "$left" python3 benchmarks/turing_gpu_graph_check.py --vllm-file "$KERNELS/$version/triton_unified_attention.py" \
        --out "$OUT/graph_check_$version.json" --budget-s $(( left - 50 )) 2>&1 | tail -n 40
done

wait "$SEARCH"; echo "== [$(elapsed)s] smem search exit $? ($(wc -c < "$OUT/smem_search_sm75.json") bytes)"
tail -n 5 "$OUT/smem_search.log"
pgrep -af "vllm serve" && echo "!! a vllm serve is still running" || echo "== no vllm serve left"
echo "== done in $(elapsed)s"
sleep 1  # let tee finish run.log
