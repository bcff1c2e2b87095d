"""specdec.compat.sglang.tree_speculative_sampling_target_only_rejmask: sgl-kernel's signature
without draft_probs, SGLang's walk token for token on the engine's uniforms (the reference walk
of test_compat_sglang with the rejected children masked out of the final row), at SGLang's sizes
where the machine allows (batch 1000 with top-k <= 4 trees, V = 128256)."""

import numpy as np
import pytest

import specdec
from specdec.compat.sglang import (tree_speculative_sampling_target_only,
                                   tree_speculative_sampling_target_only_rejmask)

from test_compat_sglang import outputs, random_trees, reference_walk


def check_against_reference(batch, nodes, vocab, steps, single, acc, seed):
    rng = np.random.default_rng(seed)
    candidates, index, first, nxt = random_trees(rng, batch, nodes, vocab)
    target = rng.dirichlet(np.full(vocab, 0.7), size=(batch, nodes + 1)).astype(np.float32)
    coins = rng.random((batch, nodes + 1), dtype=np.float32)
    final = rng.random(batch, dtype=np.float32)
    out = outputs(batch, nodes + 1, steps)
    tree_speculative_sampling_target_only_rejmask(*out, candidates, index, first, nxt, coins,
                                                  final, target, single, acc)
    mask = np.zeros((nodes + 1, vocab), np.float32)  # the reference writes rejections here
    for b in range(batch):
        writes, accepted_index, count = reference_walk(
            candidates[b], index[b] - index[b, 0], first[b], nxt[b], coins[b], final[b],
            target[b], mask, steps, np.float32(single), acc)
        assert out[2][b] == count
        assert out[1][b, :count + 1].tolist() == [i + index[b, 0] for i in accepted_index]
        for position, token in writes.items():
            assert out[0][position + index[b, 0]] == token
    return out, (candidates, index, first, nxt, coins, final, target)


@pytest.mark.parametrize("single, acc", [(1.0, 1.0), (0.3, 0.8), (0.0, 0.0), (1.0, 0.5)])
def test_rejmask_gives_sglangs_tokens(single, acc):
    check_against_reference(64, 7, 6, 4, single, acc, seed=int(single * 10 + acc * 100))


def test_rejmask_equals_the_form_without_draft_probs():
    out, inputs = check_against_reference(32, 6, 5, 4, 0.7, 0.9, seed=11)
    again = outputs(32, 7, 4)
    tree_speculative_sampling_target_only(*again, *inputs, threshold_single=0.7,
                                          threshold_acc=0.9)
    for a, b in zip(out, again):
        assert np.array_equal(a, b)


def test_rejmask_at_sglangs_batch_size():
    check_against_reference(1000, 4, 16, 3, 1.0, 1.0, seed=5)


def test_rejmask_at_a_llama3_vocabulary():
    check_against_reference(2, 4, 128256, 3, 1.0, 1.0, seed=6)


def test_rejmask_takes_no_draft_probs():
    rng = np.random.default_rng(0)
    candidates, index, first, nxt = random_trees(rng, 1, 3, 4)
    target = np.full((1, 4, 4), 0.25, np.float32)
    with pytest.raises(TypeError):
        tree_speculative_sampling_target_only_rejmask(
            *outputs(1, 4, 3), candidates, index, first, nxt, None, None, target,
            draft_probs=np.zeros_like(target))
    with pytest.raises(specdec.Error) as raised:
        tree_speculative_sampling_target_only_rejmask(
            *outputs(1, 4, 3), candidates, index, first, nxt, None, None, target, "high")
    assert raised.value.argument == "threshold_single"
