"""Verification from Python: every binding called, results equal to what the C++ computes."""

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch

VOCAB = 12


def random_rows(rng, rows, vocab=VOCAB, zeros=0):
    """Probability rows (float32) with `zeros` tokens of probability 0 per row."""
    values = rng.gamma(0.6, size=(rows, vocab))
    for r in range(rows):
        values[r, rng.choice(vocab, zeros, replace=False)] = 0.0
    return (values / values.sum(axis=1, keepdims=True)).astype(np.float32)


def draw_from(row, u):
    return specdec.sample(row, u)


def stream(seed=7, **fields):
    return specdec.RandomStream(seed=seed, **fields)


# ---- rules and verdicts ---------------------------------------------------------------------


def test_rules_have_the_cpp_defaults_reprs_and_equality():
    assert specdec.SpecTr().gamma == 0.0
    lossy = specdec.Lossy()
    assert (lossy.alpha, lossy.beta, lossy.tune_beta, lossy.greedy) == (0.0, 1.0, False, False)
    cascade = specdec.Cascade()
    assert cascade.deferral == specdec.Deferral.CHOW and cascade.alpha == 0.0
    typical = specdec.Typical()
    assert typical.epsilon == pytest.approx(0.3) and typical.delta == pytest.approx(0.09)
    assert specdec.Cascade(deferral=specdec.Deferral.TOKEN_V2, alpha=0.5) == \
        specdec.Cascade(deferral=specdec.Deferral.TOKEN_V2, alpha=0.5)
    assert specdec.SpecTr(gamma=1.5) != specdec.SpecTr(gamma=1.25)
    assert specdec.Rejection() != specdec.MultiRound()
    assert repr(specdec.Cascade(deferral=specdec.Deferral.OPT_LOG)) == \
        "Cascade(deferral=Deferral.OPT_LOG, alpha=0)"
    assert repr(specdec.SpecTr(gamma=1.5)) == "SpecTr(gamma=1.5)"
    with pytest.raises(TypeError):
        specdec.SpecTr(1.5)  # keyword-only, like every option struct


def test_rule_properties():
    lossless = [specdec.Rejection(), specdec.MultiRound(), specdec.Recursive(), specdec.SpecTr()]
    lossy = [specdec.Lossy(), specdec.Cascade(), specdec.Typical(), specdec.Greedy()]
    assert all(specdec.is_lossless(r) and r.is_lossless() for r in lossless)
    assert not any(specdec.is_lossless(r) or r.is_lossless() for r in lossy)
    assert specdec.draws_without_replacement(specdec.Recursive())
    assert not specdec.draws_without_replacement(specdec.MultiRound())
    assert specdec.max_candidates(specdec.Rejection(), 50) == 1
    assert specdec.max_candidates(specdec.Recursive(), 50) == 50
    assert specdec.deferral_name(specdec.Deferral.TOKEN_V1) == "token_v1"
    specdec.check_deferral(specdec.Deferral.BILD, 2.0)
    with pytest.raises(specdec.Error, match="alpha"):
        specdec.check_deferral(specdec.Deferral.CHOW, 1.5)
    specdec.check_typical_parameters(0.3, 0.09)
    with pytest.raises(specdec.Error, match="epsilon"):
        specdec.check_typical_parameters(1.5, 0.09)


def test_verdicts_are_value_types():
    assert specdec.NodeVerdict(1, 5) == specdec.NodeVerdict(1, 5)
    assert specdec.NodeVerdict(1, 5) != specdec.NodeVerdict(-1, 5)
    assert repr(specdec.ChainVerdict(2, 3)) == "ChainVerdict(accepted=2, emitted=3)"
    assert repr(specdec.TreeVerdict(1, 4, True)) == "TreeVerdict(accepted=1, token=4, bonus=True)"
    assert specdec.MtadVerdict(0, 3) == specdec.MtadVerdict(0, 3)
    with pytest.raises(AttributeError):
        specdec.NodeVerdict(1, 5).token = 2


# ---- one node -------------------------------------------------------------------------------


