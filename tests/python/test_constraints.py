"""Constrained chain and tree batches from logits: each call equals the unconstrained one on
logits transformed in NumPy as vLLM transforms them (penalties, then masked ids set to -inf), for
the same streams, token for token; bad constraints are named, and check=False returns status
words."""

import numpy as np
import pytest

import specdec

V = 70  # three mask words, the last one partial
OFFSETS = np.array([0, 3, 3, 5, 9], np.int32)  # four sequences of 3, 0, 2 and 4 drafts
B = len(OFFSETS) - 1
WARPS = [specdec.Warp(), specdec.Warp(temperature=0.7), specdec.Warp(top_k=20),
         specdec.Warp(top_p=0.9)]


def streams(seed):
    return [specdec.RandomStream(seed=seed, sequence=b) for b in range(B)]


def allowed_mask(bitmask_row):
    """The tokens a packed int32 mask row allows, as V booleans."""
    words = bitmask_row.view(np.uint32)
    return ((words[np.arange(V) >> 5] >> (np.arange(V) & 31).astype(np.uint32)) & 1) == 1


def chain_prefixes(drafts):
    """(row, sequence, draft prefix) of every target row of the chain batch."""
    return [(OFFSETS[b] + b + r, b, drafts[OFFSETS[b]:OFFSETS[b] + r])
            for b in range(B) for r in range(OFFSETS[b + 1] - OFFSETS[b] + 1)]


def transform(logits, prefixes, c):
    """vLLM's order: repetition, then frequency and presence penalties, then the masks; the
    history of a row is its sequence's output, then the row's draft prefix."""
    out = logits.copy()
    for row, b, prefix in prefixes:
        history = list(c["output_token_ids"][b]) + list(prefix)
        counts = np.bincount(np.array(history, np.int64), minlength=V)
        x = logits[row].copy()
        seen = (counts > 0) | np.isin(np.arange(V), c["prompt_token_ids"][b])
        rep = np.float32(c["repetition_penalty"][b])
        x = np.where(seen, np.where(x > 0, x / rep, x * rep), x).astype(np.float32)
        x = x - np.float32(c["frequency_penalty"][b]) * counts.astype(np.float32)
        x = x - np.where(counts > 0, np.float32(c["presence_penalty"][b]), np.float32(0))
        keep = allowed_mask(c["bitmask"][row])
        if c["allowed_token_ids"][b] is not None:
            keep &= np.isin(np.arange(V), c["allowed_token_ids"][b])
        if len(c["output_token_ids"][b]) + len(prefix) < c["min_tokens"][b]:
            keep[c["stop_token_ids"][b]] = False
        for word in c["bad_words"][b]:
            if len(word) - 1 <= len(history) and \
                    list(history[len(history) - len(word) + 1:]) == list(word[:-1]):
                keep[word[-1]] = False
        out[row] = np.where(keep, x, -np.inf).astype(np.float32)
    return out


def random_constraints(rng, row_ranges, paths):
    """Constraints of every kind for len(row_ranges) sequences, sequence b owning target rows
    row_ranges[b] = (first, end); each has a safe token (allowed by all its rows) so no row of
    the transformed logits is empty; bad words end some of the draft paths `paths[b]`."""
    count = len(row_ranges)
    rows = row_ranges[-1][1]
    safe = rng.integers(0, V, size=count)
    bits = rng.random((rows, V)) < 0.6
    for b, (first, end) in enumerate(row_ranges):
        bits[first:end, safe[b]] = True
    packed = np.zeros((rows, 3), np.uint32)
    for k in range(V):
        packed[:, k >> 5] |= bits[:, k].astype(np.uint32) << np.uint32(k & 31)
    c = {"bitmask": packed.view(np.int32),
         "allowed_token_ids": [None if rng.random() < 0.3 else
                               np.union1d(rng.choice(V, 30, replace=False), [s]).astype(np.int32)
                               for s in safe],
         "prompt_token_ids": [rng.integers(0, V, size=rng.integers(0, 8)).astype(np.int32)
                              for _ in range(count)],
         "output_token_ids": [rng.integers(0, V, size=rng.integers(0, 6)).astype(np.int32)
                              for _ in range(count)],
         "min_tokens": rng.integers(0, 8, size=count).astype(np.int32),
         "repetition_penalty": rng.uniform(0.5, 3.0, size=count).astype(np.float32),
         "frequency_penalty": rng.uniform(-1.0, 2.0, size=count).astype(np.float32),
         "presence_penalty": rng.uniform(-1.0, 2.0, size=count).astype(np.float32)}
    others = [np.setdiff1d(np.arange(V), [s]) for s in safe]
    c["stop_token_ids"] = [rng.choice(o, rng.integers(0, 4), replace=False).astype(np.int32)
                           for o in others]
    # Words ending draft paths (so they bite) or anywhere, never in the safe token.
    c["bad_words"] = []
    for b in range(count):
        words = []
        for _ in range(rng.integers(0, 4)):
            length = rng.integers(1, 4)
            word = list(rng.choice(others[b], length))
            if paths[b] and rng.random() < 0.5:
                word = list(paths[b][rng.integers(len(paths[b]))][-length:])
                if word[-1] == safe[b]:
                    continue
            words.append(np.array(word, np.int32))
        c["bad_words"].append(words)
    return c


