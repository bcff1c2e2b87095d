"""Exactness from Python: the Monte-Carlo law of the emitted token over seeded random streams
against exact_node_distribution (and, for lossless rules, the warped target), by chi-square.

Each chi-square check fails by chance with probability at most 1e-6 (the threshold is the
1 - 1e-6 quantile of the chi-square law, by the Wilson-Hilferty approximation, which errs on the
large side for these degrees of freedom); the file makes fewer than 20 checks, so a false failure
has probability below 2e-5. The seeds are fixed, so a run is reproducible.
"""

from statistics import NormalDist

import numpy as np
import pytest

import specdec

FALSE_FAILURE = 1e-6
TRIALS = 20000
TREES = 8000

TARGET = np.array([0.30, 0.22, 0.18, 0.15, 0.10, 0.05, 0.0], np.float32)
DRAFT = np.array([0.10, 0.30, 0.05, 0.20, 0.15, 0.10, 0.10], np.float32)
RAW_TARGET = np.array([0.40, 0.20, 0.15, 0.10, 0.10, 0.05, 0.0], np.float32)
RAW_DRAFT = np.array([0.05, 0.35, 0.05, 0.25, 0.10, 0.10, 0.10], np.float32)


def chi_square_threshold(degrees, probability=FALSE_FAILURE):
    z = NormalDist().inv_cdf(1.0 - probability)
    h = 2.0 / (9.0 * degrees)
    return degrees * (1.0 - h + z * np.sqrt(h)) ** 3


def assert_law(counts, law):
    """Chi-square of observed counts against a law; tokens of probability 0 must never appear."""
    law = np.asarray(law, np.float64)
    total = counts.sum()
    impossible = law <= 1e-12
    assert counts[impossible].sum() == 0, f"impossible tokens emitted: {counts}"
    expected = total * law[~impossible]
    observed = counts[~impossible].astype(np.float64)
    # Pool the cells too small for the chi-square approximation into one.
    small = expected < 5
    if small.any():
        expected = np.append(expected[~small], expected[small].sum())
        observed = np.append(observed[~small], observed[small].sum())
    statistic = ((observed - expected) ** 2 / expected).sum()
    degrees = len(expected) - 1
    assert statistic < chi_square_threshold(degrees), (statistic, degrees, counts, law)


def draw_candidates(rng, draft, count, distinct, trials):
    """[trials, k] candidates from `draft`: i.i.d. (k = count), or one after another without
    replacement (k = min(count, support)), which is the order of the Gumbel-perturbed
    log-probabilities (Plackett-Luce)."""
    row = draft.astype(np.float64)
    row /= row.sum()
    if not distinct:
        return rng.choice(len(row), size=(trials, count), p=row)
    with np.errstate(divide="ignore"):
        keys = np.log(row) + rng.gumbel(size=(trials, len(row)))
    keys[:, row == 0] = -np.inf
    return np.argsort(-keys, axis=1)[:, :min(count, int((row > 0).sum()))]


RULES = [
    (specdec.Rejection(), 1),
    (specdec.MultiRound(), 3),
    (specdec.Recursive(), 3),
    (specdec.SpecTr(), 2),               # automatic gamma
    (specdec.SpecTr(gamma=1.8), 2),      # explicit gamma, valid for these rows
    (specdec.Lossy(alpha=0.2, beta=0.9), 1),
    (specdec.Cascade(deferral=specdec.Deferral.TOKEN_V1, alpha=0.1), 1),
    (specdec.Typical(epsilon=0.2, delta=0.5), 2),
]


