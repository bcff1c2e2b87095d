"""A draft tree through a real PyTorch decoder: specdec's mask and position ids make one batched
forward pass equal to running every root-to-node path on its own, and the KV cache compacted
with specdec's indices equals the cache of recomputing the accepted tokens."""

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch

if torch is not None:
    from model import GPT, Config, causal_mask

pytestmark = requires_torch

CONTEXT = [5, 17, 250, 3, 99, 42]  # the root is the last token, 42


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    target = GPT(Config(layers=4, seed=7))
    return target, target.early_exit(1)


def prefilled(model):
    cache = model.new_cache(64)
    logits = model.forward(CONTEXT, list(range(len(CONTEXT))), causal_mask(0, len(CONTEXT)), cache)
    return cache, logits[-1]


def tree_forward(model, tree):
    """The context, then the whole tree in one pass: returns the N + 1 rows (row 0 the root's)
    and the cache holding the context and the N tree nodes."""
    cache, root_row = prefilled(model)
    mask = torch.ones(len(tree), len(CONTEXT) + len(tree), dtype=torch.bool)
    mask[:, len(CONTEXT):] = torch.from_numpy(specdec.build_dense_mask(tree)).bool()
    positions = specdec.tree_positions(tree, len(CONTEXT))
    logits = model.forward(tree.tokens, positions, mask, cache)
    return torch.cat([root_row[None], logits]), cache


def draft_tree(draft, branching, seed):
    """A tree drawn from the draft model, i.i.d. children per node (`branching[d]` children at
    depth d + 1), as SpecInfer drafts it."""
    generator = torch.Generator().manual_seed(seed)
    tree, frontier = specdec.DraftTree(), [(-1, [])]
    for children in branching:
        rows = torch.softmax(draft.logits_after([CONTEXT + path for _, path in frontier]), -1)
        next_frontier = []
        for (node, path), row in zip(frontier, rows):
            for token in torch.multinomial(row, children, replacement=True, generator=generator):
                next_frontier.append((tree.add(int(token), node), path + [int(token)]))
        frontier = next_frontier
    return tree


def path_tokens(tree, node):
    return [int(tree.tokens[i]) for i in specdec.path_to_node(tree, node)]


def test_positions_follow_depths():
    tree = specdec.DraftTree([1, 2, 3, 4], [-1, -1, 0, 2])
    np.testing.assert_array_equal(specdec.tree_positions(tree, len(CONTEXT)),
                                  len(CONTEXT) - 1 + tree.depths)


@pytest.mark.parametrize("branching", [[3, 2, 2], [1, 1, 1, 1], [4, 1, 3]])
def test_one_tree_pass_gives_the_logits_of_every_path(models, branching):
    target, draft = models
    tree = draft_tree(draft, branching, seed=len(branching))
    rows, _ = tree_forward(target, tree)
    reference = target.logits_after([CONTEXT] + [CONTEXT + path_tokens(tree, i)
                                                 for i in range(len(tree))])
    assert rows.shape == reference.shape == (len(tree) + 1, target.config.vocab)
    assert (rows - reference).abs().max().item() <= 1e-5


def test_a_mask_that_ignores_the_tree_changes_the_logits(models):
    # The check above must be able to fail: a causal mask over the tree lets siblings see each
    # other, and the rows differ.
    target, draft = models
    tree = draft_tree(draft, [3, 2], seed=3)
    cache, _ = prefilled(target)
    logits = target.forward(tree.tokens, specdec.tree_positions(tree, len(CONTEXT)),
                            causal_mask(len(CONTEXT), len(tree)), cache)
    rows, _ = tree_forward(target, tree)
    assert (logits - rows[1:]).abs().max().item() > 1e-2


def recomputed_cache(model, tokens):
    cache = model.new_cache(64)
    model.forward(tokens, list(range(len(tokens))), causal_mask(0, len(tokens)), cache)
    return cache


def assert_compacted_cache_is_recomputed(model, tree, accepted):
    _, cache = tree_forward(model, tree)
    source, destination, moves = specdec.kv_compaction(tree, len(CONTEXT), accepted)
    assert moves == sum(int(s != d) for s, d in zip(source, destination))
    cache.move(source, destination)
    cache.length = len(CONTEXT) + len(accepted)
    tokens = CONTEXT + [int(tree.tokens[node]) for node in accepted]
    expected = recomputed_cache(model, tokens)
    assert (cache.keys[:, :, :cache.length] - expected.keys[:, :, :len(tokens)]).abs().max() <= 1e-5
    assert (cache.values[:, :, :cache.length]
            - expected.values[:, :, :len(tokens)]).abs().max() <= 1e-5
    return moves


def test_compaction_keeps_the_cache_of_every_root_path(models):
    target, draft = models
    tree = draft_tree(draft, [3, 2, 2], seed=11)
    moves = [assert_compacted_cache_is_recomputed(target, tree, list(specdec.path_to_node(tree, i)))
             for i in range(len(tree))]
    assert max(moves) > 0  # some paths needed moving, not only the first branch


def test_compaction_after_verification_equals_recomputing(models):
    target, draft = models
    warp = specdec.Warp()
    accepted_lengths, moved = [], 0
    for seed in range(6):
        tree = draft_tree(draft, [2, 2, 2], seed=100 + seed)
        target_rows, _ = tree_forward(target, tree)
        draft_rows, _ = tree_forward(draft, tree)
        verdict, accepted = specdec.verify_tree(
            specdec.MultiRound(), tree, specdec.warp_logits(warp, target_rows.numpy()),
            specdec.warp_logits(warp, draft_rows.numpy()), specdec.RandomStream(seed=seed))
        assert len(accepted) == verdict.accepted
        moved += assert_compacted_cache_is_recomputed(target, tree, list(accepted))
        accepted_lengths.append(verdict.accepted)
    assert max(accepted_lengths) >= 2 and moved > 0  # the seeds reach deep, moved paths
