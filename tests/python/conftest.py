"""Shared fixtures of the Python tests: optional torch, and a marker for tests that need CUDA."""

import pytest

try:
    import torch
except ImportError:  # the NumPy tests still run
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
requires_cuda = pytest.mark.skipif(
    torch is None or not torch.cuda.is_available(), reason="no CUDA device")