def test_verify_node_dispatches_to_the_rule_functions():
    rng = np.random.default_rng(3)
    for trial in range(40):
        target, draft, raw_target, raw_draft = random_rows(rng, 4, zeros=2)
        support = np.flatnonzero(draft)
        s = stream(trial)
        one = int(rng.choice(support))
        two = [int(x) for x in rng.choice(support, 2, replace=False)]
        pairs = [
            (specdec.Rejection(), [one], specdec.verify_rejection(target, draft, one, s)),
            (specdec.MultiRound(), two, specdec.verify_multi_round(target, draft, two, s)),
            (specdec.Recursive(), two, specdec.verify_recursive(target, draft, two, s)),
            (specdec.SpecTr(), two, specdec.verify_spectr(target, draft, two, 0.0, s)),
            (specdec.Lossy(alpha=0.2, beta=0.9), [one],
             specdec.verify_lossy(target, draft, one, 0.2, 0.9, s)),
            (specdec.Typical(), two, specdec.verify_typical(target, two, 0.3, 0.09, s)),
            (specdec.Greedy(), two, specdec.verify_greedy(target, two)),
        ]
        for rule, candidates, expected in pairs:
            assert specdec.verify_node(rule, target, draft, candidates, s) == expected, rule
        for deferral in specdec.Deferral.__members__.values():
            alpha = 0.3
            rule = specdec.Cascade(deferral=deferral, alpha=alpha)
            expected = specdec.verify_cascade(raw_target, raw_draft, target, draft, one, deferral,
                                              alpha, s)
            got = specdec.verify_node(rule, target, draft, [one], s, raw_target=raw_target,
                                      raw_draft=raw_draft)
            assert got == expected, deferral
        # Lossy greedy reads the raw target row.
        expected = specdec.verify_lossy_greedy(raw_target, one, 0.25)
        got = specdec.verify_node(specdec.Lossy(alpha=0.25, greedy=True), target, draft, one, s,
                                  raw_target=raw_target)
        assert got == expected


def test_rejection_by_hand():
    target = np.array([0.5, 0.25, 0.25, 0.0], np.float32)
    draft = np.array([0.25, 0.5, 0.0, 0.25], np.float32)
    for seed in range(30):
        s = stream(seed)
        verdict = specdec.verify_rejection(target, draft, 1, s)
        # Accept token 1 iff u * q(1) < p(1): u < 0.5.
        assert (verdict.accepted == 0) == (s.uniform(0) * 0.5 < 0.25)
        if verdict.accepted < 0:  # the residual [p - q]+ = [0.25, 0, 0.25, 0] / 0.5
            residual = np.array([0.5, 0.0, 0.5, 0.0], np.float32)
            assert verdict.token == draw_from(residual, s.uniform(1))
    # Token 2 has draft probability 0: it cannot have been drawn.
    with pytest.raises(specdec.Error) as caught:
        specdec.verify_rejection(target, draft, 2, stream())
    assert caught.value.argument == "candidate"


def test_half_precision_rows_give_the_float32_results():
    # Exactly representable in float16 and bfloat16.
    target = np.array([0.5, 0.25, 0.125, 0.0625, 0.0625, 0.0], np.float32)
    draft = np.array([0.125, 0.125, 0.25, 0.25, 0.125, 0.125], np.float32)
    rules = [(specdec.Rejection(), [3]), (specdec.Recursive(), [3, 2, 5]),
             (specdec.SpecTr(), [3, 3]), (specdec.Typical(), [5, 2])]
    for seed in range(25):
        s = stream(seed)
        for rule, candidates in rules:
            expected = specdec.verify_node(rule, target, draft, candidates, s)
            got16 = specdec.verify_node(rule, target.astype(np.float16), draft.astype(np.float16),
                                        candidates, s)
            assert got16 == expected
            if torch is not None:
                got_bf16 = specdec.verify_node(rule, torch.from_numpy(target).bfloat16(),
                                               torch.from_numpy(draft).bfloat16(), candidates, s)
                assert got_bf16 == expected
    rows = np.stack([target, target, target])
    drafts = np.stack([draft, draft])
    expected = specdec.verify_chain(specdec.Rejection(), rows, drafts, [2, 3], stream(1))
    got = specdec.verify_chain(specdec.Rejection(), rows.astype(np.float16),
                               drafts.astype(np.float16), [2, 3], stream(1))
    assert got[0] == expected[0] and got[1].tolist() == expected[1].tolist()
    # Rows of different dtypes are refused, naming the second.
    with pytest.raises(specdec.Error, match=r"draft: has dtype float16; expected float32"):
        specdec.verify_node(specdec.Rejection(), target, draft.astype(np.float16), [3], stream())


# ---- chains, blocks and trees --------------------------------------------------------------


