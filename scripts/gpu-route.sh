#!/bin/sh
# The full tier's GPU route for this host: which CUDA build of torch and vLLM its NVIDIA driver runs, and the lock file
# (tasks/hflm/requirements-gpu*.txt) that pins it. Reads `nvidia-smi`'s header ("Driver Version: 570.86.15  CUDA
# Version: 12.8": the newest CUDA the driver runs), or that output from a file (--nvidia-smi FILE, for tests and for
# hosts where it was saved). A2RL_GPU_ROUTE=cu126|cu128|cu130 names the route instead (a host without nvidia-smi that
# builds for one that has it).
#
# Prints one line, "ROUTE<TAB>LOCK FILE<TAB>why", and exits 0; where no route fits, says why on stderr and exits 1, so
# scripts/setup.sh stops before it downloads anything.
#
# The rule: the newest route whose CUDA the driver runs (12.6, 12.8, 13.0). A 12.x driver older than 12.6 (branches 535,
# 550) gets the 12.6 route under CUDA's minor version compatibility (any CUDA 12.x runtime on a driver >= 525.60.13;
# what it lacks is JIT compilation of PTX built for a newer CUDA, which PyTorch's and vLLM's prebuilt kernels do not
# need: they ship machine code for every architecture they support). An older driver (CUDA 11) gets none.
set -eu
cd "$(dirname "$0")/.."

routes="cu130:13.0:tasks/hflm/requirements-gpu.txt cu128:12.8:tasks/hflm/requirements-gpu-cu128.txt cu126:12.6:tasks/hflm/requirements-gpu-cu126.txt"
compat_min_driver=525.60.13

lock_of() {
  for r in $routes; do
    [ "${r%%:*}" = "$1" ] && { echo "${r##*:}"; return 0; }
  done
  return 1
}

if [ -n "${A2RL_GPU_ROUTE:-}" ]; then
  if lock=$(lock_of "$A2RL_GPU_ROUTE"); then
    printf '%s\t%s\t%s\n' "$A2RL_GPU_ROUTE" "$lock" "named by A2RL_GPU_ROUTE"
    exit 0
  fi
  echo "gpu-route: A2RL_GPU_ROUTE=$A2RL_GPU_ROUTE is no route; name cu126, cu128 or cu130 (or unset it to choose by nvidia-smi)" >&2
  exit 1
fi

if [ "${1:-}" = --nvidia-smi ]; then
  [ -r "${2:-}" ] || { echo "gpu-route: --nvidia-smi needs a readable file of nvidia-smi's output (got \"${2:-}\")" >&2; exit 1; }
  header=$(cat "$2")
elif ! header=$(nvidia-smi 2>&1); then
  echo "gpu-route: no route: nvidia-smi failed or is not installed (${header:-no output}); install the NVIDIA driver, or name a route with A2RL_GPU_ROUTE=cu126|cu128|cu130" >&2
  exit 1
fi

driver=$(printf '%s\n' "$header" | sed -n 's/.*Driver Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
cuda=$(printf '%s\n' "$header" | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
if [ -z "$driver" ] || [ -z "$cuda" ]; then
  echo "gpu-route: no route: nvidia-smi's output names no driver and CUDA version (\"Driver Version: ... CUDA Version: ...\"); check the driver with nvidia-smi, or name a route with A2RL_GPU_ROUTE" >&2
  exit 1
fi

# Versions compare field by field as numbers: 12.10 is newer than 12.8.
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -t. -k1,1n -k2,2n -k3,3n | head -n 1)" = "$2" ]; }

for r in $routes; do
  name=${r%%:*}
  rest=${r#*:}
  need=${rest%%:*}
  if at_least "$cuda" "$need"; then
    printf '%s\t%s\t%s\n' "$name" "${rest#*:}" "driver $driver runs CUDA up to $cuda"
    exit 0
  fi
done
if [ "${cuda%%.*}" = 12 ] && at_least "$driver" "$compat_min_driver"; then
  printf '%s\t%s\t%s\n' cu126 "$(lock_of cu126)" \
    "driver $driver runs CUDA up to $cuda: CUDA 12.6 under minor version compatibility (driver >= $compat_min_driver)"
  exit 0
fi
echo "gpu-route: no route: driver $driver runs CUDA up to $cuda, and the oldest route is CUDA 12.6 (driver >= $compat_min_driver, branch 535 or newer); update the NVIDIA driver (580 or newer runs every route)" >&2
exit 1
