"""specdec.compat.flashinfer: FlashInfer's output validity rules, one-hot targets, the two
counters, the distribution of the emitted tokens, the vocabulary boundary, and bad input."""

import numpy as np
import pytest

import specdec
from specdec.compat.flashinfer import chain_speculative_sampling

from conftest import chi_square_p_value, requires_torch, torch


def random_case(batch, n, vocab, seed, onehot_target=False):
    rng = np.random.default_rng(seed)
    draft = rng.dirichlet(np.full(vocab, 0.5), size=(batch, n)).astype(np.float32)
    tokens = np.array([[rng.choice(vocab, p=row / row.sum()) for row in rows] for rows in draft],
                      np.int32).reshape(batch, n)
    if onehot_target:
        target_ids = rng.integers(0, vocab, size=(batch, n + 1))
        target = np.eye(vocab, dtype=np.float32)[target_ids]
    else:
        target_ids = None
        target = rng.dirichlet(np.full(vocab, 0.5), size=(batch, n + 1)).astype(np.float32)
    return draft, tokens, target, target_ids


@pytest.mark.parametrize("batch", [1, 99])
@pytest.mark.parametrize("vocab", [111, 2048])
@pytest.mark.parametrize("n", [1, 3, 7])
def test_output_is_valid(batch, vocab, n):
    # FlashInfer's validity rules: ids in [0, V), -1 only after the first mismatch and from there
    # on, emitted + 1 == the count of non-padding ids, the emitted prefix equals the draft.
    draft, tokens, target, _ = random_case(batch, n, vocab, seed=batch * 1000 + vocab + n)
    out, accepted, emitted = chain_speculative_sampling(draft, tokens, target, seed=3)
    assert out.shape == (batch, n + 1) and out.dtype == np.int32
    kept = out != -1
    assert ((out >= 0) & (out < vocab) | ~kept).all()
    assert (emitted + 1 == kept.sum(axis=1)).all()
    for b in range(batch):
        assert kept[b, :emitted[b] + 1].all() and not kept[b, emitted[b] + 1:].any()
        assert (out[b, :emitted[b]] == tokens[b, :emitted[b]]).all()
    assert (accepted >= emitted).all() and (accepted <= n).all()


