"""The constrained block, greedy and typical chain batches: bit for bit their unconstrained
single-sequence forms on logits transformed in NumPy (test_constraints.transform); their laws at
V = 6 against a NumPy reference of the transformed, warped rows (greedy: the argmax walk; typical:
the acceptance the entropy threshold decides, then a draw from the row; block: the law of a
one-token block and the lossless first token), by chi-square at p < 1e-6 with fixed seeds (a
correct verifier fails once in a million seeds); bad input named."""

import numpy as np
import pytest

import specdec

from conftest import chi_square_p_value
from test_constraints import (B, OFFSETS, WARPS, FakeCudaTensor, argument_of, chain_prefixes,
                              random_case, streams, transform, warped_rows)

TYPICAL = specdec.Typical(epsilon=0.3, delta=0.09)


def sequence(b, values, extra):
    """Sequence b's part of a ragged array: its gamma_b + extra rows (or tokens)."""
    return values[OFFSETS[b] + b * extra:OFFSETS[b + 1] + (b + 1) * extra]


def check_sequences(emitted, accepted, expected):
    """expected[b] = (accepted, tokens) of sequence b."""
    for b, (count, tokens) in enumerate(expected):
        assert accepted[b] == count
        np.testing.assert_array_equal(emitted[OFFSETS[b] + b:OFFSETS[b] + b + len(tokens)], tokens)


@pytest.mark.parametrize("seed", range(20))
def test_block_equals_verify_block_on_transformed_logits(seed):
    target, draft, drafts, c = random_case(seed)
    emitted, accepted = specdec.verify_block_batch_logits_constrained(
        target_logits=target, draft_logits=draft, warps=WARPS, draft_tokens=drafts,
        streams=streams(seed), draft_offsets=OFFSETS, **c)
    transformed = transform(target, chain_prefixes(drafts), c)
    expected = []
    for b, stream in enumerate(streams(seed)):
        verdict, tokens = specdec.verify_block_logits(
            WARPS[b], sequence(b, transformed, 1), sequence(b, draft, 0),
            sequence(b, drafts, 0), stream)
        expected.append((verdict.accepted, tokens))
    check_sequences(emitted, accepted, expected)


@pytest.mark.parametrize("seed", range(20))
def test_block_draft_probs_equal_verify_block_on_transformed_rows(seed):
    target, draft, drafts, c = random_case(seed)
    probs = warped_rows(draft, OFFSETS, 0)
    emitted, accepted = specdec.verify_block_batch_draft_probs_constrained(
        target_logits=target, draft_probs=probs, warps=WARPS, draft_tokens=drafts,
        streams=streams(seed), draft_offsets=OFFSETS, **c)
    rows = warped_rows(transform(target, chain_prefixes(drafts), c), OFFSETS, 1)
    expected = []
    for b, stream in enumerate(streams(seed)):
        verdict, tokens = specdec.verify_block(sequence(b, rows, 1), sequence(b, probs, 0),
                                               sequence(b, drafts, 0), stream)
        expected.append((verdict.accepted, tokens))
    check_sequences(emitted, accepted, expected)


def argmax_drafts(target, drafts, c, rng):
    """The drafts with most tokens replaced by the argmax of their transformed row (so greedy
    matching accepts some), position by position."""
    drafts = drafts.copy()
    for b in range(B):
        for i in range(OFFSETS[b], OFFSETS[b + 1]):
            if rng.random() < 0.8:
                row = transform(target, chain_prefixes(drafts), c)[i + b]
                drafts[i] = int(np.argmax(row))
    return drafts


