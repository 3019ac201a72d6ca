"""The GPU tests: every method trained a few steps on the bundled demo model through the engine's own CLI, then
Chat, Evaluate and a merged export of a trained run, all on a CUDA GPU (benchmarks/gpu_check.sh runs them).

Without a CUDA GPU they are skipped at collection, without importing torch when the machine has no NVIDIA driver at
all. ``GPU_TESTS_ON_CPU=1`` runs the same tests on the CPU instead: a dry run of the check's code where no GPU is
at hand (a few minutes on 2 cores).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ON_CPU = "GPU_TESTS_ON_CPU"
# Present wherever an NVIDIA driver is: without any of them there is no CUDA device to ask torch about.
NVIDIA_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia")


@functools.cache
def gpu_device() -> str | None:
    """The device the GPU tests run on: cuda, cpu for a dry run (GPU_TESTS_ON_CPU=1), or None (skip them)."""
    if os.environ.get(ON_CPU) == "1":
        return "cpu"
    if not any(Path(node).exists() for node in NVIDIA_NODES):
        return None
    import torch

    return "cuda" if torch.cuda.is_available() else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: trains on a CUDA GPU (tests/gpu; GPU_TESTS_ON_CPU=1: on the CPU)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of this folder ``gpu``, and skip them where there is no device to run them on."""
    mine = [item for item in items if HERE in Path(item.path).parents]
    for item in mine:
        item.add_marker(pytest.mark.gpu)
    if mine and gpu_device() is None:
        skip = pytest.mark.skip(reason=f"no CUDA GPU ({ON_CPU}=1 runs these tests on the CPU)")
        for item in mine:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> str:
    """cuda (or cpu in a dry run): where every run of these tests trains, set as its launch.device."""
    found = gpu_device()
    assert found is not None  # the tests are skipped at collection otherwise
    return found
