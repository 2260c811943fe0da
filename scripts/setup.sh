#!/bin/sh
# Makes a clone ready for the commands named, installing what they need and nothing more, and never replacing what the
# host has (an installed Docker engine stays). Idempotent: a second run only checks and rebuilds. Asks nothing: on a
# run without a terminal, sudo is never left waiting for a password (sudo -n). Prints its plan first, what it changed last.
#
#   sh scripts/setup.sh [--plan] [serve|demo|bench|agents|full|test ...]
#
#   serve, demo  the server and the micro tasks: bubblewrap, Debian's torch, NumPy and OpenBLAS, npm dependencies and
#                the TypeScript build (npm run demo)
#   agents       and the agent CLIs `a2rl run` drives, at their tested versions in .agents/
#   full         and the full tier's Python runtime .venv-full (on a GPU host, the CUDA route its driver runs)
#   test         all of the above and the test suite's extras: chromium, a Docker engine (docker.io, only where none
#                is installed), debootstrap, slurmctld, slurmd, slurm-client, munge, and the cgroup v2 test VM's
#                qemu-system-x86, linux-image-amd64, busybox-static, cpio (npm test)
#   bench        serve and those extras (npm run bench: its sections time Docker and a local Slurm cluster)
#   (none)       serve agents full: what an operator runs
#   --plan              print the plan and change nothing
set -eu
cd "$(dirname "$0")/.."

plan_only=0
want=""
add() { for c in "$@"; do case " $want " in *" $c "*) ;; *) want="$want $c" ;; esac; done; }
for arg in "$@"; do
  case "$arg" in
    --plan) plan_only=1 ;;
    serve | demo) add serve ;;
    agents | full) add serve "$arg" ;;
    test) add serve agents full extras vm ;;
    bench) add serve extras ;;
    *)
      echo "setup: \"$arg\" is not a setup command; name any of serve, demo, bench, agents, full, test (or --plan to print the plan only)" >&2
      exit 2
      ;;
  esac
done
[ -n "$want" ] || want=" serve agents full"
wants() { case " $want " in *" $1 "*) return 0 ;; esac; return 1; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# Any Docker engine the host has, by package or on PATH: the test suite uses it as it is. docker.io would replace
# docker-ce (the package most GPU hosts run, with the NVIDIA container toolkit's runtime configured) or moby-engine.
docker_engine() {
  for p in docker-ce moby-engine podman-docker docker.io; do
    if installed "$p"; then
      echo "$p"
      return 0
    fi
  done
  # A docker client alone (a static binary, docker-ce-cli) is no engine: a dockerd is, or a client that reaches one.
  if command -v dockerd >/dev/null 2>&1; then
    command -v dockerd
  elif command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; then
    command -v docker
  fi
  return 0
}

# bubblewrap: the sandbox; python3-torch, python3-numpy, libopenblas0-pthread: the micro tasks' jobs run the system's
# Python. python3-venv: the full tier's virtual environment (.venv-full, below).
debs="bubblewrap python3-torch python3-numpy libopenblas0-pthread"
wants full && debs="$debs python3-venv"
# A GPU host (nvidia-smi lists a GPU; A2RL_FULL_GPU=1 or 0 overrides the guess) gets the full tier's GPU runtime on the
# CUDA route its driver runs (scripts/gpu-route.sh: decided before anything is installed or downloaded), and what
# Triton and DeepSpeed need at run time: they build small kernels with the system compiler against Python's headers.
full_gpu=0
pins=tasks/hflm/requirements.txt
route_why="CPU torch"
if wants full; then
  full_gpu=${A2RL_FULL_GPU:-$(nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)}
  if [ "$full_gpu" = 1 ]; then
    route=$(sh scripts/gpu-route.sh) || {
      echo "setup: no GPU route for this host (the reason is above); nothing was installed" >&2
      exit 1
    }
    pins=$(printf '%s\n' "$route" | cut -f2)
    route_why="route $(printf '%s\n' "$route" | cut -f1): $(printf '%s\n' "$route" | cut -f3)"
    debs="$debs gcc libc6-dev python3-dev"
  fi
