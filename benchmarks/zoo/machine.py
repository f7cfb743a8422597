"""Stage "environment": what machine and software a result was measured on.

Input: nothing (reads /proc, torch, and the packages installed). Output: a JSON-ready dict
written into every result row and shown at the top of each report section.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Optional

REPOSITORY = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def describe(device: str = "cpu") -> dict:
    """CPU model and cores, memory, GPU name, Python, torch, triton, torchvision,
    transformers and the framejit commit."""
    import torch
    info = {
        "host": platform.node(),
        "cpu": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "torchvision": _version("torchvision"),
        "transformers": _version("transformers"),
        "framejit_commit": _commit(),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> Optional[float]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(package: str) -> Optional[str]:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _commit() -> Optional[str]:
    if os.environ.get("ZOO_COMMIT"):  # a copy without .git (the GPU machine) names it here
        return os.environ["ZOO_COMMIT"]
    try:
        result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPOSITORY,
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None
