#!/bin/sh
# The full tier's GPU check, on a host with an NVIDIA GPU. Each step says what it checks; the first that fails stops
# the check with the reason and exits 1.
#
#   sh bench/gpu-check.sh offline          # no network needed: a tiny model built here, the sandboxed GPU path end to end
#   sh bench/gpu-check.sh full [MODEL]     # hub access: MODEL (default the task's, Qwen/Qwen2.5-1.5B) from the hub
#
# Both: the driver (nvidia-smi), the GPU runtime (scripts/setup.sh with A2RL_FULL_GPU=1: CUDA torch, vLLM, a compiler
# and Python's headers), the probe run directly, `a2rl doctor`, GSM8K's assets prepared, then a run served with
# `--gpus 0` and A2RL_FULL_GPU=1 (grading on the GPU or failing, never on CPU) and bench/gpu-check.jsonl replayed: a
# run_training job that asks for the GPU runs the probe in the sandbox, a second trains a LoRA adapter there, the
# adapter is graded on the GPU (merged, decoded by vLLM), then the baseline. offline prepares from a fixture snapshot
# (tasks/hflm-tests/fixture_hub.py, profile gpu-check: a tiny Qwen2 with vLLM-sized heads) and takes a few minutes
# once setup has run; full downloads MODEL and GSM8K and grades the whole test set twice. Record what it prints in
# docs/operating.md ("GPU check"). A2RL_HOME picks the home (default: a fresh one).
set -eu
cd "$(dirname "$0")/.."
mode=${1:-}
case "$mode" in
  offline) model=a2rl-fixture/gpu-check-qwen2 ;;
  full) model=${2:-Qwen/Qwen2.5-1.5B} ;;
  *) echo "usage: sh bench/gpu-check.sh offline | full [MODEL]" >&2; exit 2 ;;
esac
home=${A2RL_HOME:-$(mktemp -d /tmp/a2rl-gpu-check-XXXXXX)}
started=$(date +%s)
step=""
check() { step=$1; echo "gpu-check [$(($(date +%s) - started)) s]: $step" >&2; }
fail() { echo "gpu-check: FAILED at \"$step\": $*" >&2; exit 1; }
a2rl() { node dist/src/cli/main.js --home "$home" "$@"; }

check "the NVIDIA driver sees a GPU"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader ||
  fail "nvidia-smi sees no GPU: install the NVIDIA driver (580 or newer for CUDA 13.0, the pinned torch's)"

# Offline: A2RL_WHEELS=DIR/wheels from `a2rl prepare --bundle DIR` on a machine with an index (docs/operating.md).
check "the GPU runtime builds (scripts/setup.sh full, A2RL_FULL_GPU=1${A2RL_WHEELS:+, wheels from $A2RL_WHEELS})"
A2RL_FULL_GPU=1 sh scripts/setup.sh full || fail "setup failed (its error is above)"

check "the runtime uses the GPU outside the sandbox (python -m hflm.gpu)"
PYTHONPATH=tasks .venv-full/bin/python -m hflm.gpu || fail "the probe's FAILED line above says why"

check "a2rl doctor: the backends, and a sandboxed job that opens the GPU on each"
a2rl doctor || fail "no sandbox backend works here (the lines above say why)"

check "GSM8K's assets with $model"
if [ "$mode" = offline ]; then
  hub=$home/gpu-check-hub
  PYTHONPATH=tasks .venv-full/bin/python tasks/hflm-tests/fixture_hub.py "$hub" --profile gpu-check || fail "the fixture snapshot"
  a2rl prepare gsm8k --model "$model" --from "$hub" || fail "a2rl prepare (above)"
else
  a2rl prepare gsm8k --model "$model" || fail "a2rl prepare (above): hub access, HF_TOKEN for gated models"
fi

check "a run on the GPU: probe, training and grading jobs in the sandbox (bench/gpu-check.jsonl)"
config=$home/gpu-check-mcp.json
cat > "$config" <<JSON
{"mcpServers": {"a2rl": {"command": "env", "args": ["A2RL_FULL_GPU=1", "node", "$PWD/dist/src/cli/main.js", "--home", "$home",
  "serve", "--task", "gsm8k", "--base-model", "$model", "--gpus", "0", "--label", "gpu-check-$mode"]}}}
JSON
a2rl replay bench/gpu-check.jsonl --mcp-config "$config" || fail "the replay stopped at the line it names (above)"
run=$(a2rl runs list | tail -n 1 | cut -f1)
a2rl report "$run" --format md
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
echo "gpu-check $mode: $model on gsm8k passed in $(($(date +%s) - started)) s on $gpu; home $home"