fi
# The test suite's (and the benchmarks') extras. chromium: the HTML report is checked in headless Chromium
# (test/report.test.ts).
# debootstrap and a Docker engine: the Docker backend and its micro image, built without a registry.
# slurmctld slurmd slurm-client munge: the Slurm backend's tests start a two-node cluster on this host
# (test/helpers/slurm.ts; about 8 s to install). No service is started here.
engine=""
if wants extras; then
  debs="$debs chromium debootstrap slurmctld slurmd slurm-client munge"
  engine=$(docker_engine)
  [ -n "$engine" ] || debs="$debs docker.io"
fi
# The test suite's pure cgroup v2 host: ../shared/hosts/vm-run.sh boots a QEMU VM (no KVM) of this root with a Debian
# kernel (test/cgroup-v2.test.ts, which skips, saying so, where these are absent).
wants vm && debs="$debs qemu-system-x86 linux-image-amd64 busybox-static cpio"
missing=""
for p in $debs; do
  installed "$p" || missing="$missing $p"
done

# Every job moves into cgroups of its own; after a quiet spell the kernel first makes that move wait for an RCU
# grace period (4-14 ms p50 a job start on a 2-core host, sandbox/cgroup.ts). The cgroup2 option favordynmods (Linux
# 6.0 and later) spares it, host-wide until reboot, at a small cost to every fork and exit. As root setup turns it on,
# on cgroup v1 and v2 hosts alike (a v2 job's move pays the same wait); `a2rl doctor` says when it is off. A remount
# sets every cgroup2 option at once: the current ones are passed again.
favordynmods_wanted() {
  [ "$(id -u)" = 0 ] || return 1
  grep -q ' - cgroup2* [^ ]* [^ ]*favordynmods' /proc/self/mountinfo && return 1
  [ -n "$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)" ]
}
favor_cgroup_moves() {
  unified=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
  options=$(awk '/ - cgroup2 / { print $NF; exit }' /proc/self/mountinfo)
  if mount -o "remount,$options,favordynmods" "$unified" 2>/dev/null &&
    grep -q ' - cgroup2 [^ ]* [^ ]*favordynmods' /proc/self/mountinfo; then
    echo "remounted the cgroup2 hierarchy at $unified with favordynmods (host-wide until reboot), so job starts do not wait for the kernel" >>"$changes"
  else
    echo "setup: could not turn on favordynmods at $unified (older kernel, or cgroups this host does not let us remount):" \
      "job starts may wait 4-14 ms; boot with cgroup_favordynmods=true (Linux 6.7 or later) to spare it" >&2
  fi
}

npm_stamp=node_modules/.a2rl-lock.sha256
npm_want=$(sha256sum package-lock.json | cut -d' ' -f1)
npm_current() { [ -f "$npm_stamp" ] && [ "$(cat "$npm_stamp")" = "$npm_want" ]; }
# A2RL_WHEELS=DIR: the wheels `a2rl prepare --bundle` wrote on a machine with an index; pip reads no index at all then.
wheel_dir=""
pip_from="the index pip is configured with"
if [ -n "${A2RL_WHEELS:-}" ] && wants full; then
  [ -d "$A2RL_WHEELS" ] || {
    echo "setup: A2RL_WHEELS=$A2RL_WHEELS is no folder; give the wheels folder of a bundle (a2rl prepare --bundle DIR writes DIR/wheels)" >&2
    exit 1
  }
  wheel_dir=$A2RL_WHEELS
  pip_from="$A2RL_WHEELS only (no index)"
fi
venv=.venv-full
venv_stamp=$venv/.a2rl-requirements.sha256
venv_want=$(sha256sum "$pins" | cut -d' ' -f1)
venv_current() { [ -f "$venv_stamp" ] && [ "$(cat "$venv_stamp")" = "$venv_want" ]; }