def chain_by_nodes(rule, target_rows, draft_rows, draft_tokens, s):
    """verify_chain spelled out with verify_node and the documented streams."""
    tokens = []
    for i, token in enumerate(draft_tokens):
        at = s.at_position(s.position + i)
        verdict = specdec.verify_node(rule, target_rows[i], draft_rows[i], [token], at)
        tokens.append(verdict.token)
        if verdict.accepted < 0:
            return specdec.ChainVerdict(i, i + 1), tokens
    length = len(draft_tokens)
    bonus = s.at_position(s.position + length)
    argmax_rule = isinstance(rule, specdec.Greedy) or (
        isinstance(rule, specdec.Lossy) and rule.greedy)
    if argmax_rule:  # greedy and lossy greedy: the bonus token is the argmax too
        tokens.append(int(np.argmax(target_rows[length])))
    else:
        tokens.append(draw_from(target_rows[length], bonus.uniform(0)))
    return specdec.ChainVerdict(length, length + 1), tokens


def test_verify_chain_is_a_loop_of_verify_node():
    rng = np.random.default_rng(11)
    rules = [specdec.Rejection(), specdec.Lossy(alpha=0.3, tune_beta=True), specdec.Typical(),
             specdec.SpecTr(), specdec.Greedy()]
    accepted_lengths = set()
    for trial in range(60):
        length = int(rng.integers(0, 5))
        target_rows = random_rows(rng, length + 1, zeros=3)
        # Drafts close to the target so that long prefixes get accepted too.
        draft_rows = (0.7 * target_rows[:length] + 0.3 * random_rows(rng, length)).astype(np.float32)
        tokens = [int(rng.choice(VOCAB, p=row / row.sum())) for row in draft_rows]
        s = stream(trial, sequence=2, position=5)
        for rule in rules:
            verdict, out = specdec.verify_chain(rule, target_rows, draft_rows, tokens, s)
            expected_verdict, expected_tokens = chain_by_nodes(rule, target_rows, draft_rows,
                                                               tokens, s)
            assert verdict == expected_verdict, rule
            assert out.dtype == np.int32 and out.tolist() == expected_tokens
            accepted_lengths.add(verdict.accepted)
    assert accepted_lengths >= {0, 1, 2, 3}


def test_verify_chain_with_raw_rows_feeds_the_cascade():
    rng = np.random.default_rng(5)
    target_rows, raw_target_rows = random_rows(rng, 3), random_rows(rng, 3)
    draft_rows, raw_draft_rows = random_rows(rng, 2), random_rows(rng, 2)
    rule = specdec.Cascade(deferral=specdec.Deferral.DIFF, alpha=0.1)
    for seed in range(20):
        s = stream(seed)
        verdict, out = specdec.verify_chain(rule, target_rows, draft_rows, [1, 2], s,
                                            raw_target_rows=raw_target_rows,
                                            raw_draft_rows=raw_draft_rows)
        first = specdec.verify_node(rule, target_rows[0], draft_rows[0], [1], s,
                                    raw_target=raw_target_rows[0], raw_draft=raw_draft_rows[0])
        assert out[0] == first.token and (verdict.accepted > 0) == (first.accepted == 0)


def test_verify_block():
    rng = np.random.default_rng(8)
    target_rows = random_rows(rng, 4)
    tokens = [3, 1, 4]
    # Draft equal to the target: every weight is 1 and h_L = 1, so the whole block is kept.
    verdict, out = specdec.verify_block(target_rows, target_rows[:3], tokens, stream())
    assert verdict == specdec.ChainVerdict(3, 4)
    assert out[:3].tolist() == tokens
    assert out[3] == draw_from(target_rows[3], stream().uniform(3))
    draft_rows = random_rows(rng, 3)
    for seed in range(20):
        verdict, out = specdec.verify_block(target_rows, draft_rows, tokens, stream(seed))
        assert 0 <= verdict.accepted <= 3 and len(out) == verdict.emitted
        assert out[:verdict.accepted].tolist() == tokens[:verdict.accepted]


def tree_by_nodes(rule, tree, target_rows, draft_rows, s):
    """verify_tree spelled out with verify_node: children of node n use s.at_node(n + 1)."""
    tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
    current, accepted = -1, []
    while True:
        children = [j for j in range(len(tokens)) if parents[j] == current]
        at = s.at_node(current + 1)
        if not children:
            return specdec.TreeVerdict(len(accepted), draw_from(target_rows[current + 1],
                                                                 at.uniform(0)), True), accepted
        verdict = specdec.verify_node(rule, target_rows[current + 1], draft_rows[current + 1],
                                      [tokens[j] for j in children], at)
        if verdict.accepted < 0:
            return specdec.TreeVerdict(len(accepted), verdict.token, False), accepted
        current = children[verdict.accepted]
        accepted.append(current)


