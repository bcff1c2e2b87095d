"""Drafters from Python: i.i.d. and Gumbel-top-k draws against their definitions on the stream's
own uniforms and Gumbels, tree drafters over a Python draft-row callback, the batched levels
against the single-row forms, and the ReDrafter head (safetensors round trip included)."""

import itertools

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch

VOCAB = 9
RNG = np.random.default_rng(21)
TABLE = RNG.dirichlet(np.full(VOCAB, 0.6), size=VOCAB).astype(np.float32)
TABLE[:, 8] = 0.0  # a token the draft never proposes
TABLE /= TABLE.sum(axis=1, keepdims=True)
ROOT_TOKEN = 3
with np.errstate(divide="ignore"):
    LOG_TABLE = np.log(TABLE)  # -inf for token 8


def markov_rows(calls=None):
    """A draft_rows callback over TABLE: the row after node n is TABLE[token of n] (the root's
    token is ROOT_TOKEN)."""

    def rows_of(tree, nodes, rows):
        if calls is not None:
            calls.append(nodes.copy())
        tokens = tree.tokens
        for r, node in enumerate(nodes):
            rows[r] = TABLE[ROOT_TOKEN if node < 0 else tokens[node]]

    return rows_of


def test_sample_iid_is_the_inverse_cdf_of_the_streams_uniforms():
    stream = specdec.RandomStream(seed=5, position=3, domain=specdec.Domain.DRAFT)
    row = TABLE[0]
    tokens = specdec.sample_iid(row, stream, 12, first_draw=4)
    assert tokens.dtype == np.int32 and len(tokens) == 12
    assert tokens.tolist() == [specdec.sample(row, stream.uniform(4 + i)) for i in range(12)]
    assert 8 not in tokens.tolist()
    with pytest.raises(specdec.Error) as caught:
        specdec.sample_iid(row, stream, 0)
    assert caught.value.argument == "k"


def test_gumbel_top_k_is_the_top_of_the_perturbed_row():
    stream = specdec.RandomStream(seed=9, node=2)
    log_weights = LOG_TABLE[1]
    tokens, values = specdec.gumbel_top_k(log_weights, 5, stream, first_draw=7)
    perturbed = log_weights + stream.gumbels(VOCAB, first=7)
    order = np.argsort(-perturbed, kind="stable")[:5]
    np.testing.assert_array_equal(tokens, order)
    np.testing.assert_array_equal(values, perturbed[order])
    # Only 8 tokens are possible: asking for all 9 gives 8.
    tokens, values = specdec.gumbel_top_k_probabilities(TABLE[1], VOCAB, stream)
    assert len(tokens) == 8 and sorted(tokens.tolist()) == list(range(8))
    assert (np.diff(values) <= 0).all()
    with pytest.raises(specdec.Error) as caught:
        specdec.gumbel_top_k(log_weights, VOCAB + 1, stream)
    assert caught.value.argument == "k"
    with pytest.raises(specdec.Error) as caught:
        specdec.gumbel_top_k(np.full(VOCAB, np.nan, np.float32), 2, stream)
    assert caught.value.argument.startswith("log_weights")


def test_gumbel_top_k_reads_half_precision_rows():
    stream = specdec.RandomStream(seed=1)
    row = np.log(TABLE[2][:8]).astype(np.float16)
    tokens, _ = specdec.gumbel_top_k(row, 3, stream)
    expected, _ = specdec.gumbel_top_k(row.astype(np.float32), 3, stream)
    np.testing.assert_array_equal(tokens, expected)


def test_gumbel_top_k_batch_equals_each_row():
    rows = TABLE[:4]
    streams = [specdec.RandomStream(seed=3, sequence=s) for s in range(4)]
    tokens, values, counts = specdec.gumbel_top_k_batch(specdec.RowKind.PROBABILITIES, rows, 9,
                                                        streams)
    assert tokens.shape == (4, 9) and counts.tolist() == [8] * 4
    for r in range(4):
        single, single_values = specdec.gumbel_top_k_probabilities(rows[r], 9, streams[r])
        np.testing.assert_array_equal(tokens[r, :8], single)
        np.testing.assert_array_equal(values[r, :8], single_values)
        assert tokens[r, 8] == -1 and values[r, 8] == -np.inf
    with pytest.raises(specdec.Error):
        specdec.gumbel_top_k_batch(specdec.RowKind.PROBABILITIES, rows, 2, streams[:3])


