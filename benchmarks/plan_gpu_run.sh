#!/usr/bin/env bash
# One GPU-machine call for the plan's speed and memory checks (H200, vLLM 0.26.0 kit in /tmp/site), results in $OUT.
#   bash benchmarks/plan_gpu_run.sh install            # after the last kit part: check, unpack, install the kit
#   bash benchmarks/plan_gpu_run.sh speed NAME…        # benchmarks/plan_gpu_speed.py --only NAME…
#   bash benchmarks/plan_gpu_run.sh memory NAME…       # benchmarks/plan_gpu_memory.py --only NAME…
# The kit parts travel in .gpukit/ (git-ignored: name it in `carry`), one per call, into /tmp/vkit_parts.
# A call carries the tracked tree too (~9 MB) within its 64 MiB, so a 58 MiB part may not fit: send the joined
# parts as 50 MB chunks instead (`cat part?? | split -b 50000000 -d - .gpukit/c`); install rebuilds the parts.
set -uo pipefail
: "${OUT:?set OUT to the results folder}"
STAGE="${1:?install|speed|memory}"; shift
START=$(date +%s)
exec > >(tee "$OUT/run-$STAGE.log") 2>&1
SITE=/tmp/site
echo "== $(date -u +%FT%TZ) $STAGE $* on $(nvidia-smi -L 2>/dev/null | head -n 1)"

mkdir -p /tmp/vkit_parts && cp .gpukit/part?? .gpukit/c?? .gpukit/PARTS.sha256 /tmp/vkit_parts/ 2>/dev/null
if [ "$STAGE" = install ] && ! ls /tmp/vkit_parts/part?? >/dev/null 2>&1; then
    (cd /tmp/vkit_parts && cat c?? | split -b 58M -d - part)  # the chunks back into the kit's parts
fi
if [ "$STAGE" = install ]; then
    (cd /tmp/vkit_parts && sha256sum -c PARTS.sha256) || { echo "!! kit parts incomplete"; exit 1; }
    cat /tmp/vkit_parts/part?? > /tmp/vkit.tar && tar -xf /tmp/vkit.tar -C /tmp && bash /tmp/vkit/install.sh --extras | tail -n 6
fi
# shellcheck disable=SC1091
source "$SITE/env.sh" || { echo "!! the kit is not installed"; exit 1; }
export PYTHONUNBUFFERED=1
if ! diff -rq src/gemmaserve "$SITE/gemmaserve" -x __pycache__ >/dev/null 2>&1; then
    # Copy over the installed package (pip --upgrade --target would replace the kit's bin/vllm).
    rm -rf "$SITE/gemmaserve" && cp -r src/gemmaserve "$SITE/gemmaserve"
    mkdir -p "$SITE/gemmaserve-0.1.0.dist-info"
    printf 'Metadata-Version: 2.1\nName: gemmaserve\nVersion: 0.1.0\n' > "$SITE/gemmaserve-0.1.0.dist-info/METADATA"
    printf '[vllm.general_plugins]\ngemmaserve_turing = gemmaserve.turing.plugin:register\n' \
        > "$SITE/gemmaserve-0.1.0.dist-info/entry_points.txt"
fi
python3 -c 'import vllm, transformers, gemmaserve; print("vllm", vllm.__version__, "transformers", transformers.__version__)'
only=(); for name in "$@"; do only+=(--only "$name"); done
case "$STAGE" in
    install) ;;
    speed) timeout 560 python3 benchmarks/plan_gpu_speed.py --out "$OUT" --budget-s 420 "${only[@]}" ;;
    memory) timeout 560 python3 benchmarks/plan_gpu_memory.py --out "$OUT" --budget-s 470 "${only[@]}" ;;
    *) echo "!! unknown stage $STAGE"; exit 2 ;;
esac
pgrep -af "vllm serve|api_server" && echo "!! a server is still running" || echo "== no server left"
echo "== done in $(( $(date +%s) - START ))s"
