"""Draft trees from Python: masks and positions against a pure-NumPy ancestor computation, paths,
KV compaction on a hand example, beam compression and the engine exporters."""

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch


def random_tree(rng, n, vocab=50):
    """A level-order tree of n nodes: each node's parent is a node of the previous level (or -1)."""
    tree = specdec.DraftTree()
    level, previous_level = [], [-1]
    for _ in range(n):
        if level and rng.random() < 0.4:
            previous_level, level = level, []
        node = tree.add(int(rng.integers(vocab)), int(rng.choice(previous_level)))
        level.append(node)
    return tree


def ancestors(parents):
    """mask[i, j] = 1 when j is i or an ancestor of i, by walking parents (the definition)."""
    n = len(parents)
    mask = np.zeros((n, n), np.uint8)
    for i in range(n):
        j = i
        while j >= 0:
            mask[i, j] = 1
            j = parents[j]
    return mask


def unpack_words(words, columns):
    """Packed uint32 rows (bit j % 32 of word j // 32, least significant first) as a 0/1 matrix."""
    bits = np.unpackbits(words.astype("<u4").view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :columns]


@pytest.fixture
def trees():
    rng = np.random.default_rng(13)
    return [random_tree(rng, n) for n in (1, 2, 7, 31, 32, 33, 70)]