def test_iid_chains_draw_each_child_from_its_parents_row():
    stream = specdec.RandomStream(seed=4, domain=specdec.Domain.DRAFT)
    calls = []
    drafted = specdec.draft_iid_chains(3, 4, VOCAB, markov_rows(calls), stream)
    assert isinstance(drafted, specdec.DraftedTree)
    tree = drafted.tree
    assert len(drafted) == 12 and tree.max_depth() == 4 and len(calls) == 4
    assert calls[0].tolist() == [-1] and calls[1].tolist() == [0, 1, 2]
    for c in range(3):
        assert tree.tokens[c] == specdec.sample(TABLE[ROOT_TOKEN], stream.at_node(0).uniform(c))
    for node in range(3, 12):
        parent = tree.parents[node]
        assert parent == node - 3
        expected = specdec.sample(TABLE[tree.tokens[parent]], stream.at_node(parent + 1).uniform(0))
        assert tree.tokens[node] == expected
    np.testing.assert_array_equal(drafted.row(-1), TABLE[ROOT_TOKEN])
    assert not drafted.has_row(11) and drafted.row_count() == 10
    assert drafted.row_index.tolist() == list(range(10)) + [-1] * 3
    np.testing.assert_array_equal(drafted.rows[drafted.row_index[1]], drafted.row(0))
    path_log = np.log(TABLE[ROOT_TOKEN][tree.tokens[0]]) + np.log(TABLE[tree.tokens[0]][tree.tokens[3]])
    assert drafted.log_probs[3] == pytest.approx(path_log, rel=1e-5)


def test_rsd_c_children_are_gumbel_top_k_of_the_parents_row():
    stream = specdec.RandomStream(seed=8, domain=specdec.Domain.DRAFT)
    drafted = specdec.draft_rsd_c([3, 2, 1], VOCAB, markov_rows(), stream)
    tree = drafted.tree
    assert len(tree) == 3 + 6 + 6
    for parent in [-1] + list(range(9)):
        children = specdec.children_of(tree, parent)
        row = TABLE[ROOT_TOKEN if parent < 0 else tree.tokens[parent]]
        expected, values = specdec.gumbel_top_k_probabilities(row, len(children),
                                                              stream.at_node(parent + 1))
        np.testing.assert_array_equal(tree.tokens[children], expected)
        np.testing.assert_array_equal(drafted.scores[children], values)
    with pytest.raises(specdec.Error) as caught:
        specdec.draft_rsd_c([3, 0], VOCAB, markov_rows(), stream)
    assert caught.value.argument == "branching[1]"


def test_rsd_s_levels_equal_the_batched_level():
    stream = specdec.RandomStream(seed=6, domain=specdec.Domain.DRAFT)
    width = 3
    drafted = specdec.draft_rsd_s(width, 3, VOCAB, markov_rows(), stream)
    tree = drafted.tree
    # Replay level by level with stochastic_beam_level_batch (one sequence).
    nodes, log_probs, scores, count = np.full((1, width), -1), np.zeros((1, width), np.float32), \
        np.zeros((1, width), np.float32), 1
    first = 0
    for depth in range(1, 4):
        rows = np.zeros((width, VOCAB), np.float32)
        for i in range(count):
            node = nodes[0, i]
            rows[i] = TABLE[ROOT_TOKEN if node < 0 else tree.tokens[node]]
        parents, tokens, next_log_probs, next_scores, counts = specdec.stochastic_beam_level_batch(
            rows, [count], nodes, log_probs, scores, [stream])
        level = np.flatnonzero(tree.depths == depth)
        assert counts[0] == len(level) == width
        np.testing.assert_array_equal(tokens[0], tree.tokens[level])
        np.testing.assert_array_equal(nodes[0, parents[0]], tree.parents[level])
        np.testing.assert_array_equal(next_scores[0], drafted.scores[level])
        np.testing.assert_array_equal(next_log_probs[0], drafted.log_probs[level])
        nodes, log_probs, scores, count = level[None, :], next_log_probs, next_scores, counts[0]
        first += len(level)


def test_beam_search_finds_the_most_probable_sequence():
    stream = specdec.RandomStream(seed=2)
    search, best = specdec.beam_search(VOCAB, 3, VOCAB, markov_rows(),
                                       specdec.BeamMode.DETERMINISTIC, stream)
    # With width = V, beam search is exact for length 3: compare with brute force.
    def log_prob(seq):
        previous, total = ROOT_TOKEN, 0.0
        for token in seq:
            total += np.log(float(TABLE[previous][token]))
            previous = token
        return total
    brute = max(itertools.product(range(8), repeat=3), key=log_prob)
    assert isinstance(best, specdec.BeamSearchResult)
    assert tuple(best.tokens.tolist()) == brute
    assert best.prefix_log_probs[-1] == pytest.approx(log_prob(brute), rel=1e-5)
    np.testing.assert_array_equal(search.tree.tokens[best.nodes], best.tokens)
    sampled_a = specdec.beam_search(2, 3, VOCAB, markov_rows(), specdec.BeamMode.SAMPLING, stream)[1]
    sampled_b = specdec.beam_search(2, 3, VOCAB, markov_rows(), specdec.BeamMode.SAMPLING, stream)[1]
    np.testing.assert_array_equal(sampled_a.tokens, sampled_b.tokens)


def test_draft_row_callbacks_are_checked_and_their_errors_kept():
    stream = specdec.RandomStream(seed=1)

    def bad_rows(tree, nodes, rows):
        rows[:] = 0.5

    with pytest.raises(specdec.Error) as caught:
        specdec.draft_rsd_s(2, 2, VOCAB, bad_rows, stream)
    assert caught.value.argument.startswith("draft_rows")
    error = RuntimeError("model went away")

    def raising(tree, nodes, rows):
        raise error

    with pytest.raises(RuntimeError) as caught:
        specdec.draft_iid_chains(2, 2, VOCAB, raising, stream)
    assert caught.value is error
    with pytest.raises(specdec.Error) as caught:
        specdec.draft_rsd_c([2], VOCAB, "not callable", stream)
    assert caught.value.argument == "draft_rows"


