#!/bin/sh
# Makes a fresh clone ready: Debian packages for the sandbox and the micro tasks, npm
# dependencies, the full tier's Python environment (.venv-full), the TypeScript build.
# Idempotent; a second run only checks and rebuilds.
set -eu
cd "$(dirname "$0")/.."

# chromium: the HTML report is checked in headless Chromium (test/report.test.ts).
# docker.io and debootstrap: the Docker sandbox backend and its micro image, built without a registry.
# slurmctld slurmd slurm-client munge: the Slurm backend's tests start a two-node cluster on this host
# (test/helpers/slurm.ts; about 8 s to install). No service is started here.
# python3-venv: the full tier's virtual environment (.venv-full, below).
debs="bubblewrap python3-venv python3-torch python3-numpy libopenblas0-pthread chromium docker.io debootstrap slurmctld slurmd slurm-client munge"
# A GPU host (nvidia-smi lists a GPU; A2RL_FULL_GPU=1 or 0 overrides the guess) gets the full tier's GPU runtime
# below, and what vLLM's compile path needs at run time: Triton builds a small C launcher with the system compiler
# against Python's headers (gcc, libc6-dev, python3-dev).
full_gpu=${A2RL_FULL_GPU:-$(nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)}
[ "$full_gpu" = 1 ] && debs="$debs gcc libc6-dev python3-dev"
missing=""
for p in $debs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing" >&2
  as_root=""
  [ "$(id -u)" = 0 ] || as_root="sudo"
  $as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $missing >&2
fi

# Every job moves into cgroups of its own; after a quiet spell the kernel first makes that move wait for an RCU
# grace period (4-14 ms p50 a job start on a 2-core host, sandbox/cgroup.ts). The cgroup2 option favordynmods (Linux
# 6.0 and later) spares it, host-wide until reboot, at a small cost to every fork and exit. As root, where jobs use
# cgroup v1 controllers, setup turns it on; `a2rl doctor` says when it is off. A remount sets every cgroup2 option at
# once: the current ones are passed again.
favor_cgroup_moves() {
  [ "$(id -u)" = 0 ] || return 0
  grep -q ' - cgroup [^ ]* [^ ]*memory' /proc/self/mountinfo || return 0
  grep -q ' - cgroup2* [^ ]* [^ ]*favordynmods' /proc/self/mountinfo && return 0
  unified=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
  options=$(awk '/ - cgroup2 / { print $NF; exit }' /proc/self/mountinfo)
  [ -n "$unified" ] || return 0
  if mount -o "remount,$options,favordynmods" "$unified" 2>/dev/null &&
    grep -q ' - cgroup2 [^ ]* [^ ]*favordynmods' /proc/self/mountinfo; then
    echo "setup: remounted the cgroup2 hierarchy at $unified with favordynmods, so job starts do not wait for the kernel" >&2
  else
    echo "setup: could not turn on favordynmods at $unified (older kernel, or cgroups this host does not let us remount):" \
      "job starts may wait 4-14 ms; boot with cgroup_favordynmods=true (Linux 6.7 or later) to spare it" >&2
  fi
}
favor_cgroup_moves

# The three installs below run side by side, each in a subshell of its own: they mostly wait on
# downloads and unpacking (one after another they took 165 s on a 2-core machine with warm caches).

# npm ci only when the lockfile changed since the last install; then the TypeScript build.
npm_dependencies() {
  stamp=node_modules/.a2rl-lock.sha256
  want=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing npm dependencies" >&2
    npm ci --no-audit --no-fund >&2
    echo "$want" > "$stamp"
  fi
  npm run --silent build >&2
}

# The agent CLIs the real-agent tests drive (test/agents.test.ts), at the versions tested,
# outside the project's dependencies; an operator's own install on PATH wins over these.
agent_clis() {
  agents="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0"
  agents_stamp=.agents/.a2rl-agents
  if [ ! -f "$agents_stamp" ] || [ "$(cat "$agents_stamp")" != "$agents" ]; then
    echo "setup: installing agent CLIs into .agents/: $agents" >&2
    npm install --prefix .agents --no-audit --no-fund $agents >&2
    echo "$agents" > "$agents_stamp"
  fi
}

# The full tier's Python runtime in .venv-full, built with the system Python the sandbox runs; every sandbox backend
# mounts it read-only. From tasks/hflm/requirements.txt (CPU torch, exact pins), or on a GPU host from
# requirements-gpu.txt (CUDA torch and vLLM, the same Hugging Face pins) into a fresh environment, never over the CPU
# one: its torch 2.13.0+cpu would satisfy vLLM's torch pin and be kept. A GPU build whose torch is still a CPU one
# fails here, saying so. Rebuilt only when the pins change: the stamp, written last, holds their hash, so an
# interrupted build is redone. PIP_RETRIES=0: an index that cannot be reached fails at once instead of being retried
# for minutes. About 30 s from a local index (CPU).
full_venv() {
  venv=.venv-full
  venv_stamp=$venv/.a2rl-requirements.sha256
  pins=tasks/hflm/requirements.txt
  [ "$full_gpu" = 1 ] && pins=tasks/hflm/requirements-gpu.txt
  venv_want=$(sha256sum "$pins" | cut -d' ' -f1)
  if [ ! -f "$venv_stamp" ] || [ "$(cat "$venv_stamp")" != "$venv_want" ]; then
    echo "setup: building $venv from $pins" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    PIP_RETRIES=0 "$venv/bin/pip" install --quiet --no-input -r "$pins" >&2
    if [ "$full_gpu" = 1 ] && ! "$venv/bin/python" -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
      echo "setup: $venv has a CPU build of torch although $pins asks for CUDA's: the index pip reads serves only" \
        "CPU wheels; point pip at one with CUDA wheels (PIP_INDEX_URL) and run scripts/setup.sh again" >&2
      exit 1
    fi
    echo "$venv_want" > "$venv_stamp"
  fi
}

(set -e; npm_dependencies) &
npm_pid=$!
(set -e; agent_clis) &
agents_pid=$!
(set -e; full_venv) &
venv_pid=$!
failed=""
wait "$npm_pid" || failed="$failed npm-dependencies"
wait "$agents_pid" || failed="$failed agent-CLIs"
wait "$venv_pid" || failed="$failed .venv-full"
if [ -n "$failed" ]; then
  echo "setup: failed:$failed (its error is above); fix it and run scripts/setup.sh again" >&2
  exit 1
fi

