"""Drafts without draft rows from Python: chains and trees are walks of verify_target_only, and the
node rule's output follows the target."""

import numpy as np
import pytest

import specdec

VOCAB = 6


def random_rows(rng, rows, zeros=1):
    """Probability rows (float32) with `zeros` tokens of probability 0 per row."""
    values = rng.gamma(0.6, size=(rows, VOCAB))
    for r in range(rows):
        values[r, rng.choice(VOCAB, zeros, replace=False)] = 0.0
    return (values / values.sum(axis=1, keepdims=True)).astype(np.float32)


def test_verify_chain_target_only_is_a_loop_of_verify_target_only():
    rng = np.random.default_rng(5)
    rejected = 0
    for trial in range(40):
        rows = random_rows(rng, 4)
        draft = rng.integers(0, VOCAB, size=3).astype(np.int32)
        s = specdec.RandomStream(seed=trial, position=2)
        verdict, out = specdec.verify_chain_target_only(rows, draft, s)
        assert out.dtype == np.int32 and len(out) == verdict.emitted == verdict.accepted + 1
        for i in range(verdict.emitted - (verdict.accepted == 3)):
            node = specdec.verify_target_only(rows[i], draft[i:i + 1], s.at_position(2 + i))
            assert node.token == out[i]
            assert (node.accepted == 0) == (i < verdict.accepted)
        rejected += verdict.accepted < 3
    assert 0 < rejected < 40


def test_verify_tree_target_only_walks_children_in_order_and_skips_repeats():
    # Root children 2, 2, 4 (a repeat), node 0 has child 1. Row 0 puts all mass on token 2: the
    # first child is always taken, never its repeat.
    tree = specdec.DraftTree([2, 2, 4, 1], [-1, -1, -1, 0])
    rows = random_rows(np.random.default_rng(1), 5)
    rows[0] = np.eye(VOCAB, dtype=np.float32)[2]
    for seed in range(20):
        verdict, nodes = specdec.verify_tree_target_only(tree, rows, specdec.RandomStream(seed=seed))
        assert nodes.tolist()[:1] == [0]
        assert 1 not in nodes.tolist()


def test_verify_target_only_follows_the_target():
    # Candidates 1, 3, 1 over a fixed row: the emitted token is a draw from the row itself. 20000
    # fixed streams; the bound is about 9 standard deviations of the largest bin's frequency.
    target = np.array([0.1, 0.35, 0.05, 0.3, 0.2, 0.0], np.float32)
    counts = np.zeros(VOCAB)
    for seed in range(20000):
        counts[specdec.verify_target_only(target, [1, 3, 1],
                                          specdec.RandomStream(seed=seed)).token] += 1
    assert counts[5] == 0
    assert np.abs(counts / counts.sum() - target).max() < 0.03


def test_placeholder_tokens_are_refused_without_indexing():
    rows = random_rows(np.random.default_rng(2), 3)
    with pytest.raises(specdec.Error, match=r"draft_tokens\[1\]"):
        specdec.verify_chain_target_only(rows, np.array([0, -1], np.int32),
                                         specdec.RandomStream(seed=1))
    with pytest.raises(specdec.Error, match="target_rows"):
        specdec.verify_chain_target_only(rows[:2], np.array([0, 1], np.int32),
                                         specdec.RandomStream(seed=1))


def test_batches_equal_the_single_calls():
    rng = np.random.default_rng(9)
    offsets = np.array([0, 2, 2, 5], np.int32)  # 2, 0 and 3 drafts
    draft = rng.integers(0, VOCAB, size=5).astype(np.int32)
    rows = random_rows(rng, 8)
    streams = [specdec.RandomStream(seed=4, sequence=b) for b in range(3)]
    emitted, accepted = specdec.verify_chain_batch_target_only(
        target_rows=rows, draft_tokens=draft, streams=streams, draft_offsets=offsets)
    for b in range(3):
        first, last = offsets[b], offsets[b + 1]
        verdict, out = specdec.verify_chain_target_only(rows[first + b:last + b + 1],
                                                        draft[first:last], streams[b])
        assert accepted[b] == verdict.accepted
        segment = emitted[first + b:last + b + 1].tolist()
        assert segment == out.tolist() + [-1] * (last - first + 1 - verdict.emitted)

    tree = specdec.DraftTree([2, 2, 4, 1], [-1, -1, -1, 0])
    tree_rows = random_rows(rng, 5)
    both = np.concatenate([tree_rows, tree_rows])
    nodes, accepted, final, bonus = specdec.verify_tree_batch_target_only(
        node_offsets=np.array([0, 4, 8], np.int32), tokens=np.tile(tree.tokens, 2),
        parents=np.tile(tree.parents, 2), target_rows=both, streams=streams[:2])
    for b in range(2):
        verdict, path = specdec.verify_tree_target_only(tree, tree_rows, streams[b])
        assert (accepted[b], final[b], bool(bonus[b])) == (verdict.accepted, verdict.token,
                                                          verdict.bonus)
        assert nodes[4 * b:4 * b + verdict.accepted].tolist() == path.tolist()
