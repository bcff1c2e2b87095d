"""Tree shapes and draft lengths from Python: Sequoia's tree against a small brute force, the
plan, the rerank's ancestor closure, best-first growth, the estimator and the controllers."""

import itertools

import numpy as np
import pytest

import specdec


def value(acceptance, parents):
    """The expected accepted count by the definition: products along root paths."""
    reach, seen, total = [], {}, 0.0
    for parent in parents:
        rank = seen.get(parent, 0)
        seen[parent] = rank + 1
        reach.append((1.0 if parent < 0 else reach[parent]) * acceptance[rank])
        total += reach[-1]
    return total


def test_sequoia_tree_fields_and_definition():
    acceptance = np.array([0.75, 0.25], np.float32)
    shape = specdec.sequoia_tree(acceptance, 6, 3)
    assert len(shape) == 6
    assert shape.parents.dtype == np.int32 and shape.ranks.dtype == np.int32
    assert shape.expected_accepted == pytest.approx(value(acceptance.astype(float), shape.parents))
    assert shape.expected_accepted == pytest.approx(
        specdec.expected_accepted(acceptance, shape.parents))
    # A DraftTree of the shape passes validation (level order, parents first).
    tree = specdec.DraftTree(shape.ranks, shape.parents)
    tree.validate(2)
    assert tree.max_depth() <= 3


def test_sequoia_tree_beats_every_small_tree():
    acceptance = [0.6, 0.3]
    best = 0.0
    # Every level-ordered parent array of 5 nodes with at most 2 children per node.
    for parents in itertools.product(range(-1, 4), repeat=5):
        if any(p >= i for i, p in enumerate(parents)) or list(parents) != sorted(parents):
            continue
        if max(parents.count(p) for p in set(parents)) > 2:
            continue
        best = max(best, value(acceptance, parents))
    shape = specdec.sequoia_tree(acceptance, 5, 5)
    assert shape.expected_accepted == pytest.approx(best, rel=1e-6)


def test_sequoia_plan_and_bad_input():
    verify = np.array([1.0] * 9 + [2.0] * 8, np.float32)
    plan = specdec.sequoia_plan([0.8, 0.1], verify, 0.05, max_depth=6)
    assert plan.budget == 8 and len(plan.shape) == 8
    assert plan.time_per_token == pytest.approx(
        (1.0 + plan.depth * 0.05) / (plan.shape.expected_accepted + 1))
    with pytest.raises(specdec.Error, match="acceptance_by_rank\\[1\\]"):
        specdec.sequoia_tree([0.5, 1.5], 4, 2)
    with pytest.raises(specdec.Error, match="budget"):
        specdec.sequoia_tree([0.5], -1, 2)
    with pytest.raises(specdec.Error, match="max_depth"):
        specdec.sequoia_tree([0.5], 4, 0)


def test_select_by_path_score_is_ancestor_closed():
    rng = np.random.default_rng(3)
    parents = np.array([-1, -1, -1] + [int(rng.integers(i)) for i in range(3, 30)], np.int32)
    log_probs = np.log(rng.choice([1.0, 0.5, 0.25], size=30)).astype(np.float32)
    selection = specdec.select_by_path_score(parents, log_probs, 12)
    assert len(selection) == 12
    chosen = set(selection.nodes.tolist())
    for k, node in enumerate(selection.nodes):
        assert selection.parents[k] < k
        if parents[node] >= 0:
            assert parents[node] in chosen
    expanded = specdec.DraftTree(np.zeros(30, np.int32), parents)
    specdec.selected_tree(expanded, selection).validate(1)


def test_grow_best_first_calls_back_with_paths():
    paths = []

    def expand(path):
        paths.append(path.tolist())
        return [(0, np.log(0.6)), (1, np.log(0.3))]

    tree, scores = specdec.grow_best_first(expand, 4)
    assert len(tree) == 4
    assert np.exp(scores).tolist() == pytest.approx([0.6, 0.3, 0.36, 0.216])
    assert paths[0] == []
    cut, _ = specdec.grow_best_first(expand, 10, min_gain=0.29)
    assert len(cut) == 3  # 0.6, 0.36, 0.3 (0.216 falls below)


def test_estimator_and_controllers():
    estimator = specdec.AcceptanceEstimator(prior_weight=0.0)
    estimator.update([-1, -1, 0], [1])
    estimator.update([-1, -1, 0], [0, 2])
    assert estimator.by_rank.tolist() == [[3, 2], [2, 1]]
    assert estimator.acceptance_by_rank(2) == pytest.approx([2 / 3, 1 / 2])
    with pytest.raises(specdec.Error, match="accepted_nodes\\[0\\]"):
        estimator.update([-1, -1, 0], [2])

    stop = specdec.CumulativeStop(threshold=0.5, max_length=8)
    stop.start()
    assert [stop.stop_after(0.8) for _ in range(4)] == [False, False, False, True]
    heuristic = specdec.HeuristicLength(initial=3)
    heuristic.update(3)
    assert heuristic.length() == 5
    batch = specdec.BatchAverageLength()
    batch.update(2, 3.0)
    assert batch.length(2) == 4
    goodput = specdec.GoodputLength(draft_cost=0.1, verify_cost=1.0)
    assert goodput.length() == specdec.goodput_length([0.5], draft_cost=0.1, verify_cost=1.0)