def random_case(seed):
    """Chain logits, drafts drawn from the warped draft rows, and random constraints."""
    rng = np.random.default_rng(seed)
    rows = OFFSETS[-1] + B
    target = rng.normal(size=(rows, V)).astype(np.float32) * 2
    draft = np.empty((OFFSETS[-1], V), np.float32)
    drafts = np.empty(OFFSETS[-1], np.int32)
    for b in range(B):
        for i in range(OFFSETS[b], OFFSETS[b + 1]):
            draft[i] = target[i + b] + rng.normal(size=V).astype(np.float32)
            p = np.asarray(specdec.warp_logits(WARPS[b], draft[i]), np.float64)
            drafts[i] = rng.choice(V, p=p / p.sum())
    ranges = [(OFFSETS[b] + b, OFFSETS[b + 1] + b + 1) for b in range(B)]
    paths = [[drafts[OFFSETS[b]:i + 1] for i in range(OFFSETS[b], OFFSETS[b + 1])]
             for b in range(B)]
    return target, draft, drafts, random_constraints(rng, ranges, paths)


TREE_OFFSETS = np.array([0, 5, 5, 9], np.int32)  # three trees of 5, 0 and 4 nodes
TREES = len(TREE_OFFSETS) - 1


def random_tree_case(seed):
    """Tree logits, random trees whose children are drawn (without replacement among siblings)
    from the warped draft row of their parent, random constraints and each row's prefix."""
    rng = np.random.default_rng(seed)
    rows = TREE_OFFSETS[-1] + TREES
    target = rng.normal(size=(rows, V)).astype(np.float32) * 2
    draft = target + rng.normal(size=(rows, V)).astype(np.float32)
    tokens, parents, prefixes, paths = [], [], [], []
    for b in range(TREES):
        first = TREE_OFFSETS[b] + b
        local_tokens, local_parents, local_paths = [], [], []
        prefixes.append((first, b, []))
        for i in range(TREE_OFFSETS[b + 1] - TREE_OFFSETS[b]):
            # Parents in order keep the nodes in level order.
            parent = int(rng.integers(local_parents[-1] if local_parents else -1, i))
            p = np.asarray(specdec.warp_logits(WARPS[b], draft[first + 1 + parent]), np.float64)
            siblings = [t for t, q in zip(local_tokens, local_parents) if q == parent]
            p[siblings] = 0
            token = int(rng.choice(V, p=p / p.sum()))
            path = (local_paths[parent] if parent >= 0 else []) + [token]
            local_tokens.append(token)
            local_parents.append(parent)
            local_paths.append(path)
            prefixes.append((first + 1 + i, b, path))
        tokens += local_tokens
        parents += local_parents
        paths.append(local_paths)
    ranges = [(TREE_OFFSETS[b] + b, TREE_OFFSETS[b + 1] + b + 1) for b in range(TREES)]
    tree = dict(node_offsets=TREE_OFFSETS, tokens=np.array(tokens, np.int32),
                parents=np.array(parents, np.int32))
    return target, draft, tree, prefixes, random_constraints(rng, ranges, paths)


