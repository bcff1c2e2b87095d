"""Verification of one sequence from logits: each entry gives the tokens of its row-based call on
the warped rows, for the same stream."""

import numpy as np
import pytest

import specdec

VOCAB = 50
WARPS = [specdec.Warp(), specdec.Warp(temperature=0.8, top_p=0.9),
         specdec.Warp(temperature=1.2, top_k=6), specdec.Warp(temperature=0.0)]


def logits(rng, rows):
    return (2.0 * rng.standard_normal((rows, VOCAB))).astype(np.float32)


def nearby(rng, rows):
    """Draft logits near the target's, so that acceptance and rejection both occur."""
    return (rows + 0.8 * rng.standard_normal(rows.shape)).astype(np.float32)


def drawn(rng, warped):
    """One token per warped row, drawn from it."""
    return np.array([specdec.sample(row, rng.random()) for row in warped], np.int32)


def same_chain(a, b):
    (verdict_a, tokens_a), (verdict_b, tokens_b) = a, b
    return (verdict_a.accepted, verdict_a.emitted, list(tokens_a)) == (
        verdict_b.accepted, verdict_b.emitted, list(tokens_b))


def same_tree(a, b):
    (verdict_a, nodes_a), (verdict_b, nodes_b) = a, b
    return (verdict_a.accepted, verdict_a.token, verdict_a.bonus, list(nodes_a)) == (
        verdict_b.accepted, verdict_b.token, verdict_b.bonus, list(nodes_b))


@pytest.mark.parametrize("warp", WARPS, ids=["plain", "top_p", "top_k", "greedy"])
def test_chain_entries_from_logits_equal_the_row_based_calls(warp):
    rng = np.random.default_rng(7)
    target = logits(rng, 4)
    draft = nearby(rng, target[:3])
    target_rows = specdec.warp_logits(warp, target)
    draft_rows = specdec.warp_logits(warp, draft)
    tokens = drawn(rng, draft_rows)
    # Copies of the target's likeliest tokens, as an n-gram drafter's often are.
    copies = np.argmax(target[:3], axis=1).astype(np.int32)
    outcomes = set()
    for seed in range(16):
        s = specdec.RandomStream(seed=seed, position=3)
        want = specdec.verify_chain(specdec.Rejection(), target_rows, draft_rows, tokens, s)
        assert same_chain(specdec.verify_chain_logits(warp, target, draft, tokens, s), want)
        assert same_chain(specdec.verify_block_logits(warp, target, draft, tokens, s),
                          specdec.verify_block(target_rows, draft_rows, tokens, s))
        target_only = specdec.verify_chain_target_only(target_rows, copies, s)
        assert same_chain(specdec.verify_chain_target_only_logits(warp, target, copies, s),
                          target_only)
        outcomes.add(target_only[0].accepted)
    if not warp.is_greedy():
        assert len(outcomes) > 1  # rejections and acceptances were both compared


@pytest.mark.parametrize("warp", WARPS, ids=["plain", "top_p", "top_k", "greedy"])
def test_tree_entries_from_logits_equal_the_row_based_calls(warp):
    rng = np.random.default_rng(8)
    tree = specdec.DraftTree([1, 2, 3, 4, 5], [-1, -1, 0, 0, 2])
    target = logits(rng, 6)
    draft = nearby(rng, target)
    target_rows = specdec.warp_logits(warp, target)
    draft_rows = specdec.warp_logits(warp, draft)
    for rule in [specdec.Rejection(), specdec.MultiRound(), specdec.SpecTr(), specdec.Typical()]:
        for seed in range(6):
            s = specdec.RandomStream(seed=seed)
            try:
                want = specdec.verify_tree(rule, tree, target_rows, draft_rows, s)
            except specdec.Error:  # a child the warped draft row cannot draw
                with pytest.raises(specdec.Error):
                    specdec.verify_tree_logits(rule, warp, tree, target, draft, s)
                continue
            assert same_tree(specdec.verify_tree_logits(rule, warp, tree, target, draft, s), want)
    for seed in range(6):
        s = specdec.RandomStream(seed=seed)
        assert same_tree(specdec.verify_tree_target_only_logits(warp, tree, target, s),
                         specdec.verify_tree_target_only(tree, target_rows, s))


def test_chain_from_half_logits_reads_them_in_place():
    rng = np.random.default_rng(9)
    target = logits(rng, 3).astype(np.float16)
    tokens = np.array([4, 7], np.int32)
    warp = specdec.Warp(top_p=0.8)
    s = specdec.RandomStream(seed=2)
    want = specdec.verify_chain_target_only(specdec.warp_logits(warp, target), tokens, s)
    assert same_chain(specdec.verify_chain_target_only_logits(warp, target, tokens, s), want)


def test_from_logits_entries_name_bad_arguments():
    target = np.zeros((3, VOCAB), np.float32)
    with pytest.raises(specdec.Error, match="draft_logits"):
        specdec.verify_chain_logits(specdec.Warp(), target, np.zeros((3, VOCAB), np.float32),
                                    [1, 2], specdec.RandomStream(seed=1))
    with pytest.raises(specdec.Error, match="top_p"):
        specdec.verify_chain_target_only_logits(specdec.Warp(top_p=2.0), target, [1, 2],
                                                specdec.RandomStream(seed=1))
    with pytest.raises(specdec.Error, match="tree"):
        specdec.verify_tree_target_only_logits(specdec.Warp(), [1, 2], target,
                                               specdec.RandomStream(seed=1))