@pytest.mark.parametrize("seed", range(20))
def test_greedy_is_the_argmax_walk_on_transformed_logits(seed):
    target, _, drafts, c = random_case(seed)
    drafts = argmax_drafts(target, drafts, c, np.random.default_rng(seed))
    emitted, accepted = specdec.verify_chain_batch_greedy_logits_constrained(
        target_logits=target, draft_tokens=drafts, draft_offsets=OFFSETS, **c)
    transformed = transform(target, chain_prefixes(drafts), c)
    expected = []
    for b in range(B):
        rows, chain = sequence(b, transformed, 1), sequence(b, drafts, 0)
        k = 0
        while k < len(chain) and np.argmax(rows[k]) == chain[k]:
            k += 1
        expected.append((k, list(chain[:k]) + [int(np.argmax(rows[k]))]))
    check_sequences(emitted, accepted, expected)


@pytest.mark.parametrize("seed", range(20))
def test_typical_equals_verify_chain_on_transformed_rows(seed):
    target, draft, drafts, c = random_case(seed)
    emitted, accepted = specdec.verify_chain_batch_typical_logits_constrained(
        TYPICAL, target_logits=target, warps=WARPS, draft_tokens=drafts, streams=streams(seed),
        draft_offsets=OFFSETS, **c)
    rows = warped_rows(transform(target, chain_prefixes(drafts), c), OFFSETS, 1)
    probs = warped_rows(draft, OFFSETS, 0)
    expected = []
    for b, stream in enumerate(streams(seed)):
        verdict, tokens = specdec.verify_chain(TYPICAL, sequence(b, rows, 1),
                                               sequence(b, probs, 0), sequence(b, drafts, 0),
                                               stream)
        expected.append((verdict.accepted, tokens))
    check_sequences(emitted, accepted, expected)


# The laws at V = 6, N sequences of the same rows and drafts (or drafts drawn per sequence).
SMALL, N, TEMPERATURE = 6, 20000, 0.8
SMALL_WARP = specdec.Warp(temperature=TEMPERATURE)


def small_constraints(length):
    """Token 5 banned in every row, word [1, 4] banned (4 after a 1), a repetition penalty over
    the prompt [3] and output [2, 2] with frequency and presence penalties, per sequence."""
    mask = np.zeros((N * (length + 1), 1), np.int32)
    mask[:] = 0b011111
    return dict(bitmask=mask, bad_words=[[[1, 4]]] * N, prompt_token_ids=[[3]] * N,
                output_token_ids=[[2, 2]] * N, repetition_penalty=np.full(N, 1.6, np.float32),
                frequency_penalty=np.full(N, 0.3, np.float32),
                presence_penalty=np.full(N, 0.5, np.float32))


def small_row(logits, prefix):
    """NumPy reference: small_constraints' transform of one row with draft prefix `prefix`,
    warped at TEMPERATURE, in float64."""
    history = [2, 2] + list(prefix)
    x = np.asarray(logits, np.float64).copy()
    for t in range(SMALL):
        count = history.count(t)
        if count or t == 3:
            x[t] = x[t] / 1.6 if x[t] > 0 else x[t] * 1.6
        x[t] -= 0.3 * count + (0.5 if count else 0.0)
    x[5] = -np.inf
    if history[-1] == 1:
        x[4] = -np.inf
    p = np.exp((x - x.max()) / TEMPERATURE)
    return p / p.sum()


def softmax(logits):
    p = np.exp((np.asarray(logits, np.float64) - np.max(logits)) / TEMPERATURE)
    return p / p.sum()


def small_streams(seed):
    return [specdec.RandomStream(seed=seed, sequence=n) for n in range(N)]


def assert_follows(counts, probabilities):
    assert chi_square_p_value(np.asarray(counts, np.float64),
                              np.asarray(probabilities) * counts.sum()) > 1e-6


