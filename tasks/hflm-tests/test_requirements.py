"""The runtime pins: the GPU environment resolves to a CUDA torch, never a +cpu one, and keeps the CPU file's pins.

    .venv-full/bin/python tasks/hflm-tests/test_requirements.py

No index here has vLLM or CUDA wheels, so pip's own resolver is run on the GPU file's torch and vLLM lines against a
folder of stand-in wheels carrying their names, versions and vLLM's torch requirement: what pip decides from them is
what it decides from the real index's metadata.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

from packaging.requirements import Requirement

HERE = os.path.dirname(os.path.abspath(__file__))
HFLM = os.path.join(os.path.dirname(HERE), "hflm")
CPU_FILE = os.path.join(HFLM, "requirements.txt")
GPU_FILE = os.path.join(HFLM, "requirements-gpu.txt")


def requirements(path):
    """{name: Requirement} of a requirements file's requirement lines (options and comments skipped)."""
    with open(path, encoding="utf-8") as f:
        lines = [line.split("#")[0].strip() for line in f]
    return {r.name.lower(): r for r in (Requirement(line) for line in lines if line and not line.startswith("-"))}


def write_wheel(folder, name, version, requires=()):
    """A wheel pip can resolve: its metadata only."""
    dist = f"{name}-{version}.dist-info"
    path = os.path.join(folder, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as wheel:
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
        wheel.writestr(f"{dist}/METADATA", metadata)
        wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{dist}/RECORD", "")


def resolve(lines, index, over_this_environment=False):
    """What pip would install for these requirement lines from the index folder alone: {name: version}; into a fresh
    environment, or over_this_environment (this .venv-full: what is installed and satisfies a line is kept)."""
    with tempfile.TemporaryDirectory() as scratch:
        request = os.path.join(scratch, "requirements.txt")
        with open(request, "w") as f:
            f.write("\n".join(lines) + "\n")
        report = os.path.join(scratch, "report.json")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-index", "--find-links", index,
             *([] if over_this_environment else ["--ignore-installed"]), "--report", report, "-r", request],
            check=True, capture_output=True, text=True, env={**os.environ, "PIP_RETRIES": "0"},
        )
        with open(report) as f:
            return {item["metadata"]["name"]: item["metadata"]["version"] for item in json.load(f)["install"]}


class GpuPins(unittest.TestCase):
    def test_one_exact_vllm_release_and_a_torch_pin_no_cpu_build_satisfies(self):
        gpu = requirements(GPU_FILE)
        vllm_pin = [str(s) for s in gpu["vllm"].specifier]
        self.assertEqual(len(vllm_pin), 1)
        self.assertRegex(vllm_pin[0], r"^==\d+\.\d+\.\d+$")
        torch = gpu["torch"].specifier
        self.assertTrue(torch.contains("2.13.0"))
        for cpu_build in ("2.13.0+cpu", "2.13.0+cpu.cxx11.abi"):
            self.assertFalse(torch.contains(cpu_build), f"{cpu_build} satisfies the GPU file's torch pin {torch}")
        with open(GPU_FILE) as f:
            self.assertFalse(any(line.startswith("-r") for line in f), "the GPU file must stand alone, not include the CPU one")

    def test_pip_resolving_the_gpu_pins_takes_the_cuda_torch_never_a_cpu_build(self):
        with open(GPU_FILE) as f:
            lines = [line.strip() for line in f if line.startswith(("torch", "vllm"))]
        gpu = requirements(GPU_FILE)
        vllm_version = str(next(iter(gpu["vllm"].specifier))).lstrip("=")
        with tempfile.TemporaryDirectory() as index:
            # The index a host's pip reads may hold both builds; vLLM asks for its torch as vLLM's wheels do.
            write_wheel(index, "torch", "2.13.0+cpu")
            write_wheel(index, "vllm", vllm_version, ["torch==2.13.0"])
            with self.assertRaises(subprocess.CalledProcessError) as refused:
                resolve(lines, index)
            self.assertIn("Cannot install torch===2.13.0", refused.exception.stderr)
            write_wheel(index, "torch", "2.13.0")
            self.assertEqual(resolve(lines, index), {"torch": "2.13.0", "vllm": vllm_version})
            import torch

            if torch.__version__ == "2.13.0+cpu":
                # Over this CPU environment, as setup once layered vLLM: its torch==2.13.0 is met by the +cpu build,
                # which pip keeps; the GPU file's pin replaces it.
                self.assertNotIn("torch", resolve([f"vllm=={vllm_version}"], index, over_this_environment=True))
                self.assertEqual(resolve(lines, index, over_this_environment=True)["torch"], "2.13.0")

    def test_the_gpu_file_keeps_every_other_pin_of_the_cpu_file(self):
        cpu, gpu = requirements(CPU_FILE), requirements(GPU_FILE)
        self.assertEqual(str(cpu["torch"].specifier), "==2.13.0+cpu")
        self.assertEqual(gpu["torch"].specifier.__str__().lstrip("="), "2.13.0", "the GPU torch is the CPU file's release")
        for name, requirement in cpu.items():
            if name != "torch":
                self.assertIn(name, gpu, f"{name} is pinned in requirements.txt but not in requirements-gpu.txt")
                self.assertEqual(str(gpu[name]), str(requirement))
        self.assertEqual(set(gpu) - set(cpu), {"vllm"})


if __name__ == "__main__":
    unittest.main()