def random_tree(rng, draft_rows, distinct, depth=3, width=2):
    """A level-ordered tree whose children of node n are drawn from draft row n + 1."""
    tree = specdec.DraftTree()
    level = [-1]
    for _ in range(depth):
        next_level = []
        for parent in level:
            row = draft_rows[parent + 1].astype(np.float64)
            picks = rng.choice(VOCAB, size=width, replace=not distinct, p=row / row.sum())
            for token in picks:
                next_level.append(tree.add(int(token), parent))
        level = next_level
    return tree


def grow_rows(rng, n):
    return random_rows(rng, n + 1, zeros=2)


def test_verify_tree_is_a_walk_of_verify_node():
    rng = np.random.default_rng(21)
    bonus_seen = accepted_seen = 0
    for trial in range(25):
        draft_rows = grow_rows(rng, 14)
        tree = random_tree(rng, draft_rows, distinct=True)
        n = len(tree)
        draft_rows = draft_rows[:n + 1]
        target_rows = (0.8 * draft_rows + 0.2 * random_rows(rng, n + 1)).astype(np.float32)
        for rule in (specdec.Recursive(), specdec.MultiRound(), specdec.SpecTr()):
            s = stream(trial, sequence=1)
            verdict, nodes = specdec.verify_tree(rule, tree, target_rows, draft_rows, s)
            expected_verdict, expected_nodes = tree_by_nodes(rule, tree, target_rows, draft_rows, s)
            assert verdict == expected_verdict, rule
            assert nodes.dtype == np.int32 and nodes.tolist() == expected_nodes
            bonus_seen += verdict.bonus
            accepted_seen += verdict.accepted
    assert bonus_seen > 0 and accepted_seen > 0


def test_verify_mtad_keeps_the_longest_passing_prefix():
    rng = np.random.default_rng(4)
    for trial in range(40):
        length = int(rng.integers(0, 5))
        target_rows = random_rows(rng, length + 1, zeros=2)
        tokens = [int(t) for t in rng.integers(0, VOCAB, size=length)]
        log_q = np.log(rng.uniform(0.05, 1.0, size=length)).astype(np.float32)
        tau = float(rng.uniform(0.0, 1.0))
        s = stream(trial)
        verdict = specdec.verify_mtad(tokens, log_q, target_rows, tau, s)
        eta, log_p, log_d = 0, 0.0, 0.0
        for i in range(length):
            p = float(target_rows[i, tokens[i]])
            log_p += np.log(p) if p > 0 else -np.inf
            log_d += float(log_q[i])
            if tau < 1 and log_p > -np.inf and log_p - log_d > np.log(tau):
                eta = i + 1
        assert verdict.accepted == eta
        assert verdict.token == draw_from(target_rows[eta], s.uniform(0))
    with pytest.raises(specdec.Error) as caught:
        specdec.verify_mtad([1], [0.5], random_rows(rng, 2), 0.5, stream())
    assert caught.value.argument == "draft_log_probs[0]"


# ---- batches --------------------------------------------------------------------------------


def test_verify_chain_batch_uniform_and_ragged_match_single_sequences():
    rng = np.random.default_rng(31)
    batch, gamma = 6, 3
    target = random_rows(rng, batch * (gamma + 1)).reshape(batch, gamma + 1, VOCAB)
    draft = (0.6 * target[:, :gamma] + 0.4 * random_rows(rng, batch * gamma).reshape(
        batch, gamma, VOCAB)).astype(np.float32)
    tokens = np.array([[rng.choice(VOCAB, p=row / row.sum()) for row in seq] for seq in draft],
                      np.int64)
    streams = [stream(99, sequence=b, position=10) for b in range(batch)]
    emitted, accepted = specdec.verify_chain_batch(target_rows=target, draft_rows=draft,
                                                   draft_tokens=tokens, streams=streams)
    assert emitted.shape == (batch, gamma + 1) and emitted.dtype == np.int32
    assert accepted.shape == (batch,)
    for b in range(batch):
        verdict, out = specdec.verify_chain(specdec.Rejection(), target[b], draft[b], tokens[b],
                                            streams[b])
        assert accepted[b] == verdict.accepted
        assert emitted[b].tolist() == out.tolist() + [-1] * (gamma + 1 - verdict.emitted)
    for threads in (1, 2):  # results never depend on the thread count
        again, _ = specdec.verify_chain_batch(target_rows=target.reshape(-1, VOCAB),
                                              draft_rows=draft.reshape(-1, VOCAB),
                                              draft_tokens=tokens, streams=streams,
                                              threads=threads)
        np.testing.assert_array_equal(again, emitted)

    # Ragged: gamma_b = 2, 0, 3; sequence b's target rows start at draft_offsets[b] + b.
    offsets = np.array([0, 2, 2, 5], np.int32)
    lengths = np.diff(offsets)
    targets = [random_rows(rng, g + 1) for g in lengths]
    drafts = [random_rows(rng, g) for g in lengths]
    token_lists = [[int(rng.choice(VOCAB, p=row / row.sum())) for row in d] for d in drafts]
    streams = [stream(5, sequence=b) for b in range(3)]
    emitted, accepted = specdec.verify_chain_batch(
        target_rows=np.concatenate(targets), draft_rows=np.concatenate(drafts),
        draft_tokens=np.array(sum(token_lists, []), np.int32), streams=streams,
        draft_offsets=offsets)
    assert emitted.shape == (5 + 3,)
    for b in range(3):
        verdict, out = specdec.verify_chain(specdec.Rejection(), targets[b],
                                            drafts[b].reshape(-1, VOCAB), token_lists[b],
                                            streams[b])
        start = offsets[b] + b
        assert accepted[b] == verdict.accepted
        assert emitted[start:start + lengths[b] + 1].tolist() == \
            out.tolist() + [-1] * (lengths[b] + 1 - verdict.emitted)


