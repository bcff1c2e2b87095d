"""specdec.compat.sglang: SGLang's published two-sequence vectors, its coin walk reproduced token
for token, the distribution of the emitted tokens, the vocabulary boundary, greedy trees, the
tree layout conversion, and bad input."""

import numpy as np
import pytest

import specdec
from specdec.compat.sglang import tree_speculative_sampling_target_only, verify_tree_greedy

from conftest import chi_square_p_value, requires_torch, run_example_here, torch

# ---- SGLang's published case: bs = 2, 6 slots, V = 20, temperature 0.01 -----------------------

CANDIDATES = [[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]]
INDEX = [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
NEXT_TOKEN = [[1, 2, -1, 4, 5, -1], [4, 2, 3, -1, 5, -1]]
NEXT_SIBLING = [[-1, 3, -1, -1, -1, -1], [-1, -1, -1, -1, 1, -1]]
PUBLISHED = [
    (1.0, 1.0, [3, -1, -1, 4, 5, 18, 11, -1, -1, -1, 12, 18], [[0, 3, 4, 5], [6, 10, 11, -1]],
     [3, 2]),
    (0.0, 0.0, [1, 2, 18, -1, -1, -1, 11, -1, -1, -1, 12, 18], [[0, 1, 2, -1], [6, 10, 11, -1]],
     [2, 2]),
]


def published_logits():
    logits = np.ones((2, 6, 20), np.float32)
    for b, s, token in ((0, 0, 3), (0, 3, 4), (0, 4, 5), (1, 0, 11), (1, 4, 12)):
        logits[b, s, token] = 10
    for b in range(2):
        for s in range(6):
            if logits[b, s].max() < 10:
                logits[b, s, 18] = 10
    return logits


def softmax(logits, temperature=1.0):
    z = np.exp((logits - logits.max(axis=-1, keepdims=True)) / temperature)
    return (z / z.sum(axis=-1, keepdims=True)).astype(np.float32)


def outputs(batch, slots, steps):
    return (np.full(batch * slots, -1, np.int32), np.full((batch, steps), -1, np.int32),
            np.zeros(batch, np.int32))


def links(kind=np.asarray):
    return {name: kind(np.array(value, np.int64)) for name, value in
            (("index", INDEX), ("next_token", NEXT_TOKEN), ("next_sibling", NEXT_SIBLING))}


@pytest.mark.parametrize("single, acc, predicts, accept_index, accept_num", PUBLISHED)
@pytest.mark.parametrize("spelling", ["retrive", "retrieve"])
@pytest.mark.parametrize("own_uniforms", [True, False])
def test_published_vectors(single, acc, predicts, accept_index, accept_num, spelling,
                           own_uniforms):
    rng = np.random.default_rng(0)
    out = outputs(2, 6, 4)
    coins = {}
    if own_uniforms:
        coins = dict(uniform_samples=rng.random((2, 6), dtype=np.float32),
                     uniform_samples_for_final_sampling=rng.random(2, dtype=np.float32))
    target = softmax(published_logits(), 0.01)
    tree_speculative_sampling_target_only(
        *out, candidates=np.array(CANDIDATES, np.int64),
        **{f"{spelling}_{k}": v for k, v in links().items()}, target_probs=target,
        draft_probs=np.zeros_like(target), threshold_single=single, threshold_acc=acc,
        deterministic=True, **coins)
    assert out[0].tolist() == predicts
    assert out[1].tolist() == accept_index
    assert out[2].tolist() == accept_num


@requires_torch
def test_published_vectors_torch_in_place():
    single, acc, predicts, accept_index, accept_num = PUBLISHED[0]
    predicts_t = torch.full((12,), -1, dtype=torch.int32)
    index_t = torch.full((2, 4), -1, dtype=torch.int32)
    num_t = torch.zeros(2, dtype=torch.int32)
    target = torch.softmax(torch.from_numpy(published_logits()) / 0.01, dim=-1)
    tree_speculative_sampling_target_only(
        predicts=predicts_t, accept_index=index_t, accept_token_num=num_t,
        candidates=torch.tensor(CANDIDATES), retrieve_index=torch.tensor(INDEX),
        retrieve_next_token=torch.tensor(NEXT_TOKEN),
        retrieve_next_sibling=torch.tensor(NEXT_SIBLING),
        uniform_samples=torch.rand(2, 6), uniform_samples_for_final_sampling=torch.rand(2),
        target_probs=target, draft_probs=torch.zeros_like(target), threshold_single=single,
        threshold_acc=acc, deterministic=True)
    assert predicts_t.tolist() == predicts
    assert index_t.tolist() == accept_index
    assert num_t.tolist() == accept_num


def test_signature_without_draft_probs_positionally():
    # sgl-kernel versions without draft_probs: (..., target_probs, threshold_single,
    # threshold_acc, deterministic) by position.
    single, acc, predicts, accept_index, accept_num = PUBLISHED[1]
    out = outputs(2, 6, 4)
    rng = np.random.default_rng(1)
    tree_speculative_sampling_target_only(
        *out, np.array(CANDIDATES, np.int64), *links().values(),
        rng.random((2, 6), dtype=np.float32), rng.random(2, dtype=np.float32),
        softmax(published_logits(), 0.01), single, acc, True)
    assert out[0].tolist() == predicts and out[1].tolist() == accept_index
    assert out[2].tolist() == accept_num


def test_greedy_published_tree():
    # Greedy verification of the same trees with the targets' argmaxes: the (1, 1) result.
    _, _, predicts, accept_index, accept_num = PUBLISHED[0]
    out = outputs(2, 6, 4)
    verify_tree_greedy(*out, np.array(CANDIDATES, np.int64), *links().values(),
                       target_predict=published_logits().argmax(axis=-1).astype(np.int64))
    assert out[0].tolist() == predicts
    assert out[1].tolist() == accept_index
    assert out[2].tolist() == accept_num


# ---- SGLang's coin walk, token for token -----------------------------------------------------


def reference_walk(candidates, index, next_token, next_sibling, coins, final, target, draft,
                   steps, single, acc):
    """The walk SGLang's kernel documents, in float32, one sequence: returns (predicts writes,
    accept_index row, accepted count)."""
    acc = np.float32(max(acc, 1e-9))
    draft = draft.copy()
    writes, accepted_index, row = {}, [int(index[0])], 0
    coin, mass, last = coins[0], np.float32(0), int(index[0])
    count = 0
    for _ in range(1, steps):
        child = next_token[row]
        while child != -1:
            p = target[row, candidates[child]]
            mass = np.float32(mass + p)
            if coin <= mass / acc or p >= single:
                writes[last] = int(candidates[child])
                count += 1
                accepted_index.append(int(index[child]))
                last, row, coin, mass = int(index[child]), child, coins[child], np.float32(0)
                break
            draft[row, candidates[child]] = p
            child = next_sibling[child]
        if child == -1:
            break
    residual = target[row] - (0 if count == steps - 1 else draft[row])
    residual = np.maximum(residual, 0).astype(np.float64)
    threshold = final * residual.sum()
    writes[last] = int(np.flatnonzero(np.cumsum(residual) > threshold)[0])
    return writes, accepted_index, count


def random_trees(rng, batch, nodes, vocab):
    """EAGLE-like trees (distinct sibling tokens) in SGLang's layout, slots shuffled."""
    candidates = np.zeros((batch, nodes + 1), np.int64)
    first = np.full((batch, nodes + 1), -1, np.int64)
    nxt = np.full((batch, nodes + 1), -1, np.int64)
    for b in range(batch):
        parents, tokens = [], []
        for i in range(nodes):
            parent = int(rng.integers(-1, i))
            siblings = [t for j, t in enumerate(tokens) if parents[j] == parent]
            tokens.append(int(rng.choice([t for t in range(vocab) if t not in siblings])))
            parents.append(parent)
        next_token = np.full(nodes + 1, -1, np.int64)  # slot i + 1 holds node i
        next_sibling = np.full(nodes + 1, -1, np.int64)
        for i in reversed(range(nodes)):
            next_sibling[i + 1] = next_token[parents[i] + 1]
            next_token[parents[i] + 1] = i + 1
        order = np.concatenate([[0], 1 + rng.permutation(nodes)])  # new slot of each old slot
        relabel = lambda v: np.where(v < 0, -1, order[np.maximum(v, 0)])
        candidates[b, order] = np.concatenate([[0], tokens])
        first[b, order] = relabel(next_token)
        nxt[b, order] = relabel(next_sibling)
    index = np.arange(batch * (nodes + 1), dtype=np.int64).reshape(batch, nodes + 1)
    return candidates, index, first, nxt


@pytest.mark.parametrize("single, acc", [(1.0, 1.0), (0.3, 0.8), (0.0, 0.0), (1.0, 0.5)])
def test_own_uniforms_give_sglangs_tokens(single, acc):
    rng = np.random.default_rng(int(single * 10 + acc * 100))
    batch, nodes, vocab, steps = 64, 7, 6, 4
    candidates, index, first, nxt = random_trees(rng, batch, nodes, vocab)
    target = rng.dirichlet(np.full(vocab, 0.7), size=(batch, nodes + 1)).astype(np.float32)
    draft = np.zeros_like(target)
    coins = rng.random((batch, nodes + 1), dtype=np.float32)
    final = rng.random(batch, dtype=np.float32)
    out = outputs(batch, nodes + 1, steps)
    tree_speculative_sampling_target_only(*out, candidates, index, first, nxt, coins, final,
                                          target, draft, single, acc)
    for b in range(batch):
        writes, accepted_index, count = reference_walk(
            candidates[b], index[b] - index[b, 0], first[b], nxt[b], coins[b], final[b],
            target[b], draft[b], steps, np.float32(single), acc)
        assert out[2][b] == count
        assert out[1][b, :count + 1].tolist() == [i + index[b, 0] for i in accepted_index]
        for position, token in writes.items():
            assert out[0][position + index[b, 0]] == token
    assert (draft == 0).all()  # read, never written


# ---- distribution ----------------------------------------------------------------------------


@pytest.mark.parametrize("own_uniforms", [True, False])
def test_first_two_tokens_follow_the_target(own_uniforms):
    # False-failure probability about 2e-6 (two tests at 1e-6). At thresholds (1, 1) the first
    # emitted token follows the root's row, and after accepting child 1 (token 2) the second
    # follows that child's row. Root children tokens 2, 5, 0 (slots 1, 2, 3), slot 1 -> {1, 2}.
    rng = np.random.default_rng(5 if own_uniforms else 6)
    batch, vocab = 6000, 8
    root = rng.dirichlet(np.full(vocab, 5.0)).astype(np.float32)
    root[2] = max(root[2], 0.3)
    root /= root.sum()
    child = rng.dirichlet(np.full(vocab, 5.0)).astype(np.float32)
    target = np.tile(rng.dirichlet(np.full(vocab, 5.0)).astype(np.float32), (batch, 6, 1))
    target[:, 0], target[:, 1] = root, child
    candidates = np.tile(np.array([0, 2, 5, 0, 1, 2], np.int64), (batch, 1))
    first = np.tile(np.array([1, 4, -1, -1, -1, -1], np.int64), (batch, 1))
    nxt = np.tile(np.array([-1, 2, 3, -1, 5, -1], np.int64), (batch, 1))
    index = np.arange(batch * 6, dtype=np.int64).reshape(batch, 6)
    coins = {}
    if own_uniforms:
        coins = dict(uniform_samples=rng.random((batch, 6), dtype=np.float32),
                     uniform_samples_for_final_sampling=rng.random(batch, dtype=np.float32))
    out = outputs(batch, 6, 3)
    tree_speculative_sampling_target_only(*out, candidates, index, first, nxt,
                                          target_probs=target, seed=11, **coins)
    predicts, accept_index, _ = out
    first_tokens = predicts[accept_index[:, 0]]
    assert chi_square_p_value(np.bincount(first_tokens, minlength=vocab),
                              root.astype(np.float64) * batch) > 1e-6
    took_slot_1 = accept_index[:, 1] == index[:, 1]
    second = predicts[accept_index[took_slot_1, 1]]
    assert chi_square_p_value(np.bincount(second, minlength=vocab),
                              child.astype(np.float64) * took_slot_1.sum()) > 1e-6


def test_ids_stay_in_the_vocabulary_and_placeholders_are_never_tried():
    # Token V - 1 is accepted at the boundary; a -1 placeholder child (and V) is never tried,
    # not even at thresholds (0, 0), which take the first child that can be tried.
    vocab = 7
    target = np.zeros((3, 4, vocab), np.float32)
    target[..., vocab - 1] = 1.0
    candidates = np.array([[0, -1, vocab - 1, 3], [0, vocab, 2, vocab - 1], [0, -1, -1, -1]],
                          np.int64)
    first = np.array([[1, -1, -1, -1], [1, -1, -1, -1], [1, -1, -1, -1]], np.int64)
    nxt = np.array([[-1, 2, 3, -1], [-1, 2, 3, -1], [-1, 2, 3, -1]], np.int64)
    index = np.arange(12, dtype=np.int64).reshape(3, 4)
    for single, acc in ((1.0, 1.0), (0.0, 0.0)):
        out = outputs(3, 4, 2)
        tree_speculative_sampling_target_only(*out, candidates, index, first, nxt,
                                              target_probs=target, threshold_single=single,
                                              threshold_acc=acc, seed=2)
        predicts, accept_index, accepted = out
        assert accept_index[:, 1].tolist() == [2, 6 if single == 0 else 7, -1]
        assert accepted.tolist() == [1, 1, 0]
        written = predicts[predicts != -1]
        assert ((written >= 0) & (written < vocab)).all()


def test_depth_is_limited_by_accept_index():
    # A chain of 4 certain drafts with room for 2: the walk stops at depth 2 and draws the next
    # token from that node's row.
    vocab = 5
    target = np.zeros((1, 5, vocab), np.float32)
    for s, token in enumerate([1, 2, 3, 4, 0]):
        target[0, s, token] = 1.0
    candidates = np.array([[0, 1, 2, 3, 4]], np.int64)
    first = np.array([[1, 2, 3, 4, -1]], np.int64)
    nxt = np.full((1, 5), -1, np.int64)
    out = outputs(1, 5, 3)
    tree_speculative_sampling_target_only(*out, candidates, np.arange(5)[None], first, nxt,
                                          target_probs=target, seed=0)
    assert out[1].tolist() == [[0, 1, 2]] and out[2].tolist() == [2]
    assert out[0].tolist() == [1, 2, 3, -1, -1]


# ---- the layout conversion -------------------------------------------------------------------


def test_parents_from_sibling_lists_round_trips_with_export_sglang():
    parents, slots = specdec.parents_from_sibling_lists(NEXT_TOKEN[1], NEXT_SIBLING[1])
    assert slots.tolist() == [4, 1, 5, 2, 3] and parents.tolist() == [-1, -1, 0, 1, 3]
    tree = specdec.DraftTree(np.array(CANDIDATES[1])[slots], parents)
    _, next_token, next_sibling = specdec.export_sglang(tree)
    again, _ = specdec.parents_from_sibling_lists(next_token, next_sibling)
    assert again.tolist() == parents.tolist()
    with pytest.raises(specdec.Error) as refused:
        specdec.parents_from_sibling_lists([1, 2, 1], [-1, -1, -1])
    assert refused.value.argument == "first_child[2]"


# ---- bad input -------------------------------------------------------------------------------


def call(**change):
    target = softmax(published_logits(), 0.01)
    args = dict(zip(("predicts", "accept_index", "accept_token_num"), outputs(2, 6, 4)))
    args.update(candidates=np.array(CANDIDATES, np.int64), retrive_index=np.array(INDEX),
                retrive_next_token=np.array(NEXT_TOKEN),
                retrive_next_sibling=np.array(NEXT_SIBLING),
                uniform_samples=np.full((2, 6), 0.5, np.float32),
                uniform_samples_for_final_sampling=np.full(2, 0.5, np.float32),
                target_probs=target, draft_probs=np.zeros_like(target))
    args.update(change)
    tree_speculative_sampling_target_only(**args)


def with_entry(array, where, value):
    array = np.array(array, np.int64)
    array[where] = value
    return array


@pytest.mark.parametrize("change, argument", [
    (dict(retrive_next_token=with_entry(NEXT_TOKEN, (0, 2), 0)), "retrive_next_token[0][2]"),
    (dict(retrive_next_token=with_entry(NEXT_TOKEN, (1, 4), 1)), "retrive_next_token[1][4]"),
    (dict(retrive_next_sibling=with_entry(NEXT_SIBLING, (0, 3), 6)), "retrive_next_sibling[0][3]"),
    (dict(retrive_next_sibling=with_entry(NEXT_SIBLING, (0, 1), -1)), "retrive_next_token[0]"),
    (dict(retrive_index=with_entry(INDEX, (1, 5), 12)), "retrive_index[1][5]"),
    (dict(retrive_index=None, retrieve_index=with_entry(INDEX, (1, 5), -1)),
     "retrieve_index[1][5]"),
    (dict(retrieve_index=np.array(INDEX)), "retrieve_index"),
    (dict(retrive_next_token=np.array(NEXT_TOKEN)[:, :5]), "retrive_next_token"),
    (dict(predicts=np.zeros(12, np.int64)), "predicts"),
    (dict(accept_index=np.zeros((3, 4), np.int32), accept_token_num=np.zeros(3, np.int32)),
     "accept_index"),
    (dict(accept_token_num=np.zeros(3, np.int32)), "accept_token_num"),
    (dict(uniform_samples=np.full((2, 6), 1.5, np.float32)), "uniform_samples[0][0]"),
    (dict(uniform_samples_for_final_sampling=None), "uniform_samples_for_final_sampling"),
    (dict(threshold_single=1.5), "threshold_single"),
    (dict(threshold_acc=-0.5), "threshold_acc"),
    (dict(target_probs=np.full((2, 6, 20), np.nan, np.float32)), "target_probs[0][0]"),
    (dict(target_probs=np.full((2, 6, 20), 0.5, np.float32)), "target_probs[0][0]"),
    (dict(target_probs=np.ones((2, 5, 20), np.float32) / 20), "target_probs"),
    (dict(draft_probs=np.zeros((2, 6, 19), np.float32)), "draft_probs"),
    (dict(candidates=np.array(CANDIDATES, np.float32)), "candidates"),
])
def test_bad_input_names_the_argument(change, argument):
    with pytest.raises(specdec.Error) as refused:
        call(**change)
    assert refused.value.argument == argument


def test_greedy_bad_input_names_the_argument():
    out = outputs(2, 6, 4)
    with pytest.raises(specdec.Error) as refused:
        verify_tree_greedy(*out, np.array(CANDIDATES, np.int64), *links().values(),
                           target_predict=np.zeros((2, 5), np.int64))
    assert refused.value.argument == "target_predict"
    with pytest.raises(specdec.Error) as refused:
        verify_tree_greedy(*out, np.array(CANDIDATES, np.int64), *links().values())
    assert refused.value.argument == "target_predict"


# ---- the engine-style example ----------------------------------------------------------------


@requires_torch
def test_engine_loop_example_matches_greedy_decoding(monkeypatch, capsys):
    out = run_example_here("engine_sglang_adapter.py", "--temperature", "0",
                           monkeypatch=monkeypatch, capsys=capsys)
    assert "every request matches the target's greedy decoding" in out
