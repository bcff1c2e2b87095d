"""Shared fixtures of the Python tests: optional torch, a marker for tests that need CUDA, and
the chi-square p-value the distribution tests share."""

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


def chi_square_p_value(counts, expected):
    """Upper tail of Pearson's statistic (Wilson-Hilferty normal approximation)."""
    from math import erfc, sqrt
    keep = expected > 0
    assert counts[~keep].sum() == 0, "a token of probability 0 was emitted"
    statistic = float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    df = int(keep.sum()) - 1
    z = ((statistic / df) ** (1 / 3) - (1 - 2 / (9 * df))) / sqrt(2 / (9 * df))
    return 0.5 * erfc(z / sqrt(2))