def test_verify_chain_batch_logits_matches_warping_then_verifying():
    rng = np.random.default_rng(41)
    batch, gamma = 5, 3
    target_logits = rng.normal(0, 2, size=(batch, gamma + 1, VOCAB)).astype(np.float32)
    draft_logits = (target_logits[:, :gamma] + rng.normal(0, 1, size=(batch, gamma, VOCAB))
                    ).astype(np.float32)
    warps = [specdec.Warp(temperature=0.9), specdec.Warp(top_k=5), specdec.Warp(top_p=0.8),
             specdec.Warp(min_p=0.05), specdec.Warp(temperature=1.3, top_k=8)]
    tokens = np.zeros((batch, gamma), np.int32)
    for b in range(batch):
        warped = specdec.warp_logits(warps[b], draft_logits[b])
        tokens[b] = [rng.choice(VOCAB, p=row / row.sum()) for row in warped]
    streams = [stream(3, sequence=b) for b in range(batch)]
    emitted, accepted = specdec.verify_chain_batch_logits(
        target_logits=target_logits, draft_logits=draft_logits, warps=warps,
        draft_tokens=tokens, streams=streams)
    for b in range(batch):
        verdict, out = specdec.verify_chain(
            specdec.Rejection(), specdec.warp_logits(warps[b], target_logits[b]),
            specdec.warp_logits(warps[b], draft_logits[b]), tokens[b], streams[b])
        assert accepted[b] == verdict.accepted
        assert emitted[b, :verdict.emitted].tolist() == out.tolist()
    # One warp for every sequence; half logits that float32 holds exactly read the same.
    halves = np.round(target_logits * 4) / 4
    draft_halves = np.round(draft_logits * 4) / 4
    one = specdec.Warp(temperature=0.7)
    tokens = np.zeros((batch, gamma), np.int32)
    for b in range(batch):
        warped = specdec.warp_logits(one, draft_halves[b].astype(np.float32))
        tokens[b] = [int(np.argmax(row)) for row in warped]
    expected = specdec.verify_chain_batch_logits(
        target_logits=halves.astype(np.float32), draft_logits=draft_halves.astype(np.float32),
        warps=one, draft_tokens=tokens, streams=streams)
    got = specdec.verify_chain_batch_logits(
        target_logits=halves.astype(np.float16), draft_logits=draft_halves.astype(np.float16),
        warps=one, draft_tokens=tokens, streams=streams)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


def test_verify_tree_batch_matches_single_trees():
    rng = np.random.default_rng(51)
    trees, targets, drafts = [], [], []
    for b in range(4):
        rows = grow_rows(rng, 14)
        tree = random_tree(rng, rows, distinct=True, depth=int(rng.integers(0, 4)))
        n = len(tree)
        trees.append(tree)
        drafts.append(rows[:n + 1])
        targets.append((0.8 * rows[:n + 1] + 0.2 * random_rows(rng, n + 1)).astype(np.float32))
    offsets = np.cumsum([0] + [len(t) for t in trees]).astype(np.int32)
    streams = [stream(8, sequence=b) for b in range(4)]
    rule = specdec.Recursive()
    nodes, accepted, final_tokens, bonus = specdec.verify_tree_batch(
        rule, node_offsets=offsets, tokens=np.concatenate([t.tokens for t in trees]),
        parents=np.concatenate([t.parents for t in trees]), target_rows=np.concatenate(targets),
        draft_rows=np.concatenate(drafts), streams=streams, threads=2)
    for b, tree in enumerate(trees):
        verdict, expected_nodes = specdec.verify_tree(rule, tree, targets[b], drafts[b],
                                                      streams[b])
        assert (accepted[b], final_tokens[b], bool(bonus[b])) == \
            (verdict.accepted, verdict.token, verdict.bonus)
        assert nodes[offsets[b]:offsets[b] + accepted[b]].tolist() == expected_nodes.tolist()