def random_head(seed=3):
    config = specdec.ReDrafterConfig(hidden=6, exit_dim=10, vocab=VOCAB, num_layers=2, top_k=5)
    return specdec.ReDrafterHead.random(config, seed)


def test_redrafter_step_gives_a_top_k_log_softmax():
    head = random_head()
    hidden = np.linspace(-1, 1, 6).astype(np.float32)
    state = np.zeros(6, np.float32)
    new_state, log_probs = specdec.redrafter_step(head, hidden, state, 2)
    assert (state == 0).all() and not (new_state == 0).all()
    assert log_probs.shape == (VOCAB,)
    kept = log_probs > -1000
    assert kept.sum() == 5 and np.exp(log_probs[kept]).sum() == pytest.approx(1, rel=1e-5)
    with pytest.raises(specdec.Error) as caught:
        specdec.redrafter_step(head, hidden[:5], state, 2)
    assert caught.value.argument == "hidden"


def test_redrafter_head_round_trips_through_safetensors(tmp_path):
    head = random_head()
    path = tmp_path / "head.safetensors"
    specdec.save_redrafter_head(path, head)
    loaded = specdec.load_redrafter_head(str(path), top_k=5)
    tensors = specdec.redrafter_head_tensors(head)
    assert "embed_tokens.weight" in tensors and tensors["lm_head.2.weight"].shape == (VOCAB, 10)
    rebuilt = specdec.redrafter_head_from_tensors(tensors, top_k=5)
    hidden = np.full(6, 0.3, np.float32)
    state = np.zeros(6, np.float32)
    expected = specdec.redrafter_step(head, hidden, state, 4)[1]
    for other in (loaded, rebuilt):
        assert other.config.num_layers == 2 and other.config.exit_dim == 10
        np.testing.assert_array_equal(specdec.redrafter_step(other, hidden, state, 4)[1], expected)
    np.testing.assert_array_equal(loaded.embedding, head.embedding)
    np.testing.assert_array_equal(loaded.vocab_proj, head.vocab_proj)
    specdec.save_redrafter_head(path, head, specdec.TensorDType.BF16)
    rounded = specdec.load_redrafter_head(path, top_k=5)
    np.testing.assert_allclose(rounded.vocab_proj, head.vocab_proj, rtol=1 / 128)
    assert not np.array_equal(rounded.vocab_proj, head.vocab_proj)
    del tensors["lm_head.1.linear.bias"]
    with pytest.raises(specdec.Error) as caught:
        specdec.redrafter_head_from_tensors(tensors)
    assert caught.value.argument == "lm_head.1.linear.bias"


def test_redrafter_beam_searches():
    head = random_head()
    hidden = np.full(6, -0.2, np.float32)
    beams = specdec.redrafter_beam_search(head, hidden, 1, 3, 4)
    assert isinstance(beams, specdec.ReDrafterBeams)
    assert beams.tokens.shape == (3, 4) and (beams.tokens[:, 0] == 1).all()
    assert beams.log_probs.shape == (3, 3, VOCAB)
    assert (np.diff(beams.beam_log_probs) <= 0).all()
    # Each beam's joint log probability is the sum of its rows' entries.
    for w in range(3):
        joint = sum(beams.log_probs[w, j, beams.tokens[w, j + 1]] for j in range(3))
        assert beams.beam_log_probs[w] == pytest.approx(joint, rel=1e-5)
    stream = specdec.RandomStream(seed=12, domain=specdec.Domain.DRAFT)
    drafted = specdec.redrafter_stochastic_beam_search(head, hidden, 1, 3, 3, stream)
    assert drafted.tree.max_depth() == 3 and len(drafted) <= 9
    again = specdec.redrafter_stochastic_beam_search(head, hidden, 1, 3, 3, stream)
    assert drafted.tree == again.tree


def test_markov_head_rows_are_the_table():
    table = TABLE + 1e-3
    table /= table.sum(axis=1, keepdims=True)
    head = specdec.markov_head(specdec.MarkovModel(table.astype(np.float32)), VOCAB + 2)
    hidden = np.zeros(VOCAB + 2, np.float32)
    for token in range(VOCAB):
        _, log_probs = specdec.redrafter_step(head, hidden, hidden, token)
        np.testing.assert_allclose(np.exp(log_probs), table[token], rtol=1e-4, atol=1e-7)


@requires_torch
def test_torch_rows_give_torch_draws():
    stream = specdec.RandomStream(seed=2)
    row = torch.from_numpy(LOG_TABLE[0])
    tokens, values = specdec.gumbel_top_k(row, 3, stream)
    assert isinstance(tokens, torch.Tensor) and tokens.dtype == torch.int32
    np.testing.assert_array_equal(tokens.numpy(), specdec.gumbel_top_k(row.numpy(), 3, stream)[0])