# The plan, on stdout with --plan (it is what was asked for), else on stderr before anything changes.
print_plan() {
  echo "setup: plan for:$want"
  if [ -n "$missing" ]; then echo "  install Debian packages:$missing"; else echo "  Debian packages: all installed ($(echo $debs | wc -w))"; fi
  if wants extras; then
    if [ -n "$engine" ]; then echo "  Docker engine: $engine, kept (docker.io is not installed over it)"; else echo "  Docker engine: none found, docker.io to install"; fi
  fi
  if favordynmods_wanted; then echo "  remount the cgroup2 hierarchy with favordynmods (host-wide until reboot)"; fi
  if npm_current; then echo "  npm dependencies: up to date"; else echo "  install npm dependencies (npm ci: package-lock.json changed)"; fi
  echo "  TypeScript build (dist/)"
  if wants agents; then echo "  agent CLIs in .agents/: $(agent_clis_state)"; fi
  if wants full; then
    if venv_current; then echo "  $venv: up to date with $pins ($route_why)"; else echo "  build $venv from $pins ($route_why), wheels from $pip_from"; fi
  fi
}

# npm ci only when the lockfile changed since the last install; then the TypeScript build.
npm_dependencies() {
  if ! npm_current; then
    echo "setup: installing npm dependencies" >&2
    npm ci --no-audit --no-fund >&2
    echo "$npm_want" >"$npm_stamp"
    echo "installed npm dependencies (node_modules/)" >>"$changes"
  fi
  npm run --silent build >&2
}

# The agent CLIs the real-agent tests drive (test/agents.test.ts), at the versions tested,
# outside the project's dependencies; an operator's own install on PATH wins over these.
agent_clis() {
  agents="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0 opencode-ai@1.18.33 @qwen-code/qwen-code@0.24.4"
  agents_stamp=.agents/.a2rl-agents
  if [ "${1:-}" = state ]; then
    if [ -f "$agents_stamp" ] && [ "$(cat "$agents_stamp")" = "$agents" ]; then echo "up to date"; else echo "to install: $agents"; fi
    return 0
  fi
  if [ ! -f "$agents_stamp" ] || [ "$(cat "$agents_stamp")" != "$agents" ]; then
    echo "setup: installing agent CLIs into .agents/: $agents" >&2
    npm install --prefix .agents --no-audit --no-fund $agents >&2
    echo "$agents" > "$agents_stamp"
    echo "installed agent CLIs into .agents/: $agents" >>"$changes"
  fi
}
agent_clis_state() { agent_clis state; }

# The full tier's Python runtime in .venv-full, built with the system Python the sandbox runs; every sandbox backend
# mounts it read-only. From tasks/hflm/requirements.txt (CPU torch, exact pins), or on a GPU host from the lock file of
# its CUDA route (requirements-gpu*.txt: CUDA torch and vLLM, the same Hugging Face pins) into a fresh environment,
# never over the CPU one: its torch 2.13.0+cpu would satisfy vLLM's torch pin and be kept. A GPU build whose torch is
# still a CPU one fails here, saying so. Rebuilt only when the pins change: the stamp, written last, holds their hash,
# so an interrupted build is redone. PIP_RETRIES=0: an index that cannot be reached fails at once instead of being
# retried for minutes. About 30 s from a local index (CPU).
full_venv() {
  if ! venv_current; then
    echo "setup: building $venv from $pins" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    # The function's own arguments: where pip takes the wheels from, kept whole whatever the folder's name.
    if [ -n "$wheel_dir" ]; then set -- --no-index --find-links "$wheel_dir"; else set --; fi
    PIP_RETRIES=0 "$venv/bin/pip" install --quiet --no-input "$@" -r "$pins" >&2
    if [ "$full_gpu" = 1 ] && ! "$venv/bin/python" -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
      echo "setup: $venv has a CPU build of torch although $pins asks for CUDA's: the index pip reads serves only" \
        "CPU wheels; point pip at one with CUDA wheels (PIP_INDEX_URL) and run scripts/setup.sh again" >&2
      exit 1
    fi
    echo "$venv_want" >"$venv_stamp"
    echo "built $venv from $pins ($route_why)" >>"$changes"
  fi
  portable_console_scripts
}