def test_one_token_block_follows_its_law():
    # Draft 1 (q > p there), so the block accepts it with probability p(1) / q(1), then draws the
    # bonus from row 1 (where 4 is banned after the 1), else draws from the residual (p - q)+.
    rng = np.random.default_rng(11)
    target = rng.normal(0, 1.0, size=(2, SMALL)).astype(np.float32)
    draft = target[:1].copy()
    draft[0, 1] += 2.0
    p0, p1, q = small_row(target[0], []), small_row(target[1], [1]), softmax(draft[0])
    assert q[1] > p0[1]
    emitted, accepted = specdec.verify_block_batch_logits_constrained(
        target_logits=np.tile(target, (N, 1)), draft_logits=np.tile(draft, (N, 1)),
        warps=SMALL_WARP, draft_tokens=np.ones(N, np.int32), streams=small_streams(3),
        draft_offsets=np.arange(N + 1, dtype=np.int32), **small_constraints(1))
    pairs = np.asarray(emitted).reshape(N, 2)
    accept = p0[1] / q[1]
    residual = np.maximum(p0 - q, 0)
    # Categories: the bonus token after an acceptance, then the token of a rejection.
    counts = np.concatenate([np.bincount(pairs[accepted == 1, 1], minlength=SMALL),
                             np.bincount(pairs[accepted == 0, 0], minlength=SMALL)])
    assert_follows(counts, np.concatenate([accept * p1, (1 - accept) * residual
                                           / residual.sum()]))


@pytest.mark.parametrize("probs", [False, True])
def test_block_first_token_follows_the_transformed_target(probs):
    # Block verification is lossless: with three drafts drawn from the draft rows per sequence,
    # the first token follows the transformed, warped target row 0 (5 never emitted).
    rng = np.random.default_rng(12)
    target = rng.normal(0, 1.0, size=(4, SMALL)).astype(np.float32)
    draft = (target[:3] + rng.normal(0, 1.0, size=(3, SMALL))).astype(np.float32)
    q = np.array([softmax(row) for row in draft])
    drafts = np.stack([rng.choice(SMALL, size=N, p=row) for row in q], axis=1).astype(np.int32)
    common = dict(target_logits=np.tile(target, (N, 1)), warps=SMALL_WARP,
                  draft_tokens=drafts.reshape(-1), streams=small_streams(4),
                  draft_offsets=np.arange(0, 3 * N + 1, 3, dtype=np.int32), **small_constraints(3))
    if probs:
        emitted, _ = specdec.verify_block_batch_draft_probs_constrained(
            draft_probs=np.tile(q.astype(np.float32), (N, 1)), **common)
    else:
        emitted, _ = specdec.verify_block_batch_logits_constrained(
            draft_logits=np.tile(draft, (N, 1)), **common)
    first = np.asarray(emitted).reshape(N, 4)[:, 0]
    assert_follows(np.bincount(first, minlength=SMALL), small_row(target[0], []))


def test_typical_follows_its_law():
    # Draft 0 is row 0's most likely token (accepted: above min(epsilon, delta e^-H)); draft 4
    # after it is banned by the word [1, 4] only when draft 0 is 1, so a banned or unlikely
    # token: rejected, and the token there is a draw from row 1.
    rng = np.random.default_rng(13)
    target = rng.normal(0, 1.0, size=(3, SMALL)).astype(np.float32)
    p0 = small_row(target[0], [])
    x0 = int(np.argmax(p0))
    p1 = small_row(target[1], [x0])
    x1 = int(np.argmin(np.where(np.arange(SMALL) == 5, np.inf, p1)))

    def passes(p, x):
        entropy = -(p[p > 0] * np.log(p[p > 0])).sum()
        return p[x] > min(TYPICAL.epsilon, TYPICAL.delta * np.exp(-entropy))

    assert passes(p0, x0) and not passes(p1, x1)
    emitted, accepted = specdec.verify_chain_batch_typical_logits_constrained(
        TYPICAL, target_logits=np.tile(target, (N, 1)), warps=SMALL_WARP,
        draft_tokens=np.tile([x0, x1], N).astype(np.int32), streams=small_streams(5),
        draft_offsets=np.arange(0, 2 * N + 1, 2, dtype=np.int32), **small_constraints(2))
    assert (np.asarray(accepted) == 1).all()
    tokens = np.asarray(emitted).reshape(N, 3)
    assert (tokens[:, 0] == x0).all()
    assert_follows(np.bincount(tokens[:, 1], minlength=SMALL), p1)


