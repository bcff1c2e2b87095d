"""Arrays across the boundary, errors, random streams and warps."""

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch


def test_error_is_a_value_error_naming_the_argument():
    with pytest.raises(specdec.Error) as caught:
        specdec.warp_logits(specdec.Warp(top_p=1.5), np.zeros(4, np.float32))
    assert isinstance(caught.value, ValueError)
    assert caught.value.argument == "top_p"
    assert "1.5" in caught.value.problem
    assert str(caught.value) == f"top_p: {caught.value.problem}"


def test_uniforms_are_the_stream_draws():
    stream = specdec.RandomStream(seed=42, position=17)
    values = stream.uniforms(9, first=3)
    assert values.dtype == np.float32
    assert [float(v) for v in values] == [stream.uniform(3 + i) for i in range(9)]
    assert all(0.0 < v < 1.0 for v in values)
    assert specdec.RandomStream(seed=43, position=17).uniform(3) != stream.uniform(3)


def test_warp_rows_of_a_matrix_match_each_row():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, size=(3, 50)).astype(np.float32)
    warp = specdec.Warp(temperature=0.8, top_p=0.9)
    rows = specdec.warp_logits(warp, logits)
    assert rows.shape == (3, 50) and rows.dtype == np.float32
    for r in range(3):
        np.testing.assert_array_equal(rows[r], specdec.warp_logits(warp, logits[r]))
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=1e-5)


def test_strided_views_and_lists_are_read():
    logits = np.arange(20, dtype=np.float32).reshape(4, 5)
    warp = specdec.Warp()
    np.testing.assert_array_equal(specdec.warp_logits(warp, logits[:, 1]),
                                  specdec.warp_logits(warp, np.ascontiguousarray(logits[:, 1])))
    np.testing.assert_array_equal(specdec.warp_logits(warp, [0.0, 1.0, 2.0]),
                                  specdec.warp_logits(warp, np.array([0, 1, 2], np.float32)))


def test_float64_logits_are_refused_with_a_hint():
    with pytest.raises(specdec.Error, match=r"logits: has dtype float64.*astype"):
        specdec.warp_logits(specdec.Warp(), np.zeros(4))


def test_float16_logits_are_read_in_place():
    logits = np.array([2.0, 1.0, 0.5, -1.0], np.float16)
    np.testing.assert_array_equal(specdec.warp_logits(specdec.Warp(), logits),
                                  specdec.warp_logits(specdec.Warp(), logits.astype(np.float32)))


@requires_torch
def test_torch_in_torch_out_bfloat16_included():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0], dtype=torch.bfloat16)
    out = specdec.warp_logits(specdec.Warp(temperature=0.5), logits)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    expected = specdec.warp_logits(specdec.Warp(temperature=0.5), logits.float().numpy())
    np.testing.assert_array_equal(out.numpy(), expected)


@requires_torch
def test_tensors_that_require_grad_are_read():
    logits = torch.zeros(4, requires_grad=True)
    out = specdec.warp_logits(specdec.Warp(), logits)
    np.testing.assert_allclose(out.numpy(), 0.25)


def test_draft_tree_from_tokens_and_parents():
    tree = specdec.DraftTree([5, 6, 7], np.array([-1, -1, 0], np.int64))
    assert len(tree) == 3 and tree.max_depth() == 2
    assert tree.depths.tolist() == [1, 1, 2]
    assert tree.add(9, 2) == 3
    with pytest.raises(specdec.Error) as caught:
        specdec.DraftTree([5, 6], [-1, 1])
    assert caught.value.argument == "parents[1]"