# ---- helpers of the rules -------------------------------------------------------------------


def test_spectr_gamma_solves_its_equation():
    rng = np.random.default_rng(61)
    target, draft = random_rows(rng, 2)
    for count in (1, 2, 4):
        gamma = specdec.spectr_gamma(target, draft, count)
        assert 1.0 <= gamma <= count
        beta = np.minimum(draft.astype(np.float64), target / gamma).sum()
        assert 1 - (1 - beta) ** count == pytest.approx(gamma * beta, abs=1e-5)
    with pytest.raises(specdec.Error, match="count"):
        specdec.spectr_gamma(target, draft, 0)


def test_lossy_tuned_beta_gives_the_documented_law():
    rng = np.random.default_rng(62)
    target, draft = random_rows(rng, 2)
    alpha = 0.2
    beta = specdec.lossy_tuned_beta(target, draft, alpha)
    law = specdec.claimed_distribution(specdec.Lossy(alpha=alpha, tune_beta=True), target, draft, 1)
    expected = np.maximum(np.minimum(draft, target / (1 - alpha)), target / beta)
    np.testing.assert_allclose(law, expected, atol=1e-6)
    _, exact = specdec.exact_node_distribution(specdec.Lossy(alpha=alpha, tune_beta=True),
                                               target, draft, 1)
    np.testing.assert_allclose(exact, law, atol=1e-6)


def test_cascade_target_for_every_deferral():
    rng = np.random.default_rng(63)
    raw_target, raw_draft, target, draft = random_rows(rng, 4)
    for deferral in specdec.Deferral.__members__.values():
        pi = specdec.cascade_target(raw_target, raw_draft, target, draft, deferral, 0.1)
        assert pi.dtype == np.float32 and pi.sum() == pytest.approx(1.0, abs=1e-5)
        claimed = specdec.claimed_distribution(specdec.Cascade(deferral=deferral, alpha=0.1),
                                               target, draft, 1, raw_target=raw_target,
                                               raw_draft=raw_draft)
        np.testing.assert_allclose(claimed, pi, atol=1e-6)
    # Chow with alpha = 1 never defers (max raw_draft < 0 is impossible): pi is the draft.
    pi = specdec.cascade_target(raw_target, raw_draft, target, draft, specdec.Deferral.CHOW, 1.0)
    np.testing.assert_allclose(pi, draft, atol=1e-7)


def test_tv_distance_entropy_and_claims():
    a = np.array([0.5, 0.5, 0.0], np.float32)
    b = np.array([0.25, 0.25, 0.5], np.float16)
    assert specdec.tv_distance(a, b) == pytest.approx(0.5)
    assert specdec.entropy(a) == pytest.approx(np.log(2), abs=1e-6)
    assert specdec.claimed_distribution(specdec.Typical(), a, a, 1) is None
    np.testing.assert_array_equal(specdec.claimed_distribution(specdec.Greedy(), a, a, 1),
                                  [1.0, 0.0, 0.0])


# ---- errors ---------------------------------------------------------------------------------


def argument_of(call):
    with pytest.raises(specdec.Error) as caught:
        call()
    assert isinstance(caught.value, ValueError)
    return caught.value.argument


