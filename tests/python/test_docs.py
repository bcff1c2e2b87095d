"""Every ```python block of README.md and docs/*.md is a complete program: run each one."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import specdec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks():
    for page in [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            yield pytest.param(match.group(1), id=f"{page.relative_to(ROOT)}:{line}")


BLOCKS = list(python_blocks())


def test_the_docs_have_python_blocks():
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", BLOCKS)
def test_block_runs(code, tmp_path):
    # The package this suite imports, whatever the working directory.
    package_root = str(pathlib.Path(specdec.__file__).resolve().parents[1])
    environment = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=package_root)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