@pytest.mark.parametrize("seed", range(40))
def test_equals_the_unconstrained_call_on_transformed_logits(seed):
    target, draft, drafts, c = random_case(seed)
    common = dict(warps=WARPS, draft_tokens=drafts, streams=streams(seed), draft_offsets=OFFSETS)
    emitted, accepted = specdec.verify_chain_batch_logits_constrained(
        target_logits=target, draft_logits=draft, **common, **c)
    transformed = transform(target, chain_prefixes(drafts), c)
    expected = specdec.verify_chain_batch_logits(target_logits=transformed, draft_logits=draft,
                                                 **common)
    np.testing.assert_array_equal(emitted, expected[0])
    np.testing.assert_array_equal(accepted, expected[1])
    # Every emitted token is one the transform allows at its row.
    for b in range(B):
        for r, token in enumerate(emitted[OFFSETS[b] + b:OFFSETS[b] + b + accepted[b] + 1]):
            assert np.isfinite(transformed[OFFSETS[b] + b + r, token])


def warped_rows(rows, offsets, extra):
    """Each sequence's rows (offsets[b] + b * extra onwards, gamma_b + extra of them) warped by
    WARPS[b]."""
    out = np.empty_like(rows)
    for b in range(B):
        lo, hi = offsets[b] + b * extra, offsets[b + 1] + (b + 1) * extra
        out[lo:hi] = specdec.warp_logits(WARPS[b], rows[lo:hi])
    return out


@pytest.mark.parametrize("seed", range(20))
def test_draft_probs_equal_the_rows_verifier_on_transformed_rows(seed):
    target, draft, drafts, c = random_case(seed)
    probs = warped_rows(draft, OFFSETS, 0)
    common = dict(draft_tokens=drafts, streams=streams(seed), draft_offsets=OFFSETS)
    emitted, accepted = specdec.verify_chain_batch_draft_probs_constrained(
        target_logits=target, draft_probs=probs, warps=WARPS, **common, **c)
    rows = warped_rows(transform(target, chain_prefixes(drafts), c), OFFSETS, 1)
    expected = specdec.verify_chain_batch(target_rows=rows, draft_rows=probs, **common)
    np.testing.assert_array_equal(emitted, expected[0])
    np.testing.assert_array_equal(accepted, expected[1])


def test_draft_probs_reject_a_placeholder_and_name_their_rows():
    target, draft, drafts, c = random_case(0)
    probs = warped_rows(draft, OFFSETS, 0)
    drafts[OFFSETS[0]] = -1  # sequence 0's first draft: vLLM's placeholder
    args = dict(target_logits=target, warps=WARPS, draft_tokens=drafts, draft_offsets=OFFSETS)
    _, accepted = specdec.verify_chain_batch_draft_probs_constrained(
        draft_probs=probs, streams=streams(0), **args)
    assert accepted[0] == 0
    with pytest.raises(specdec.Error) as caught:
        specdec.verify_chain_batch_draft_probs_constrained(draft_probs=probs[1:],
                                                           streams=streams(0), **args)
    assert caught.value.argument.startswith("draft_probs")


@pytest.mark.parametrize("seed", range(20))
def test_target_only_equals_the_unconstrained_walk_on_transformed_logits(seed):
    target, _, drafts, c = random_case(seed)
    emitted, accepted = specdec.verify_chain_batch_target_only_logits_constrained(
        target_logits=target, warps=WARPS, draft_tokens=drafts, streams=streams(seed),
        draft_offsets=OFFSETS, **c)
    transformed = transform(target, chain_prefixes(drafts), c)
    for b, stream in enumerate(streams(seed)):
        rows = transformed[OFFSETS[b] + b:OFFSETS[b + 1] + b + 1]
        verdict, tokens = specdec.verify_chain_target_only_logits(
            WARPS[b], rows, drafts[OFFSETS[b]:OFFSETS[b + 1]], stream)
        assert accepted[b] == verdict.accepted
        np.testing.assert_array_equal(emitted[OFFSETS[b] + b:OFFSETS[b] + b + len(tokens)], tokens)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("draft_rows", [True, False])