def batch_call(name, check=True, **overrides):
    """One of the new calls on random_case(1), with `overrides` replacing its arguments."""
    target, draft, drafts, c = random_case(1)
    args = dict(target_logits=target, draft_tokens=drafts, draft_offsets=OFFSETS, check=check)
    if name != "greedy":
        args.update(warps=WARPS, streams=streams(1))
    if name == "block":
        args["draft_logits"] = draft
    if name == "block_probs":
        args["draft_probs"] = warped_rows(draft, OFFSETS, 0)
    args.update(overrides)
    if name == "typical":
        return specdec.verify_chain_batch_typical_logits_constrained(
            args.pop("rule", TYPICAL), **args)
    return {"block": specdec.verify_block_batch_logits_constrained,
            "block_probs": specdec.verify_block_batch_draft_probs_constrained,
            "greedy": specdec.verify_chain_batch_greedy_logits_constrained}[name](**args)


NAMES = ["block", "block_probs", "greedy", "typical"]


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_is_named(name):
    rows = OFFSETS[-1] + B
    target, _, drafts, _ = random_case(1)
    assert argument_of(lambda: batch_call(name, bitmask=np.full((rows, 2), -1, np.int32))) \
        == "bitmask"
    empty_row = np.full((rows, 3), -1, np.int32)
    empty_row[OFFSETS[2] + 2] = 0  # sequence 2's first row: always read
    assert argument_of(lambda: batch_call(name, bitmask=empty_row)) == "bitmask[2][0]"
    assert argument_of(lambda: batch_call(name, target_logits=target[1:])) == "target_logits"
    outside = drafts.copy()
    outside[OFFSETS[3] + 1] = 70
    assert argument_of(lambda: batch_call(name, draft_tokens=outside)).startswith("draft_tokens")
    assert argument_of(lambda: batch_call(name, threads=-1)) == "threads"
    assert argument_of(lambda: batch_call(name, min_tokens=np.zeros(2, np.int32))) == \
        "min_tokens"
    assert argument_of(lambda: batch_call(name, target_logits=FakeCudaTensor())) == \
        "target_logits"


def test_bad_rule_and_draft_rows_are_named():
    assert argument_of(lambda: batch_call("typical", rule=specdec.Rejection())) == "rule"
    _, draft, drafts, _ = random_case(1)
    assert argument_of(lambda: batch_call("block", draft_logits=draft[1:])) == "draft_logits"
    probs = warped_rows(draft, OFFSETS, 0)
    assert argument_of(lambda: batch_call("block_probs", draft_probs=probs[1:])).startswith(
        "draft_probs")
    zero = probs.copy()
    zero[OFFSETS[2] + 1, drafts[OFFSETS[2] + 1]] = 0  # sequence 2's second draft
    assert argument_of(lambda: batch_call("block_probs", draft_probs=zero)) == \
        "draft_tokens[2][1]"


@pytest.mark.parametrize("name", NAMES)
def test_check_false_fails_the_bad_sequence_alone(name):
    good = batch_call(name)
    empty_row = np.full((OFFSETS[-1] + B, 3), -1, np.int32)
    empty_row[OFFSETS[2] + 2] = 0
    emitted, accepted, status = batch_call(name, check=False, bitmask=empty_row)
    assert list(status) == [0, 0, int(specdec.SequenceStatus.BAD_ROW), 0, 1]
    assert list(accepted) == [good[1][0], good[1][1], -1, good[1][3]]
    np.testing.assert_array_equal(emitted[:OFFSETS[2] + 2], good[0][:OFFSETS[2] + 2])