def test_masks_match_the_ancestor_definition(trees):
    for tree in trees:
        expected = ancestors(tree.parents)
        dense = specdec.build_dense_mask(tree)
        assert dense.dtype == np.uint8 and dense.shape == (len(tree), len(tree))
        np.testing.assert_array_equal(dense, expected)
        packed = specdec.build_packed_mask(tree)
        assert packed.dtype == np.uint32 and packed.shape == (len(tree), (len(tree) + 31) // 32)
        np.testing.assert_array_equal(unpack_words(packed, len(tree)), expected)
        # Bits past the last column stay 0.
        assert unpack_words(packed, packed.shape[1] * 32)[:, len(tree):].sum() == 0


def test_positions_are_context_plus_depth(trees):
    for tree in trees:
        positions = specdec.tree_positions(tree, 9)
        assert positions.dtype == np.int32
        np.testing.assert_array_equal(positions, 9 + tree.depths - 1)
        np.testing.assert_array_equal(specdec.engine_positions(tree, 9),
                                      np.concatenate([[8], positions]))
    with pytest.raises(specdec.Error) as caught:
        specdec.tree_positions(trees[0], 0)
    assert caught.value.argument == "context_length"


def test_paths_and_leaves(trees):
    for tree in trees:
        parents = tree.parents
        leaves = specdec.leaves(tree)
        np.testing.assert_array_equal(leaves, [i for i in range(len(tree)) if i not in set(parents)])
        for node in range(len(tree)):
            path = specdec.path_to_node(tree, node)
            assert len(path) == tree.depths[node] and path[-1] == node
            assert parents[path[0]] == -1 and all(parents[path[1:]] == path[:-1])
            np.testing.assert_array_equal(np.flatnonzero(ancestors(parents)[node]), path)
        paths = specdec.root_to_leaf_paths(tree)
        assert paths.shape == (len(leaves), tree.max_depth())
        for row, leaf in zip(paths, leaves):
            np.testing.assert_array_equal(row[row >= 0], specdec.path_to_node(tree, int(leaf)))
        padded = specdec.root_to_leaf_paths(tree, rows=len(leaves) + 2, width=tree.max_depth() + 1)
        assert (padded[len(leaves):] == -1).all() and (padded[:, -1] == -1).all()
        for node in [-1] + list(range(len(tree))):
            np.testing.assert_array_equal(specdec.children_of(tree, node),
                                          np.flatnonzero(parents == node))
    with pytest.raises(specdec.Error) as caught:
        specdec.root_to_leaf_paths(trees[-1], rows=0)
    assert caught.value.argument == "rows"


def test_kv_compaction_hand_example():
    # Root children 0 and 1; node 2 under 0, node 3 under 1, node 4 under 2 (level order).
    tree = specdec.DraftTree([10, 11, 12, 13, 14], [-1, -1, 0, 1, 2])
    source, destination, moves = specdec.kv_compaction(tree, 6, [0, 2, 4])
    # Slots 6.. hold nodes 0..4: node 0 stays at 6, node 2 moves 8 -> 7, node 4 moves 10 -> 8.
    assert source.tolist() == [6, 8, 10] and destination.tolist() == [6, 7, 8] and moves == 2
    source, destination, moves = specdec.kv_compaction(tree, 6, [1, 3])
    assert source.tolist() == [7, 9] and destination.tolist() == [6, 7] and moves == 2
    source, destination, moves = specdec.kv_compaction(tree, 6, np.array([], np.int64))
    assert len(source) == 0 and moves == 0
    with pytest.raises(specdec.Error) as caught:
        specdec.kv_compaction(tree, 6, [0, 3])
    assert caught.value.argument == "accepted[1]"
    assert "path from the root" in caught.value.problem


def test_pack_accepted_paths_is_csr_of_slots():
    a = specdec.DraftTree([1, 2, 3], [-1, 0, 1])
    b = specdec.DraftTree([4, 5], [-1, -1])
    offsets, slots = specdec.pack_accepted_paths([a, b], [4, 9], [[0, 1], [1]])
    assert offsets.tolist() == [0, 2, 3] and slots.tolist() == [4, 5, 10]
    with pytest.raises(specdec.Error) as caught:
        specdec.pack_accepted_paths([a, b], [4, 0], [[0], [1]])
    assert caught.value.argument == "context_lengths[1]"


@requires_torch
def test_kv_compaction_answers_torch_for_torch():
    tree = specdec.DraftTree([1, 2], [-1, 0])
    source, destination, _ = specdec.kv_compaction(tree, 3, torch.tensor([0, 1]))
    assert isinstance(source, torch.Tensor) and source.tolist() == [3, 4]


def test_compress_beams_hand_example():
    beams = np.array([[1, 2, 3], [1, 2, 4], [5, 2, 3]])
    np.testing.assert_array_equal(specdec.prefix_match(beams, 8),
                                  [[0, 0, 0], [0, 0, 1], [2, 2, 2]])
    compressed = specdec.compress_beams(beams, 8)
    assert isinstance(compressed, specdec.CompressedBeams)
    np.testing.assert_array_equal(compressed.prefix_match, specdec.prefix_match(beams, 8))
    assert (compressed.width, compressed.length, len(compressed)) == (3, 3, 7)
    assert compressed.tokens.tolist() == [1, 2, 3, 4, 5, 2, 3]
    assert compressed.parents.tolist() == [-1, 0, 1, 1, -1, 4, 5]
    assert compressed.offsets.tolist() == [0, 1, 2, 2, 0, 1, 2]
    assert compressed.source.tolist() == [0, 1, 2, 5, 6, 7, 8]
    np.testing.assert_array_equal(compressed.tokens[compressed.unpacker], beams)
    np.testing.assert_array_equal(specdec.unpack_beams(compressed, compressed.tokens), beams)
    values = np.arange(7, dtype=np.float32) * 0.5
    np.testing.assert_array_equal(specdec.unpack_beams(compressed, values),
                                  values[compressed.unpacker])
    dense = specdec.compressed_dense_mask(compressed)
    np.testing.assert_array_equal(dense, ancestors(compressed.parents))
    np.testing.assert_array_equal(unpack_words(specdec.compressed_packed_mask(compressed), 7), dense)
    np.testing.assert_array_equal(specdec.compressed_positions(compressed, 5),
                                  5 + compressed.offsets)
    tree, node_of = specdec.compressed_to_draft_tree(compressed)
    tree.validate(8)
    np.testing.assert_array_equal(tree.tokens[node_of], compressed.tokens)
    np.testing.assert_array_equal(specdec.tree_positions(tree, 5),
                                  specdec.compressed_positions(compressed, 5)[np.argsort(node_of)])
    with pytest.raises(specdec.Error) as caught:
        specdec.compress_beams(beams, 5)
    assert caught.value.argument == "beams[2][0]"


def test_trtllm_export_is_the_mask_with_a_root_column(trees):
    for tree in trees:
        n = len(tree)
        mask, offsets, paths = specdec.export_trtllm(tree)
        assert mask.dtype == np.int32 and mask.shape == (n + 1, (n + 32) // 32)
        expected = np.zeros((n + 1, n + 1), np.uint8)
        expected[:, 0] = 1
        expected[1:, 1:] = ancestors(tree.parents)
        np.testing.assert_array_equal(unpack_words(mask.view(np.uint32), n + 1), expected)
        np.testing.assert_array_equal(offsets, np.concatenate([[0], tree.depths]))
        slot_paths = specdec.root_to_leaf_paths(tree, width=tree.max_depth() + 1)
        np.testing.assert_array_equal(paths[:, 0], 0)
        np.testing.assert_array_equal(paths[:, 1:], np.where(slot_paths[:, :-1] >= 0,
                                                             slot_paths[:, :-1] + 1, -1))
    with pytest.raises(specdec.Error) as caught:
        specdec.export_trtllm(trees[-1], path_rows=1)
    assert caught.value.argument == "path_rows"


def test_flashinfer_mask_bits(trees):
    context = 5
    for tree in trees:
        n = len(tree)
        for include_root in (False, True):
            packed = specdec.export_flashinfer_mask(tree, context, include_root)
            rows = n + include_root
            bits = np.unpackbits(packed, bitorder="little")[: rows * (context + n)]
            assert np.unpackbits(packed, bitorder="little")[rows * (context + n):].sum() == 0
            expected = np.zeros((rows, context + n), np.uint8)
            expected[:, :context] = 1
            expected[include_root:, context:] = ancestors(tree.parents)
            np.testing.assert_array_equal(bits.reshape(rows, context + n), expected)
    batch, indptr = specdec.export_flashinfer_masks(trees[:3], [5, 6, 7], True)
    for b, tree in enumerate(trees[:3]):
        np.testing.assert_array_equal(batch[indptr[b]:indptr[b + 1]],
                                      specdec.export_flashinfer_mask(tree, 5 + b, True))


def test_sglang_retrieve_lists(trees):
    for tree in trees:
        index, next_token, next_sibling = specdec.export_sglang(tree, index_base=100)
        assert index.dtype == np.int64 and index.tolist() == list(range(100, 100 + len(tree) + 1))
        for slot in range(len(tree) + 1):
            children = specdec.children_of(tree, slot - 1) + 1  # node ids -> slots
            walked, child = [], next_token[slot]
            while child != -1:
                walked.append(child)
                child = next_sibling[child]
            assert walked == children.tolist()


def test_tree_batch_view_of_a_tree(trees):
    tree = trees[3]
    batch = specdec.TreeBatch.from_tree(tree, 12)
    assert batch.size() == len(batch) == len(tree) and batch.rows() == len(tree) + 1
    assert batch.committed_length == 12 and batch.root_position() == 11
    np.testing.assert_array_equal(batch.tokens, tree.tokens)
    np.testing.assert_array_equal(batch.parents, tree.parents)
    np.testing.assert_array_equal(batch.positions, specdec.tree_positions(tree, 12))
    assert [batch.depth(i) for i in range(len(tree))] == tree.depths.tolist()
    np.testing.assert_array_equal(batch.dense_mask(), specdec.build_dense_mask(tree))
    assert batch.tree() == tree
    with pytest.raises(specdec.Error) as caught:
        batch.depth(len(tree))
    assert caught.value.argument == "node"
    with pytest.raises(specdec.Error) as caught:
        specdec.TreeBatch.from_tree(tree, 0)
    assert caught.value.argument == "committed_length"