@pytest.mark.parametrize("rule,count", RULES, ids=[repr(r) for r, _ in RULES])
def test_emitted_token_follows_the_exact_law(rule, count):
    rng = np.random.default_rng(1234)
    distinct = specdec.draws_without_replacement(rule)
    counts = np.zeros(len(TARGET), np.int64)
    all_candidates = draw_candidates(rng, DRAFT, count, distinct, TRIALS)
    for trial, candidates in enumerate(all_candidates):
        stream = specdec.RandomStream(seed=77, sequence=trial)
        verdict = specdec.verify_node(rule, TARGET, DRAFT, candidates, stream,
                                      raw_target=RAW_TARGET, raw_draft=RAW_DRAFT)
        counts[verdict.token] += 1
    acceptance, law = specdec.exact_node_distribution(rule, TARGET, DRAFT, count,
                                                      raw_target=RAW_TARGET, raw_draft=RAW_DRAFT)
    assert law.sum() == pytest.approx(1.0, abs=1e-6)
    assert 0.0 < acceptance <= 1.0
    assert_law(counts, law)
    if specdec.tv_distance(law.astype(np.float32), DRAFT) > 0.05:  # the check has power
        with pytest.raises(AssertionError):
            assert_law(counts, DRAFT)
    claimed = specdec.claimed_distribution(rule, TARGET, DRAFT, count, raw_target=RAW_TARGET,
                                           raw_draft=RAW_DRAFT)
    if specdec.is_lossless(rule):  # the law is the warped target itself
        np.testing.assert_allclose(law, TARGET, atol=1e-6)
        np.testing.assert_allclose(claimed, TARGET, atol=1e-6)
    elif claimed is not None:
        np.testing.assert_allclose(law, claimed, atol=1e-6)


def test_first_token_of_chains_blocks_and_trees_follows_the_target():
    """Lossless sequence walks: the first emitted token is distributed as target row 0."""
    rng = np.random.default_rng(99)
    target_rows = np.stack([TARGET, RAW_TARGET, DRAFT]).astype(np.float32)
    draft_rows = np.stack([DRAFT, RAW_DRAFT]).astype(np.float32)
    # A tree of width 2 and depth 2 drawn without replacement; rows depend on depth only.
    chain_counts = np.zeros(len(TARGET), np.int64)
    block_counts = np.zeros(len(TARGET), np.int64)
    tree_counts = np.zeros(len(TARGET), np.int64)
    batch_tokens, batch_streams = [], []
    all_tokens = np.stack([draw_candidates(rng, row, 1, False, TRIALS)[:, 0] for row in draft_rows],
                          axis=1)
    roots = draw_candidates(rng, DRAFT, 2, True, TREES)
    grandchildren = draw_candidates(rng, RAW_DRAFT, 2, True, 2 * TREES).reshape(TREES, 2, 2)
    for trial, tokens in enumerate(all_tokens):
        stream = specdec.RandomStream(seed=5, sequence=trial)
        _, out = specdec.verify_chain(specdec.Rejection(), target_rows, draft_rows, tokens, stream)
        chain_counts[out[0]] += 1
        _, out = specdec.verify_block(target_rows, draft_rows, tokens, stream)
        block_counts[out[0]] += 1
        batch_tokens.append(tokens)
        batch_streams.append(stream)
        if trial < TREES:
            # Level order: the root's two children (nodes 0, 1), then two children of each.
            tree = specdec.DraftTree(np.concatenate([roots[trial], grandchildren[trial].ravel()]),
                                     [-1, -1, 0, 0, 1, 1])
            depths = tree.depths
            rows_t = np.stack([TARGET] + [RAW_TARGET if d == 1 else DRAFT for d in depths])
            rows_d = np.stack([DRAFT] + [RAW_DRAFT if d == 1 else DRAFT for d in depths])
            verdict, nodes = specdec.verify_tree(specdec.Recursive(), tree, rows_t, rows_d, stream)
            first = int(tree.tokens[nodes[0]]) if verdict.accepted > 0 else verdict.token
            tree_counts[first] += 1
    assert_law(chain_counts, TARGET)
    assert_law(block_counts, TARGET)
    assert_law(tree_counts, TARGET)
    # The batched call emits the same tokens as the single-sequence one, trial by trial.
    emitted, _ = specdec.verify_chain_batch(
        target_rows=np.broadcast_to(target_rows, (TRIALS, 3, len(TARGET))).copy(),
        draft_rows=np.broadcast_to(draft_rows, (TRIALS, 2, len(TARGET))).copy(),
        draft_tokens=np.array(batch_tokens, np.int32), streams=batch_streams)
    np.testing.assert_array_equal(np.bincount(emitted[:, 0], minlength=len(TARGET)), chain_counts)
