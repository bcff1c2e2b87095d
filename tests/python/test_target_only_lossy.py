"""The lossy target-only knobs from Python: SGLang's thresholded walk (lossless at (1, 1), the
SGLang adapter's tokens for the same uniforms) and typical acceptance over a tree (verify_tree's
Typical walk without draft rows)."""

import numpy as np
import pytest

import specdec
from specdec.compat.sglang import tree_speculative_sampling_target_only

VOCAB = 6
# Root children 2 and 4; node 0 (token 2) has child 1. Rows: 0 the root, i + 1 after node i.
TOKENS, PARENTS = [2, 4, 1], [-1, -1, 0]


def lossy_rows(rng, count):
    values = rng.gamma(0.8, size=(count, VOCAB)) + 0.02
    return (values / values.sum(axis=1, keepdims=True)).astype(np.float32)


def emitted(tree_tokens, verdict, nodes):
    return [tree_tokens[n] for n in nodes.tolist()] + [verdict.token]


def test_thresholds_one_one_follow_the_target():
    # At (1, 1) the walk is lossless: the first token is a draw from row 0 and, after node 0
    # (token 2), the second from row 1. Outcome t for a first token t != 2, VOCAB + u for (2, u).
    # Chi-square with 2 * VOCAB - 2 degrees of freedom at threshold 35.0: false failure < 1e-3.
    rng = np.random.default_rng(11)
    tree = specdec.DraftTree(TOKENS, PARENTS)
    rows = lossy_rows(rng, 4)
    runs = 6000
    counts = np.zeros(2 * VOCAB)
    for seed in range(runs):
        verdict, nodes = specdec.verify_tree_target_only_thresholded(
            tree, rows, 1.0, 1.0, specdec.RandomStream(seed=seed))
        out = emitted(TOKENS, verdict, nodes)
        counts[out[0] if out[0] != 2 else VOCAB + out[1]] += 1
    expected = np.concatenate([rows[0], rows[0][2] * rows[1]])
    expected[2] = 0.0
    keep = expected > 0
    chi2 = (((counts - runs * expected) ** 2)[keep] / (runs * expected[keep])).sum()
    assert counts[~keep].sum() == 0
    assert chi2 < 35.0


def test_threshold_single_zero_takes_every_first_child():
    # threshold_single 0: every child reaches it, so the walk follows first children to a leaf.
    tree = specdec.DraftTree(TOKENS, PARENTS)
    rows = lossy_rows(np.random.default_rng(2), 4)
    for seed in range(20):
        verdict, nodes = specdec.verify_tree_target_only_thresholded(
            tree, rows, 0.0, 1.0, specdec.RandomStream(seed=seed))
        assert nodes.tolist() == [0, 2] and verdict.bonus


@pytest.mark.parametrize("single, acc", [(1.0, 1.0), (0.3, 0.6), (0.0, 0.0), (1.0, 0.2)])
def test_supplied_coins_give_the_sglang_adapters_tokens(single, acc):
    # The same tree in SGLang's layout: slot 0 the root, slot i + 1 node i, so slot = row.
    rng = np.random.default_rng(int(single * 10 + acc * 100))
    tree = specdec.DraftTree(TOKENS, PARENTS)
    index = np.arange(4, dtype=np.int64)[None]
    next_token = np.array([[1, 3, -1, -1]], np.int64)
    next_sibling = np.array([[-1, 2, -1, -1]], np.int64)
    candidates = np.array([[0] + TOKENS], np.int64)
    for _ in range(30):
        rows = lossy_rows(rng, 4)
        coins = rng.random(4, dtype=np.float32)
        last = np.float32(rng.random())
        verdict, nodes = specdec.verify_tree_target_only_thresholded(
            tree, rows, single, acc, node_coins=coins, final_uniform=float(last))
        predicts = np.full(4, -1, np.int32)
        accept_index = np.full((1, 3), -1, np.int32)
        accept_num = np.zeros(1, np.int32)
        tree_speculative_sampling_target_only(
            predicts, accept_index, accept_num, candidates, index, next_token, next_sibling,
            coins[None], np.array([last], np.float32), rows[None], None, single, acc)
        assert accept_num[0] == verdict.accepted
        assert accept_index[0, 1:1 + verdict.accepted].tolist() == [n + 1 for n in nodes]
        out = emitted(TOKENS, verdict, nodes)
        assert [int(predicts[s]) for s in accept_index[0, :verdict.accepted + 1]] == out


def test_thresholded_needs_one_source_of_randomness():
    tree = specdec.DraftTree(TOKENS, PARENTS)
    rows = lossy_rows(np.random.default_rng(3), 4)
    with pytest.raises(specdec.Error, match="stream"):
        specdec.verify_tree_target_only_thresholded(tree, rows)
    with pytest.raises(specdec.Error, match="stream"):
        specdec.verify_tree_target_only_thresholded(
            tree, rows, stream=specdec.RandomStream(seed=1), node_coins=np.zeros(4, np.float32))
    with pytest.raises(specdec.Error, match="threshold_acc"):
        specdec.verify_tree_target_only_thresholded(tree, rows, 1.0, 1.5,
                                                    specdec.RandomStream(seed=1))
    with pytest.raises(specdec.Error, match="node_coins"):
        specdec.verify_tree_target_only_thresholded(tree, rows,
                                                    node_coins=np.full(4, 2.0, np.float32))


def test_typical_tree_is_verify_trees_typical_walk():
    # verify_tree with Typical reads no draft row: same walk, same draws, token for token.
    rng = np.random.default_rng(4)
    tree = specdec.DraftTree(TOKENS, PARENTS)
    rule = specdec.Typical(epsilon=0.3, delta=0.9)  # a threshold near 0.2: both outcomes occur
    ignored = lossy_rows(rng, 4)
    accepted_any = rejected_any = False
    for seed in range(40):
        rows = lossy_rows(rng, 4)
        stream = specdec.RandomStream(seed=seed)
        verdict, nodes = specdec.verify_tree_target_only_typical(tree, rows, rule, stream)
        reference, reference_nodes = specdec.verify_tree(rule, tree, rows, ignored, stream)
        assert nodes.tolist() == reference_nodes.tolist()
        assert (verdict.accepted, verdict.token, verdict.bonus) == (
            reference.accepted, reference.token, reference.bonus)
        accepted_any |= verdict.accepted > 0
        rejected_any |= verdict.accepted == 0
    assert accepted_any and rejected_any


def test_typical_tree_refuses_another_rule():
    tree = specdec.DraftTree(TOKENS, PARENTS)
    rows = lossy_rows(np.random.default_rng(5), 4)
    with pytest.raises(specdec.Error, match="rule"):
        specdec.verify_tree_target_only_typical(tree, rows, specdec.Rejection(),
                                                specdec.RandomStream(seed=1))