def test_trees_equal_the_unconstrained_walk_on_transformed_logits(seed, draft_rows):
    target, draft, tree, prefixes, c = random_tree_case(seed)
    tree_streams = [specdec.RandomStream(seed=seed, sequence=b) for b in range(TREES)]
    if draft_rows:
        got = specdec.verify_tree_batch_logits_constrained(
            specdec.Recursive(), **tree, target_logits=target, draft_logits=draft,
            warps=WARPS[:TREES], streams=tree_streams, **c)
    else:
        got = specdec.verify_tree_batch_target_only_logits_constrained(
            **tree, target_logits=target, warps=WARPS[:TREES], streams=tree_streams, **c)
    accepted_nodes, accepted, final_tokens, bonus = got
    transformed = transform(target, prefixes, c)
    for b in range(TREES):
        nodes = slice(TREE_OFFSETS[b], TREE_OFFSETS[b + 1])
        rows = slice(TREE_OFFSETS[b] + b, TREE_OFFSETS[b + 1] + b + 1)
        one = specdec.DraftTree(tree["tokens"][nodes], tree["parents"][nodes])
        if draft_rows:
            verdict, path = specdec.verify_tree_logits(specdec.Recursive(), WARPS[b], one,
                                                       transformed[rows], draft[rows],
                                                       tree_streams[b])
        else:
            verdict, path = specdec.verify_tree_target_only_logits(WARPS[b], one,
                                                                   transformed[rows],
                                                                   tree_streams[b])
        assert (accepted[b], final_tokens[b], bool(bonus[b])) == \
            (verdict.accepted, verdict.token, verdict.bonus)
        np.testing.assert_array_equal(accepted_nodes[nodes][:len(path)], path)


def test_the_constraints_change_the_outcome():
    """The comparison above is not vacuous: the constraints bite in most cases."""
    changed = 0
    for seed in range(40):
        target, draft, drafts, c = random_case(seed)
        common = dict(target_logits=target, draft_logits=draft, warps=WARPS, draft_tokens=drafts,
                      streams=streams(seed), draft_offsets=OFFSETS)
        got = specdec.verify_chain_batch_logits_constrained(**common, **c)
        plain = specdec.verify_chain_batch_logits(**common)
        changed += not np.array_equal(got[0], plain[0])
    assert changed >= 20
    changed = 0
    for seed in range(30):
        target, draft, tree, _, c = random_tree_case(seed)
        common = dict(**tree, target_logits=target, draft_logits=draft, warps=WARPS[:TREES],
                      streams=[specdec.RandomStream(seed=seed, sequence=b) for b in range(TREES)])
        got = specdec.verify_tree_batch_logits_constrained(specdec.Recursive(), **common, **c)
        plain = specdec.verify_tree_batch_logits_constrained(specdec.Recursive(), **common)
        changed += not (np.array_equal(got[0], plain[0]) and np.array_equal(got[2], plain[2]))
    assert changed >= 15


def test_a_row_after_a_forbidden_draft_token_is_never_read():
    """Sequence 0's first draft token is masked at row 0: rows 1.. allow nothing, unread."""
    target, draft, drafts, _ = random_case(0)
    bitmask = np.full((len(target), 3), -1, np.int32)
    t = drafts[0]
    bitmask[0, t >> 5] = np.int32(np.uint32(0xFFFFFFFF) ^ np.uint32(1 << (t & 31)))
    bitmask[1:4] = 0
    common = dict(target_logits=target, draft_logits=draft, warps=WARPS, draft_tokens=drafts,
                  streams=streams(0), draft_offsets=OFFSETS)
    emitted, accepted = specdec.verify_chain_batch_logits_constrained(**common, bitmask=bitmask)
    assert accepted[0] == 0 and emitted[0] != t
    full = bitmask.copy()
    full[1:4] = -1
    expected = specdec.verify_chain_batch_logits_constrained(**common, bitmask=full)
    np.testing.assert_array_equal(emitted, expected[0])


def call(check=True, **constraints):
    target, draft, drafts, _ = random_case(1)
    return specdec.verify_chain_batch_logits_constrained(
        target_logits=target, draft_logits=draft, warps=WARPS, draft_tokens=drafts,
        streams=streams(1), draft_offsets=OFFSETS, check=check, **constraints)


def argument_of(thunk):
    with pytest.raises(specdec.Error) as error:
        thunk()
    return error.value.argument


class FakeCudaTensor:
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


