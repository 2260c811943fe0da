"""The GPUs a full-tier process was given: found without breaking vLLM's engine processes, refused with the reason.

    from hflm import gpu
    gpu.unusable_reason()     # None when CUDA can be used here, else why not (a CPU build of torch, no device nodes, ...)
    gpu.requested()           # A2RL_REQUIRE_GPU=1: the server gave this process GPUs, so CPU is not an option
    gpu.capabilities()        # [(major, minor)] of the visible GPUs, read in a child process
    gpu.dtype_for(caps)       # "bfloat16" on compute capability 8.0 and above, else "float16"

    python -m hflm.gpu        # the probe `bench/gpu-check.sh` and `a2rl doctor` run in a sandbox that holds a GPU

Why so careful: a process that has initialised CUDA cannot fork vLLM's engine workers ("Cannot re-initialize CUDA
in forked subprocess"), and torch.cuda.is_available() initialises it unless PYTORCH_NVML_BASED_CUDA_CHECK=1, which
hflm sets when it is imported (hflm/__init__.py). So this module counts GPUs through NVML only, and anything that
needs a CUDA context (compute capabilities) runs in a child process.
"""

import json
import os
import subprocess
import sys

# The device nodes a CUDA process opens: the control node and one per GPU (the sandbox binds those of its GPUs only).
CONTROL_NODE = "/dev/nvidiactl"
GPU_RUNTIME_FIX = "build the GPU runtime on this host: A2RL_FULL_GPU=1 sh scripts/setup.sh"


class GpuUnavailable(RuntimeError):
    """GPUs were requested (or vLLM is installed) and cannot be used; the message says why and what to do."""


def requested():
    """Whether the server gave this process GPUs (A2RL_REQUIRE_GPU=1): then CPU is no fallback, the job fails."""
    return os.environ.get("A2RL_REQUIRE_GPU") == "1"


def unusable_reason():
    """None when torch can use a GPU here; otherwise the first reason it cannot, with the fix. Makes no CUDA context."""
    import torch

    if torch.version.cuda is None:
        return f"this runtime's torch {torch.__version__} is a CPU build; {GPU_RUNTIME_FIX}"
    if not os.path.exists(CONTROL_NODE):
        return (f"no NVIDIA device nodes here ({CONTROL_NODE} is missing): the job holds no GPU; ask for one "
                "(run_training gpus: N, a server started with --gpus) and check the NVIDIA driver with nvidia-smi")
    count = torch.cuda.device_count()  # NVML's count (PYTORCH_NVML_BASED_CUDA_CHECK=1): no CUDA context
    if count == 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return (f"CUDA sees no GPU (CUDA_VISIBLE_DEVICES={visible!r}, torch built for CUDA {torch.version.cuda}): "
                "check nvidia-smi, and that the driver is at least what that CUDA needs (docs/operating.md, GPUs)")
    return None


def capabilities():
    """The visible GPUs' compute capabilities, [(major, minor), ...], read by a child process so that this one makes
    no CUDA context. Raises GpuUnavailable with the child's error when it cannot read them."""
    probe = ("import json, torch; "
             "print(json.dumps([torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())]))")
    child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if child.returncode != 0:
        why = (child.stderr.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
        raise GpuUnavailable(f"CUDA could not be initialised: {why}")
    return [tuple(c) for c in json.loads(child.stdout)]


def dtype_for(caps):
    """bfloat16, as the reference loads every model, where every GPU has it (compute capability 8.0, Ampere, and up);
    float16 on older GPUs, which have no bfloat16 kernels."""
    if not caps:
        raise ValueError("no GPU capabilities given: dtype_for needs at least one (major, minor)")
    return "bfloat16" if min(caps) >= (8, 0) else "float16"


def load_vllm():
    """The vllm module; None when it is not installed. A vLLM that is installed but does not load (built for another
    CUDA or torch: OSError, RuntimeError, an ImportError of its own) raises GpuUnavailable saying so: never a quiet
    fallback to a slower backend."""
    try:
        import vllm
    except ModuleNotFoundError as e:
        if e.name == "vllm":
            return None
        raise GpuUnavailable(f"vLLM is installed but does not import ({e}); {GPU_RUNTIME_FIX}") from e
    except (ImportError, OSError, RuntimeError) as e:
        raise GpuUnavailable(f"vLLM is installed but does not load ({type(e).__name__}: {e}); {GPU_RUNTIME_FIX}") from e
    return vllm


def probe(out=sys.stdout):
    """One line per check, "ok ..." or "FAILED ... : fix"; stops at the first failure. Returns the exit status."""
    def say(line):
        print(line, file=out, flush=True)

    import torch

    say(f"ok torch {torch.__version__} (CUDA {torch.version.cuda or 'none: a CPU build'})")
    reason = unusable_reason()
    if reason:
        say(f"FAILED GPU: {reason}")
        return 1
    nodes = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    say(f"ok device nodes: {', '.join('/dev/' + n for n in nodes)}")
    say(f"ok NVML: {torch.cuda.device_count()} visible GPU(s)")
    try:
        caps = capabilities()
    except GpuUnavailable as e:
        say(f"FAILED CUDA: {e}")
        return 1
    # This process may use CUDA now: nothing is forked after this point.
    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    total = float(x.sum().item())
    say(f"ok CUDA: {torch.cuda.get_device_name(0)}, compute capability {caps[0][0]}.{caps[0][1]}, "
        f"dtype {dtype_for(caps)}, a kernel ran ({total:.0f})")
    try:
        vllm = load_vllm()
    except GpuUnavailable as e:
        say(f"FAILED vLLM: {e}")
        return 1
    if vllm is None:
        say("ok vLLM: not installed (grading decodes with transformers on CUDA)")
        return 0
    say(f"ok vLLM {vllm.__version__} imports")
    return 0


if __name__ == "__main__":
    sys.exit(probe())