@pytest.mark.parametrize("n", [1, 3, 5])
def test_one_hot_targets_give_the_target_ids(n):
    # With one-hot target rows the output is the target ids up to the first mismatch (included);
    # a draft equal to the target id is always kept.
    draft, _, target, target_ids = random_case(17, n, 50, seed=n, onehot_target=True)
    tokens = target_ids[:, :n].astype(np.int32).copy()
    tokens[::2, n // 2] = (tokens[::2, n // 2] + 1) % 50  # a mismatch in every other request
    out, accepted, emitted = chain_speculative_sampling(draft, tokens, target, seed=1)
    for b in range(17):
        e = emitted[b]
        assert out[b, :e + 1].tolist() == target_ids[b, :e + 1].tolist()
        assert e == (n // 2 if b % 2 == 0 else n)
        # "accepted" keeps testing after the mismatch: all the other positions match.
        assert accepted[b] == (n - 1 if b % 2 == 0 else n)


def test_counters_are_added_to_in_place():
    draft, tokens, target, _ = random_case(4, 3, 20, seed=2)
    accepted_total = np.full(4, 10, np.int32)
    emitted_total = np.zeros(4, np.int32)
    out, accepted, emitted = chain_speculative_sampling(draft, tokens, target, accepted_total,
                                                        emitted_total, seed=5)
    assert accepted is accepted_total and emitted is emitted_total
    _, once_accepted, once_emitted = chain_speculative_sampling(draft, tokens, target, seed=5)
    assert (accepted_total == 10 + once_accepted).all()
    assert (emitted_total == once_emitted).all()


@requires_torch
def test_torch_in_torch_out_and_counters():
    draft, tokens, target, _ = random_case(3, 2, 16, seed=8)
    accepted = torch.zeros(3, dtype=torch.int32)
    emitted = torch.ones(3, dtype=torch.int32)
    out, a, e = chain_speculative_sampling(torch.from_numpy(draft).to(torch.bfloat16),
                                           torch.from_numpy(tokens).long(),
                                           torch.from_numpy(target), accepted, emitted,
                                           generator=torch.Generator().manual_seed(4))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.int32 and a is accepted
    assert ((out != -1).sum(dim=1) == emitted).all()  # emitted started at 1: the +1


def test_docstring_example_shape():
    # FlashInfer's docstring example: V = 4, two drafts, the second rejected for sure.
    draft = np.array([[[0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.1]]], np.float32)
    tokens = np.array([[2, 1]], np.int32)
    target = np.array([[[0.0, 0.1, 0.6, 0.3], [1.0, 0.0, 0.0, 0.0], [0.7, 0.1, 0.1, 0.1]]],
                      np.float32)
    out, accepted, emitted = chain_speculative_sampling(draft, tokens, target, seed=0)
    assert out.tolist() == [[2, 0, -1]] and accepted.tolist() == [1] and emitted.tolist() == [1]


def test_seed_and_offset_make_runs_repeat():
    draft, tokens, target, _ = random_case(8, 4, 30, seed=6)
    first = chain_speculative_sampling(draft, tokens, target, seed=11, offset=5)
    again = chain_speculative_sampling(draft, tokens, target, seed=11, offset=5)
    other = [chain_speculative_sampling(draft, tokens, target, seed=11, offset=5 + 5 * k)[0]
             for k in range(1, 4)]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    assert any(not np.array_equal(first[0], o) for o in other)


def test_emitted_tokens_follow_the_target():
    # 20,000 requests of two drafts drawn from q at V = 6: the first two emitted tokens, as a
    # pair (36 cells; the second only where the first draft was kept, else the pair (first, -)),
    # must follow the target's joint law. The first token's law is p0; given a kept first draft
    # the second token's law is p1. Chi-square at p < 1e-6: a correct sampler fails once in a
    # million runs; the seed is fixed, so a run repeats exactly.
    vocab, batch = 6, 20000
    rng = np.random.default_rng(21)
    q = rng.dirichlet(np.ones(vocab), size=2).astype(np.float32)
    p = rng.dirichlet(np.ones(vocab), size=3).astype(np.float32)
    p[1, 4] = 0.0  # a token the target never emits at position 1
    p[1] /= p[1].sum()
    tokens = np.stack([rng.choice(vocab, size=batch, p=q[i] / q[i].sum()) for i in range(2)],
                      axis=1).astype(np.int32)
    out, _, emitted = chain_speculative_sampling(np.broadcast_to(q, (batch, 2, vocab)).copy(),
                                                 tokens, np.broadcast_to(p, (batch, 3, vocab)).copy(),
                                                 seed=77)
    counts = np.bincount(out[:, 0], minlength=vocab).astype(np.float64)
    assert chi_square_p_value(counts, p[0] * batch) > 1e-6
    second = out[emitted >= 1, 1]  # position 1 after a kept first token
    counts = np.bincount(second, minlength=vocab).astype(np.float64)
    assert chi_square_p_value(counts, p[1] * second.size) > 1e-6


@pytest.mark.parametrize("vocab", [100, 8193])
def test_ids_stay_in_the_vocabulary_and_placeholders_are_rejected(vocab):
    draft, tokens, target, _ = random_case(4, 2, vocab, seed=vocab)
    tokens[0, 0] = -1
    tokens[1, 0] = vocab
    tokens[2, 1] = vocab + 5
    tokens[3, 1] = -1
    out, accepted, emitted = chain_speculative_sampling(draft, tokens, target, seed=2)
    assert ((out >= 0) & (out < vocab) | (out == -1)).all()
    assert emitted[0] == 0 and emitted[1] == 0 and emitted[2] <= 1 and emitted[3] <= 1
    assert (out[:, 0] >= 0).all() and out[:2, 1:].tolist() == [[-1, -1], [-1, -1]]
    assert accepted[0] <= 1 and accepted[2] <= 1  # an unusable token never counts


def test_zero_draft_probability_is_rejected():
    draft = np.array([[[0.0, 1.0, 0.0]]], np.float32)
    target = np.array([[[0.5, 0.0, 0.5], [0.0, 0.0, 1.0]]], np.float32)
    for seed in range(20):
        out, accepted, emitted = chain_speculative_sampling(draft, np.array([[0]]), target,
                                                            seed=seed)
        assert emitted[0] == 0 and accepted[0] == 0 and out[0, 0] in (0, 2) and out[0, 1] == -1


def arguments(**change):
    draft, tokens, target, _ = random_case(2, 3, 10, seed=0)
    args = dict(draft_probs=draft, draft_token_ids=tokens, target_probs=target, seed=1)
    args.update(change)
    return args


@pytest.mark.parametrize("change, argument", [
    (dict(draft_probs=np.ones((2, 3, 10), np.int32)), "draft_probs"),
    (dict(draft_probs=np.ones((2, 2, 10), np.float32)), "draft_probs"),
    (dict(draft_probs=np.ones((2, 3, 9), np.float32)), "draft_probs"),
    (dict(draft_probs=-np.ones((2, 3, 10), np.float32)), "draft_probs"),
    (dict(target_probs=np.ones((2, 3, 10), np.float32)), "target_probs"),
    (dict(target_probs=np.ones((2, 4), np.float32)), "target_probs"),
    (dict(target_probs=np.full((2, 4, 10), np.nan, np.float32)), "target_probs"),
    (dict(target_probs=np.ones((2, 4, 10), np.float32)), "target_probs"),  # sums to 10
    (dict(draft_probs=np.full((2, 3, 10), 0.05, np.float32)), "draft_probs"),  # sums to 0.5
    (dict(draft_token_ids=np.ones((2, 3), np.float32)), "draft_token_ids"),
    (dict(draft_token_ids=np.ones(6, np.int32)), "draft_token_ids"),
    (dict(maybe_output_accepted_token_num=np.zeros(2, np.int64)), "maybe_output_accepted_token_num"),
    (dict(maybe_output_emitted_draft_token_num=np.zeros(3, np.int32)),
     "maybe_output_emitted_draft_token_num"),
    (dict(seed=np.array([1, 2, 3])), "seed"),
    (dict(offset=-1), "offset"),
    (dict(offset=2**32), "offset"),
    (dict(seed=2**70), "seed"),
    (dict(seed=None, generator="not a generator"), "generator"),
])
def test_bad_input_names_the_argument(change, argument):
    with pytest.raises(specdec.Error) as raised:
        chain_speculative_sampling(**arguments(**change))
    assert raised.value.argument == argument


@requires_torch
def test_cuda_tensors_run_or_are_refused_by_name():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    draft, tokens, target, _ = random_case(4, 3, 64, seed=3)
    args = [torch.from_numpy(x).cuda() for x in (draft, tokens, target)]
    try:
        out, accepted, emitted = chain_speculative_sampling(*args, seed=4)
    except specdec.Error as refused:  # specdec built without CUDA
        assert refused.argument in ("target_probs", "draft_probs", "draft_token_ids")
        return
    cpu = chain_speculative_sampling(draft, tokens, target, seed=4)
    assert out.is_cuda and np.array_equal(out.cpu().numpy(), cpu[0])
    assert np.array_equal(emitted.cpu().numpy(), cpu[2])
