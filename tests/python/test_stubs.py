"""The type stubs name every public function and class of the extension, and nothing else
(besides stub-only helper classes, whose names start with an underscore)."""

import ast
from pathlib import Path

import specdec
from specdec import _specdec


def stub_names():
    stub = Path(_specdec.__file__).with_name("_specdec.pyi")
    tree = ast.parse(stub.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) or (isinstance(node, ast.ClassDef)
                                                 and not node.name.startswith("_")):
            names.add(node.name)
    return names


def test_every_public_name_has_a_stub():
    public = {name for name in dir(_specdec) if not name.startswith("_")}
    assert public - stub_names() == set()


def test_every_stub_exists():
    assert stub_names() - set(dir(_specdec)) == set()


def test_help_shows_docstrings():
    assert "Philox" in specdec.RandomStream.__doc__
    assert "warped distribution" in specdec.warp_logits.__doc__
