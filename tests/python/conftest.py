"""Shared fixtures of the Python tests: optional torch, and a marker for tests that need CUDA."""

import pathlib
import sys

import pytest

# examples/python/model.py, the PyTorch stand-in model, is shared by the examples and the tests.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"))

try:
    import torch
except ImportError:  # the NumPy tests still run
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
requires_cuda = pytest.mark.skipif(
    torch is None or not torch.cuda.is_available(), reason="no CUDA device")
