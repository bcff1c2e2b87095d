"""The Python examples run (each with --quick) and say what they promise."""

import os
import pathlib
import subprocess
import sys

import pytest

import specdec
from conftest import requires_torch

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"

pytestmark = requires_torch


def run_example(name, *arguments, cwd):
    package_root = str(pathlib.Path(specdec.__file__).resolve().parents[1])
    environment = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=package_root)
    done = subprocess.run([sys.executable, str(EXAMPLES / name), "--quick", *arguments], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_speculative_decoding_runs(tmp_path):
    out = run_example("speculative_decoding.py", "--method", "spectr", cwd=tmp_path)
    assert "autoregressive: 1.00 tokens per target call" in out
    assert "spectr:" in out and "block efficiency" in out


def test_plot_methods_draws_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = run_example("plot_methods.py", "--output", str(tmp_path / "methods.png"), cwd=tmp_path)
    png = (tmp_path / "methods.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10000
    assert out.count("block efficiency") == 8  # four methods, two budgets each in --quick