# pip writes the venv's absolute host path into its console scripts' shebangs (accelerate, torchrun, ...), which no
# sandbox has: the sandboxes mount .venv-full at /opt/a2rl/venv. Each becomes pip's own relocatable form, which runs
# the python beside the script wherever the folder is mounted (as uv's --relocatable does). Checked on every run, so a
# venv built before this, or moved, is fixed too.
portable_console_scripts() {
  fixed=0
  for script in "$venv"/bin/*; do
    [ -f "$script" ] && [ ! -L "$script" ] || continue
    head -n 1 "$script" | grep -q '^#!/.*/bin/python[0-9.]*$' || continue
    {
      echo '#!/bin/sh'
      # shellcheck disable=SC2016 # for the script's own shell, not this one
      echo "'''exec' \"\$(dirname -- \"\$(realpath -- \"\$0\")\")\"/python \"\$0\" \"\$@\""
      echo "' '''"
      tail -n +2 "$script"
    } >"$script.a2rl-tmp"
    chmod 755 "$script.a2rl-tmp"
    mv "$script.a2rl-tmp" "$script"
    fixed=$((fixed + 1))
  done
  [ "$fixed" = 0 ] || echo "made $fixed console scripts in $venv/bin portable (they run the python beside them)" >>"$changes"
}

if [ "$plan_only" = 1 ]; then
  print_plan
  exit 0
fi
print_plan >&2
changes=$(mktemp)
trap 'rm -f "$changes"' EXIT

# Progress: a line as each step starts and as it ends, numbered of the steps this setup takes, with the time since it
# began (the installs run side by side, so their lines interleave).
setup_began=$(date +%s)
steps=1
[ -z "$missing" ] || steps=$((steps + 1))
! favordynmods_wanted || steps=$((steps + 1))
! wants agents || steps=$((steps + 1))
! wants full || steps=$((steps + 1))
step=0
progress() { echo "setup: [$1/$steps] $2 ($(($(date +%s) - setup_began))s so far)" >&2; }

if [ -n "$missing" ]; then
  step=$((step + 1))
  progress $step "Debian packages:$missing"
  echo "setup: installing Debian packages:$missing" >&2
  as_root=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || {
      echo "setup: installing$missing needs root and sudo is not installed; run as root, or install them, then run scripts/setup.sh again" >&2
      exit 1
    }
    # Without a terminal nobody can answer a password prompt: sudo fails at once instead of waiting for one.
    as_root="sudo"
    [ -t 0 ] || as_root="sudo -n"
  fi
  $as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $missing >&2
  echo "installed Debian packages:$missing" >>"$changes"
  progress $step "Debian packages: done"
fi
if favordynmods_wanted; then
  step=$((step + 1))
  progress $step "cgroup2 favordynmods"
  favor_cgroup_moves
fi

# The installs below run side by side, each in a subshell of its own: they mostly wait on downloads and unpacking
# (one after another they took 165 s on a 2-core machine with warm caches).
step=$((step + 1))
progress $step "npm dependencies and the TypeScript build"
(set -e; npm_dependencies; progress $step "npm dependencies and the TypeScript build: done") &
npm_pid=$!
agents_pid=""
if wants agents; then
  step=$((step + 1))
  progress $step "agent CLIs in .agents/"
  (set -e; agent_clis; progress $step "agent CLIs in .agents/: done") &
  agents_pid=$!
fi
venv_pid=""
if wants full; then
  step=$((step + 1))
  progress $step "$venv"
  (set -e; full_venv; progress $step "$venv: done") &
  venv_pid=$!
fi
failed=""
wait "$npm_pid" || failed="$failed npm-dependencies"
[ -z "$agents_pid" ] || wait "$agents_pid" || failed="$failed agent-CLIs"
[ -z "$venv_pid" ] || wait "$venv_pid" || failed="$failed .venv-full"
if [ -s "$changes" ]; then
  sed 's/^/setup: changed: /' "$changes" >&2
else
  echo "setup: changed nothing on this host (everything was in place)" >&2
fi
if [ -n "$failed" ]; then
  echo "setup: failed:$failed (its error is above); fix it and run scripts/setup.sh again" >&2
  exit 1
fi
