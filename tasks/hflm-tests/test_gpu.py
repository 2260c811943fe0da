"""hflm.gpu and the backend choice: GPUs found without a CUDA context, refused with the reason, never a silent CPU.

    .venv-full/bin/python tasks/hflm-tests/test_gpu.py

This machine has no GPU and a CPU build of torch: what a GPU host does is covered by stand-ins for the GPU's
answers (hflm.gpu.unusable_reason, hflm.gpu.capabilities) and for vLLM; bench/gpu-check.sh runs the real thing.
"""

import contextlib
import importlib.abc
import io
import os
import subprocess
import sys
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.dirname(HERE)
sys.path.insert(0, TASKS)  # for hflm

from hflm import gpu  # noqa: E402
from hflm.inference import default_backend  # noqa: E402


def python(code, **env):
    """Runs code in a fresh .venv-full Python with hflm importable and the given variables (None removes one)."""
    environment = {**os.environ, "PYTHONPATH": TASKS}
    for key, value in env.items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return subprocess.run([sys.executable, *code], capture_output=True, text=True, env=environment)


class BrokenVllm(importlib.abc.MetaPathFinder):
    """Makes `import vllm` fail as a vLLM built for another CUDA does: an OSError from a missing library."""

    def find_spec(self, name, path, target=None):
        if name == "vllm":
            raise OSError("libcudart.so.13: cannot open shared object file: No such file or directory")
        return None


class ForkSafeProbing(unittest.TestCase):
    def test_importing_hflm_sets_the_nvml_based_check_before_torch_loads(self):
        child = python(["-c", "import hflm, os, sys; print(os.environ['PYTORCH_NVML_BASED_CUDA_CHECK'], 'torch' in sys.modules)"],
                       PYTORCH_NVML_BASED_CUDA_CHECK=None)
        self.assertEqual(child.stdout.split(), ["1", "False"], child.stderr)

    def test_choosing_a_backend_makes_no_cuda_context(self):
        import torch

        self.assertEqual(default_backend(), "transformers")
        self.assertFalse(torch.cuda.is_initialized())


class Dtype(unittest.TestCase):
    def test_bfloat16_only_where_every_gpu_has_compute_capability_8_or_more(self):
        self.assertEqual(gpu.dtype_for([(8, 0)]), "bfloat16")
        self.assertEqual(gpu.dtype_for([(9, 0), (12, 0)]), "bfloat16")
        self.assertEqual(gpu.dtype_for([(7, 5)]), "float16")  # Turing: T4
        self.assertEqual(gpu.dtype_for([(9, 0), (7, 0)]), "float16")  # one V100 among them
        with self.assertRaisesRegex(ValueError, "at least one"):
            gpu.dtype_for([])

    def test_capabilities_on_a_host_without_a_gpu_are_none(self):
        self.assertEqual(gpu.capabilities(), [])


@unittest.skipUnless(__import__("torch").version.cuda is None, "a CUDA build of torch: these check a CPU-only runtime")
class NoSilentCpuFallback(unittest.TestCase):
    def test_this_hosts_reason_names_the_cpu_build_and_the_fix(self):
        self.assertRegex(gpu.unusable_reason(), r"torch .*\+cpu is a CPU build; build the GPU runtime .*A2RL_FULL_GPU=1 sh scripts/setup.sh")

    def test_gpus_requested_and_unusable_fail_with_the_reason(self):
        with mock.patch.dict(os.environ, {"A2RL_REQUIRE_GPU": "1"}):
            with self.assertRaisesRegex(gpu.GpuUnavailable, r"given GPUs but cannot use them, and will not fall back to CPU: .*CPU build"):
                default_backend()
        with mock.patch.dict(os.environ, {"A2RL_REQUIRE_GPU": "0"}):
            self.assertEqual(default_backend(), "transformers")

    def test_a_usable_gpu_without_vllm_decodes_with_transformers(self):
        with mock.patch("hflm.gpu.unusable_reason", return_value=None):
            self.assertEqual(default_backend(), "transformers")  # vLLM is not installed here

    def test_a_vllm_that_does_not_load_is_named_not_passed_over(self):
        finder = BrokenVllm()
        sys.meta_path.insert(0, finder)
        try:
            with mock.patch("hflm.gpu.unusable_reason", return_value=None):
                with self.assertRaisesRegex(gpu.GpuUnavailable, r"vLLM is installed but does not load \(OSError: libcudart.so.13.*A2RL_FULL_GPU=1"):
                    default_backend()
        finally:
            sys.meta_path.remove(finder)

    def test_the_probe_stops_at_the_first_failed_check_with_the_reason(self):
        out = io.StringIO()  # python -m hflm.gpu's stdout; its exit status is what probe returns
        self.assertEqual(gpu.probe(out), 1)
        lines = out.getvalue().splitlines()
        self.assertRegex(lines[0], r"^ok torch .* \(CUDA none: a CPU build\)$")
        self.assertRegex(lines[1], r"^FAILED GPU: this runtime's torch .* is a CPU build; build the GPU runtime")
        self.assertEqual(len(lines), 2)


class GradingFailsWithTheReason(unittest.TestCase):
    """hflm.grading.per_split ends a grading that cannot decode on its GPU with the reason as its log's last line,
    which the server shows in get_score (a failed baseline's too). Run in this process: the grading's exit status is
    the SystemExit it raises, its log what it writes to stderr."""

    def grade(self, failure):
        """(exit status, stderr) of a grading whose decoding raises failure."""
        from hflm import grading

        def complete(rows):
            raise failure

        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), self.assertRaises(SystemExit) as ended:
            grading.per_split({"public": [1], "private": [2]}, complete)
        return ended.exception.code, stderr.getvalue()

    def test_a_gpu_it_cannot_use(self):
        status, stderr = self.grade(gpu.GpuUnavailable("this job was given GPUs but cannot use them: no device nodes"))
        self.assertEqual(status, 3, stderr)
        self.assertEqual(stderr.strip().splitlines()[-1],
                         "grading failed: GPU unavailable: this job was given GPUs but cannot use them: no device nodes")

    def test_out_of_gpu_memory(self):
        import torch

        status, stderr = self.grade(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        self.assertEqual(status, 3, stderr)
        self.assertRegex(stderr.strip().splitlines()[-1],
                         r"^grading failed: out of GPU memory while decoding \(CUDA out of memory\. Tried to allocate 2\.00 GiB\); grade on a GPU with more memory")

    def test_any_other_error_is_raised_as_it_is(self):
        with self.assertRaisesRegex(ValueError, "^a bug$"):
            self.grade(ValueError("a bug"))


if __name__ == "__main__":
    unittest.main()