def test_bad_input_raises_errors_naming_the_argument():
    rng = np.random.default_rng(71)
    target_rows, draft_rows = random_rows(rng, 3), random_rows(rng, 2)
    chain = lambda **kw: specdec.verify_chain(  # noqa: E731
        kw.get("rule", specdec.Rejection()), kw.get("target_rows", target_rows),
        kw.get("draft_rows", draft_rows), kw.get("draft_tokens", [1, 2]), stream())
    assert argument_of(lambda: chain(target_rows=target_rows[0])) == "target_rows"  # 1-D
    assert argument_of(lambda: chain(target_rows=target_rows[:2])) == "target_rows"  # L rows
    assert argument_of(lambda: chain(draft_rows=random_rows(rng, 2, vocab=6))) == "draft_rows"
    assert argument_of(lambda: chain(target_rows=target_rows.astype(np.float64))) == "target_rows"
    assert argument_of(lambda: chain(target_rows=target_rows.astype(np.int32))) == "target_rows"
    assert argument_of(lambda: chain(draft_tokens=[1, VOCAB])) == "draft_tokens[1]"
    assert argument_of(lambda: chain(draft_tokens=[1, -3])) == "draft_tokens[1]"
    assert argument_of(lambda: chain(draft_tokens=np.array([1, 2**40]))) == "draft_tokens[1]"
    assert argument_of(lambda: chain(draft_tokens=np.array([1.0, 2.0]))) == "draft_tokens"
    nan_rows = target_rows.copy()
    nan_rows[0, 4] = np.nan  # row 0 is always read; rows after a rejection never are
    assert argument_of(lambda: chain(target_rows=nan_rows)) == "target_rows[0][4]"
    assert argument_of(lambda: chain(rule="rejection")) == "rule"
    assert argument_of(lambda: chain(rule=specdec.Lossy(alpha=1.5))) == "alpha"
    assert argument_of(lambda: specdec.verify_rejection(target_rows[0], draft_rows[0], 2**40,
                                                        stream())) == "candidate"
    assert argument_of(lambda: specdec.verify_node(specdec.Recursive(), target_rows[0],
                                                   draft_rows[0], [[1, 2]], stream())) == \
        "candidates"
    assert argument_of(lambda: specdec.verify_spectr(target_rows[0], draft_rows[0], [1, 2], 3.0,
                                                     stream())) == "gamma"
    tree = specdec.DraftTree([1, 2], [-1, 0])
    assert argument_of(lambda: specdec.verify_tree(specdec.Recursive(), [1, 2], target_rows,
                                                   target_rows, stream())) == "tree"
    assert argument_of(lambda: specdec.verify_tree(specdec.Recursive(), tree, target_rows,
                                                   random_rows(rng, 2), stream())) == "draft_rows"
    assert argument_of(lambda: specdec.exact_node_distribution(
        specdec.MultiRound(), target_rows[0], draft_rows[0], 9)) == "count"

    batch = dict(target_rows=target_rows[None], draft_rows=draft_rows[None],
                 draft_tokens=np.array([[1, 2]]), streams=[stream()])
    specdec.verify_chain_batch(**batch)
    bad = lambda **kw: specdec.verify_chain_batch(**{**batch, **kw})  # noqa: E731
    assert argument_of(lambda: bad(streams=[stream(), stream()])) == "streams"
    assert argument_of(lambda: bad(streams=stream())) == "streams"
    assert argument_of(lambda: bad(streams=[3])) == "streams[0]"
    assert argument_of(lambda: bad(draft_tokens=np.array([[1, VOCAB]]))) == "draft_tokens[0][1]"
    assert argument_of(lambda: bad(draft_tokens=np.array([1, 2]))) == "draft_tokens"
    ragged = lambda **kw: bad(target_rows=target_rows, draft_rows=draft_rows, **kw)  # noqa: E731
    assert argument_of(lambda: ragged(draft_offsets=[0, 3], draft_tokens=[1, 2])) == "target_rows"
    assert argument_of(lambda: ragged(draft_offsets=[1, 2], draft_tokens=[1, 2])) == \
        "draft_offsets[0]"
    # A ragged batch has no sequence dimension: its rows are 2-D.
    assert argument_of(lambda: bad(draft_offsets=[0, 2], draft_tokens=[1, 2])) == "target_rows"
    assert argument_of(lambda: bad(target_rows=nan_rows[None])) == "target_rows[0][0][4]"
    assert argument_of(lambda: bad(threads=-1)) == "threads"
    assert argument_of(lambda: specdec.verify_chain_batch_logits(
        target_logits=target_rows[None], draft_logits=draft_rows[None].astype(np.float16),
        warps=specdec.Warp(), draft_tokens=[[1, 2]], streams=[stream()])) == "draft_logits"
    assert argument_of(lambda: specdec.verify_chain_batch_logits(
        target_logits=target_rows[None], draft_logits=draft_rows[None], warps=[3],
        draft_tokens=[[1, 2]], streams=[stream()])) == "warps[0]"


# ---- arrays of PyTorch ----------------------------------------------------------------------


