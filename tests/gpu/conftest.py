"""Every test under tests/gpu needs a CUDA device: without one they are skipped, not failed."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _device_visible() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no cupy, driver or device: all mean "skip"
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device visible to CuPy")


@pytest.fixture(autouse=True)
def _needs_gpu() -> None:
    if not _device_visible():
        pytest.skip("no CUDA device visible to CuPy")
