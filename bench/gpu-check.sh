#!/bin/sh
# The full tier's GPU check (issue 17), for a host with an NVIDIA GPU and Hugging Face hub access:
#
#   sh bench/gpu-check.sh [MODEL]        # default Qwen/Qwen2.5-0.5B-Instruct
#
# Builds the runtime with CUDA torch and vLLM (scripts/setup.sh sees the GPU), prepares GSM8K with the model from the
# hub, serves a run of it with the GPU (`serve --gpus 0`: one GPU is shared by jobs and grading), waits for the
# baseline (the base model graded on the whole test set by the real grader, vLLM backend) and prints the time and the
# scores. Record the figures in docs/operating.md ("GPU check"). A2RL_HOME picks the home (default: a fresh one).
set -eu
cd "$(dirname "$0")/.."
model=${1:-Qwen/Qwen2.5-0.5B-Instruct}
home=${A2RL_HOME:-$(mktemp -d /tmp/a2rl-gpu-check-XXXXXX)}
nvidia-smi -L
sh scripts/setup.sh
a2rl() { node dist/src/cli/main.js --home "$home" "$@"; }
a2rl prepare gsm8k --model "$model"
config=$home/gpu-check-mcp.json
cat > "$config" <<EOF
{"mcpServers": {"a2rl": {"command": "node", "args": ["$PWD/dist/src/cli/main.js", "--home", "$home", "serve", "--task", "gsm8k",
  "--base-model", "$model", "--gpus", "0", "--label", "gpu-check"]}}}
EOF
start=$(date +%s)
a2rl replay bench/gpu-check.jsonl --mcp-config "$config"
seconds=$(($(date +%s) - start))
run=$(a2rl runs list | tail -n 1 | cut -f1)
a2rl report "$run" --format md
echo "gpu-check: $model on gsm8k, baseline graded ${seconds} s after the run started, on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
