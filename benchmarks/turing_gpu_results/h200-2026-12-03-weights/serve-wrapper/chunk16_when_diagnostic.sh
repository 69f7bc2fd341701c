#!/usr/bin/env bash
# Control run: stock vLLM in both runs (VLLM_PLUGINS keeps gemmaserve's plugin out, so the diagnostic
# variable is inert). The run that has the variable ("clamped" label) chunks prefill in 16-token pieces:
# a numerically equivalent change to stock, to size the output differences any such change gives.
if [ -n "${GEMMASERVE_TURING_DIAG_SMEM_LIMIT:-}" ]; then exec vllm serve "$@" --max-num-batched-tokens 16
else exec vllm serve "$@"; fi