def test_bad_constraints_are_named():
    rows = OFFSETS[-1] + B
    assert argument_of(lambda: call(bitmask=np.full((rows, 2), -1, np.int32))) == "bitmask"
    empty_row = np.full((rows, 3), -1, np.int32)
    empty_row[OFFSETS[2] + 2] = 0  # sequence 2's first row: always read
    assert argument_of(lambda: call(bitmask=empty_row)) == "bitmask[2][0]"
    assert argument_of(lambda: call(allowed_token_ids=[None, None, None, [V]])) == \
        "allowed_token_ids[3][0]"
    assert argument_of(lambda: call(stop_token_ids=[[1], [-1], [], []])) == "stop_token_ids[1][0]"
    assert argument_of(lambda: call(
        repetition_penalty=np.array([1, 0, 1, 1], np.float32))).startswith("repetition_penalty")
    assert argument_of(lambda: call(
        frequency_penalty=np.array([np.nan, 0, 0, 0], np.float32))).startswith("frequency_penalty")
    assert argument_of(lambda: call(min_tokens=np.array([0, 0, -1, 0], np.int32))).startswith(
        "min_tokens")
    assert argument_of(lambda: call(bad_words=[[[1, V]], [], [], []])).startswith("bad_words")
    assert argument_of(lambda: call(bad_words=[[[]], [], [], []])).startswith("bad_words")
    assert argument_of(lambda: call(output_token_ids=[[1], [V], [], []])) == \
        "output_token_ids[1][0]"
    assert argument_of(lambda: call(prompt_token_ids=[[1]])) == "prompt_token_ids"
    assert argument_of(lambda: call(min_tokens=np.array([1, 2], np.int32))) == "min_tokens"
    assert argument_of(lambda: call(bitmask=FakeCudaTensor())) == "bitmask"


def test_check_false_fails_the_bad_sequence_alone():
    good = call()
    rows = OFFSETS[-1] + B
    empty_row = np.full((rows, 3), -1, np.int32)
    empty_row[OFFSETS[2] + 2] = 0
    emitted, accepted, status = call(check=False, bitmask=empty_row,
                                     stop_token_ids=[[], [], [], [V]], min_tokens=[0, 0, 0, 9])
    assert list(status) == [0, 0, int(specdec.SequenceStatus.BAD_ROW),
                            int(specdec.SequenceStatus.TOKEN_OUTSIDE_VOCAB), 2]
    assert list(accepted) == [good[1][0], good[1][1], -1, -1]
    np.testing.assert_array_equal(emitted[:OFFSETS[2] + 2], good[0][:OFFSETS[2] + 2])
    assert (emitted[OFFSETS[2] + 2:] == -1).all()


def test_tree_errors_are_named_and_check_false_fails_the_tree_alone():
    target, draft, tree, _, _ = random_tree_case(3)
    common = dict(**tree, target_logits=target, draft_logits=draft, warps=WARPS[:TREES],
                  streams=[specdec.RandomStream(seed=3, sequence=b) for b in range(TREES)])
    bitmask = np.full((len(target), 3), -1, np.int32)
    bitmask[TREE_OFFSETS[1] + 1] = 0  # tree 1's root row (a tree of no nodes: always read)
    assert argument_of(lambda: specdec.verify_tree_batch_logits_constrained(
        specdec.Recursive(), **common, bitmask=bitmask)) == "bitmask[1][0]"
    assert argument_of(lambda: specdec.verify_tree_batch_logits_constrained(
        specdec.Recursive(), **common, bitmask=bitmask[:, :2])) == "bitmask"
    assert argument_of(lambda: specdec.verify_tree_batch_logits_constrained(
        specdec.Recursive(), **dict(common, target_logits=target[:-1]))) == "target_logits"
    good = specdec.verify_tree_batch_logits_constrained(specdec.Recursive(), **common)
    *outputs, status = specdec.verify_tree_batch_logits_constrained(
        specdec.Recursive(), **common, bitmask=bitmask, check=False)
    assert list(status) == [0, int(specdec.SequenceStatus.BAD_ROW), 0, 1]
    assert list(outputs[1]) == [good[1][0], -1, good[1][2]]
    np.testing.assert_array_equal(outputs[0], good[0])


def test_torch_tensors_and_half_logits():
    """torch in, torch out; float16 logits are widened exactly, as verify_chain_batch_logits."""
    torch = pytest.importorskip("torch")
    target, draft, drafts, c = random_case(5)
    half_target, half_draft = target.astype(np.float16), draft.astype(np.float16)
    common = dict(warps=WARPS, streams=streams(5), draft_tokens=drafts, draft_offsets=OFFSETS)
    expected = specdec.verify_chain_batch_logits_constrained(
        target_logits=half_target.astype(np.float32), draft_logits=half_draft.astype(np.float32),
        **common, **c)
    tensors = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in c.items()}
    got = specdec.verify_chain_batch_logits_constrained(
        target_logits=torch.from_numpy(half_target), draft_logits=torch.from_numpy(half_draft),
        **dict(common, draft_tokens=torch.from_numpy(drafts)), **tensors)
    assert isinstance(got[0], torch.Tensor)
    np.testing.assert_array_equal(got[0].numpy(), expected[0])
    np.testing.assert_array_equal(got[1].numpy(), expected[1])
