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


def run_example_here(name, *arguments, monkeypatch, capsys):
    """Runs examples/python/<name> with --quick in this process (no second interpreter importing
    torch) and returns what it printed. The example's torch thread count is undone afterwards."""
    import runpy

    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / name
    monkeypatch.setattr(sys, "argv", [str(example), "--quick", *arguments])
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(example), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    return capsys.readouterr().out