@requires_torch
def test_torch_in_torch_out():
    rng = np.random.default_rng(81)
    target_rows, draft_rows = random_rows(rng, 3), random_rows(rng, 2)
    tokens = np.array([1, 2], np.int64)
    verdict, out = specdec.verify_chain(specdec.Rejection(), torch.from_numpy(target_rows),
                                        torch.from_numpy(draft_rows), torch.from_numpy(tokens),
                                        stream())
    expected_verdict, expected = specdec.verify_chain(specdec.Rejection(), target_rows,
                                                      draft_rows, tokens, stream())
    assert isinstance(out, torch.Tensor) and out.dtype == torch.int32
    assert verdict == expected_verdict and out.tolist() == expected.tolist()

    emitted, accepted = specdec.verify_chain_batch(
        target_rows=torch.from_numpy(target_rows)[None], draft_rows=torch.from_numpy(draft_rows)[None],
        draft_tokens=torch.from_numpy(tokens)[None], streams=[stream()])
    assert isinstance(emitted, torch.Tensor) and isinstance(accepted, torch.Tensor)
    assert emitted[0, :verdict.emitted].tolist() == expected.tolist()

    logits = torch.randn(1, 3, VOCAB, generator=torch.Generator().manual_seed(0)).bfloat16()
    emitted, _ = specdec.verify_chain_batch_logits(
        target_logits=logits, draft_logits=logits[:, :2], warps=specdec.Warp(),
        draft_tokens=torch.tensor([[1, 2]]), streams=[stream()])
    assert isinstance(emitted, torch.Tensor) and emitted.shape == (1, 3)
    # Equal rows accept every draft token.
    assert emitted[0, :2].tolist() == [1, 2]

    tree = specdec.DraftTree([1, 2], [-1, 0])
    rows = torch.from_numpy(random_rows(rng, 3))
    verdict, nodes = specdec.verify_tree(specdec.Recursive(), tree, rows, rows, stream())
    assert isinstance(nodes, torch.Tensor) and nodes.tolist() == [0, 1] and verdict.bonus
    acceptance, law = specdec.exact_node_distribution(specdec.Rejection(), rows[0], rows[1], 1)
    assert isinstance(law, torch.Tensor) and law.dtype == torch.float64
    assert 0.0 < acceptance <= 1.0


# ---- one array rule -------------------------------------------------------------------------


def test_float64_rows_are_refused_where_rows_are_read_as_float32():
    rng = np.random.default_rng(91)
    row = random_rows(rng, 1)[0].astype(np.float64)
    rows = random_rows(rng, 4).astype(np.float64)
    assert argument_of(lambda: specdec.sample(row, 0.5)) == "probabilities"
    assert argument_of(lambda: specdec.sample_iid(row, stream(), 2)) == "probabilities"
    assert argument_of(lambda: specdec.exact_node_distribution(
        specdec.Rejection(), row, row.astype(np.float32), 1)) == "target"
    assert argument_of(lambda: specdec.verify_chain_batch(
        target_rows=rows[None, :3], draft_rows=rows[None, :2].astype(np.float32),
        draft_tokens=[[1, 2]], streams=[stream()])) == "target_rows"
    assert argument_of(lambda: specdec.verify_tree_batch(
        specdec.Recursive(), node_offsets=[0, 1], tokens=[1], parents=[-1], target_rows=rows[:2],
        draft_rows=rows[:2].astype(np.float32), streams=[stream()])) == "target_rows"


def test_uniform_batch_rows_must_have_the_tokens_leading_dimensions():
    rng = np.random.default_rng(92)
    target_rows = random_rows(rng, 6).reshape(2, 3, VOCAB)  # two sequences of two tokens
    draft_rows = random_rows(rng, 3).reshape(3, 1, VOCAB)
    tokens = np.array([[1], [2], [3]])  # three sequences of one token: the same row count
    with pytest.raises(specdec.Error, match="draft_tokens") as caught:
        specdec.verify_chain_batch(target_rows=target_rows, draft_rows=draft_rows,
                                   draft_tokens=tokens, streams=[stream()] * 3)
    assert caught.value.argument == "target_rows"
    with pytest.raises(specdec.Error) as caught:
        specdec.verify_chain_batch_logits(target_logits=target_rows, draft_logits=draft_rows,
                                          warps=specdec.Warp(), draft_tokens=tokens,
                                          streams=[stream()] * 3)
    assert caught.value.argument == "target_logits"
    # 2-D rows carry no sequence dimension: only their count is checked.
    specdec.verify_chain_batch(target_rows=target_rows.reshape(6, VOCAB),
                               draft_rows=draft_rows.reshape(3, VOCAB), draft_tokens=tokens,
                               streams=[stream()] * 3)
