"""Tree shapes, draft lengths and verification methods compared on the trained pair of
examples/models/ (a 4-layer byte-level target and a 1-layer draft trained on the King James
Bible by train_pair.py), on held-out text, at temperatures 0, 0.7 and 1.

For each policy the table gives the block efficiency (tokens per target call) and the model time
per generated token. Model time is not the wall time of this Python loop: the target's and the
draft's forward cost is measured once on this machine for every tree size, and a step costs the
draft's forward for each level it drafts plus the target's forward over the tree it verifies.

Static shapes (chains, k-ary trees, Sequoia's trees) draw each node's children without
replacement from the draft (Gumbel-top-k) and are verified by recursive rejection sampling.
Shapes chosen from the draft's confidence (EAGLE-2's rerank, SpecExec's best-first growth,
OPT-Tree's stop) take the draft's most probable children and are verified against the target
alone (lossless without draft rows). At temperature 0 every draft takes the most probable
children and verification is greedy. The `specdec.decode` methods run the library's own
drafters and verifiers; the lossy ones get a second table with the target's perplexity of what
they wrote.

    nice -n 19 python3 examples/python/shape_table.py --markdown docs/shapes_table.md \
        --plot docs/images/shapes.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import time
from typing import Callable

import numpy as np
import torch

import specdec

from model import GPT, Config, ModelProvider  # beside this script

MODELS = pathlib.Path(__file__).resolve().parents[1] / "models"
PROMPT = 48  # bytes of held-out text before each generation
MAX_DEPTH = 10  # deepest draft: prompt + output + tree stay inside the models' 128 positions
LARGEST_TREE = 64  # forward costs are measured up to this many tree nodes


def load_pair(models: pathlib.Path = MODELS):
    """(target, draft, description) from kjv_pair.json and its safetensors files."""
    info = json.loads((models / "kjv_pair.json").read_text())
    loaded = [GPT.load(Config(**info["models"][name]["config"]),
                       models / info["models"][name]["file"]) for name in ("target", "draft")]
    return loaded[0], loaded[1], info


def encode(text: str) -> list[int]:
    return list(text.encode("ascii"))


def prompts_from(text: str, count: int) -> list[list[int]]:
    """The first PROMPT bytes of `count` verses spread over `text`."""
    lines = [line for line in text.splitlines() if len(line) > PROMPT]
    step = max(1, len(lines) // count)
    return [encode(line[:PROMPT]) for line in lines[::step][:count]]


def warp(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Probability rows: one-hot at the argmax for temperature 0, else softmax(logits / T)."""
    if temperature == 0:
        rows = np.zeros(logits.shape, np.float32)
        rows[np.arange(len(logits)), logits.argmax(axis=1)] = 1
        return rows
    z = logits.astype(np.float64) / temperature
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return (z / z.sum(axis=1, keepdims=True)).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Forward costs


def measure_costs(model: GPT, largest: int, repeats: int, context: int = PROMPT + 12):
    """Seconds of one forward pass that scores the root and n tree nodes after a cached context
    of `context` tokens, n = 0 .. largest: (the fastest of `repeats` timings per n, the straight
    line fitted to them). The line (Theil-Sen: the median slope over all pairs of sizes) smooths
    out the other load of a shared machine, which only ever adds time."""
    provider = ModelProvider(model, capacity=context + largest + 1)
    provider.reset([ord("a")] * context)
    vocab = model.config.vocab
    costs = []
    for n in range(largest + 1):
        tree = specdec.DraftTree(np.full(n, ord("e"), np.int32), np.full(n, -1, np.int32))
        batch = specdec.TreeBatch.from_tree(tree, context)
        logits = np.empty((n + 1, vocab), np.float32)
        provider.evaluate(batch, logits)  # the first call also fills the context's cache
        best = math.inf
        for _ in range(repeats):
            started = time.perf_counter()
            provider.evaluate(batch, logits)
            best = min(best, time.perf_counter() - started)
        costs.append(best)
    measured = np.array(costs)
    sizes = np.arange(largest + 1)
    i, j = np.triu_indices(len(sizes), 1)
    slope = max(float(np.median((measured[j] - measured[i]) / (j - i))), 0.0)
    intercept = float(np.median(measured - slope * sizes))
    return measured, intercept + slope * sizes


@dataclasses.dataclass
class Costs:
    verify: np.ndarray  # verify[n]: the target over the root and n nodes (fitted), seconds
    draft: np.ndarray  # draft[n]: the draft over the root and n nodes (fitted)
    verify_measured: np.ndarray
    draft_measured: np.ndarray

    def draft_level(self, tokens: int) -> float:
        """A draft pass feeding `tokens` new tokens (the root's row needs the root fed)."""
        return float(self.draft[min(max(tokens - 1, 0), len(self.draft) - 1)])


# ---------------------------------------------------------------------------------------------
# One sequence's state: the two models with their caches, and what a step cost


class Pair:
    def __init__(self, target: GPT, draft: GPT, temperature: float, seed: int):
        # Cache slots hold the context and a whole tree; positions stay below 128 (MAX_DEPTH).
        slots = target.config.max_positions + 2 * LARGEST_TREE
        self.target = ModelProvider(target, capacity=slots)
        self.draft = ModelProvider(draft, capacity=slots)
        self.vocab = target.config.vocab
        self.temperature, self.seed = temperature, seed
        self.sequence = 0

    def reset(self, prompt, sequence: int) -> None:
        self.target.reset(prompt)
        self.draft.reset(prompt)
        self.sequence = sequence

    def committed(self) -> int:
        return self.target.committed_length()

    def stream(self, domain) -> specdec.RandomStream:
        return specdec.RandomStream(seed=self.seed, sequence=self.sequence,
                                    position=self.committed(), domain=domain)

    def rows(self, provider: ModelProvider, tree: specdec.DraftTree) -> np.ndarray:
        """Warped rows [len(tree) + 1, V]: after the root, then after each node."""
        return warp(self.logits(provider, tree), self.temperature)

    def draft_rows(self, tree: specdec.DraftTree):
        """The draft's warped rows, and its confidence: the same rows, or at temperature 0
        (one-hot rows) the softmax at temperature 1, which ranks and scores children."""
        logits = self.logits(self.draft, tree)
        rows = warp(logits, self.temperature)
        return rows, (rows if self.temperature > 0 else warp(logits, 1.0))

    def logits(self, provider: ModelProvider, tree: specdec.DraftTree) -> np.ndarray:
        batch = specdec.TreeBatch.from_tree(tree, provider.committed_length())
        logits = np.empty((len(tree) + 1, self.vocab), np.float32)
        provider.evaluate(batch, logits)
        return logits

    def verify(self, tree: specdec.DraftTree, draft_rows: np.ndarray | None):
        """Scores `tree` with the target and verifies it (recursive rejection sampling where the
        children were drawn from `draft_rows`, else against the target alone); commits the kept
        path and the next token to both models. Returns the accepted node ids."""
        target_rows = self.rows(self.target, tree)
        stream = self.stream(specdec.Domain.VERIFY)
        if draft_rows is None or self.temperature == 0:
            verdict, accepted = specdec.verify_tree_target_only(tree, target_rows, stream)
        else:
            verdict, accepted = specdec.verify_tree(specdec.Recursive(), tree, target_rows,
                                                    draft_rows, stream)
        batch = specdec.TreeBatch.from_tree(tree, self.committed())
        self.target.commit(batch, accepted, verdict.token)
        self.draft.commit(batch, accepted, verdict.token)
        return [int(node) for node in accepted]

    def children(self, row: np.ndarray, confidence: np.ndarray, count: int,
                 node: int) -> list[int]:
        """`count` children for a node whose draft row is `row`: the most probable ones at
        temperature 0, else drawn without replacement (Gumbel-top-k)."""
        if self.temperature == 0:
            return [int(t) for t in np.argsort(-confidence, kind="stable")[:count]]
        stream = self.stream(specdec.Domain.DRAFT).at_node(node + 1)
        tokens, _ = specdec.gumbel_top_k_probabilities(row, count, stream)
        if len(tokens) < count:
            raise ValueError(f"a draft row has fewer than {count} tokens of nonzero probability")
        return [int(t) for t in tokens]


@dataclasses.dataclass
class Step:
    tree_size: int
    level_tokens: list[int]  # tokens fed to the draft at each draft pass
    accepted: int


def top_children(row: np.ndarray, count: int) -> list[tuple[int, float]]:
    """The `count` most probable tokens of a draft row with their log-probabilities."""
    top = np.argsort(-row, kind="stable")[:count]
    return [(int(t), float(np.log(max(float(row[t]), 1e-30)))) for t in top if row[t] > 0]


# ---------------------------------------------------------------------------------------------
# Policies: each drafts a tree, verifies it through Pair.verify and returns a Step


def shape_of(branching) -> np.ndarray:
    """The level-order parents of the tree with branching[l] children per node at level l."""
    parents, level = [], [-1]
    for width in branching:
        next_level = []
        for node in level:
            for _ in range(width):
                parents.append(node)
                next_level.append(len(parents) - 1)
        level = next_level
    return np.array(parents, np.int32)


class StaticShape:
    """A fixed shape (level-order parents, children in rank order), drafted level by level."""

    stochastic = True

    def __init__(self, parents):
        self.parents = np.asarray(parents, np.int32)
        self.kids = [[] for _ in range(len(self.parents) + 1)]  # index node + 1, root = 0
        for node, parent in enumerate(self.parents):
            self.kids[parent + 1].append(node)

    def start(self, pair: Pair) -> None:
        pass

    def step(self, pair: Pair) -> Step:
        tree = specdec.DraftTree()
        draft_rows = np.zeros((len(self.parents) + 1, pair.vocab), np.float32)
        frontier, levels = [-1], []
        while True:
            expanding = [node for node in frontier if self.kids[node + 1]]
            if not expanding:
                break
            rows, confidence = pair.draft_rows(tree)
            levels.append(len(expanding))
            frontier = []
            for node in expanding:
                draft_rows[node + 1] = rows[node + 1]
                tokens = pair.children(rows[node + 1], confidence[node + 1],
                                       len(self.kids[node + 1]), node)
                for child, token in zip(self.kids[node + 1], tokens):
                    if tree.add(token, node) != child:
                        raise AssertionError("the shape is not in level order")
                    frontier.append(child)
        draft_rows = draft_rows[:len(tree) + 1]
        draft_rows[draft_rows.sum(axis=1) == 0] = 1.0 / pair.vocab  # leaves: never read
        accepted = pair.verify(tree, draft_rows)
        return Step(len(tree), levels, len(accepted))


class Expanded:
    """EAGLE-2's draft expansion: the root's top_k children, then at each level the top_k
    children of each of the top_k nodes of the last level by path score; then a selection."""

    stochastic = False

    def __init__(self, top_k: int, depth: int, select: Callable):
        self.top_k, self.depth, self.select = top_k, depth, select

    def start(self, pair: Pair) -> None:
        pass

    def step(self, pair: Pair) -> Step:
        expanded, log_probs, scores = specdec.DraftTree(), [], []
        frontier, levels = [-1], []
        for _ in range(self.depth):
            _, confidence = pair.draft_rows(expanded)
            levels.append(len(frontier))
            grown = []
            for node in frontier:
                for token, log_p in top_children(confidence[node + 1], self.top_k):
                    grown.append(expanded.add(token, node))
                    log_probs.append(log_p)
                    scores.append((scores[node] if node >= 0 else 0.0) + log_p)
            frontier = sorted(grown, key=lambda n: -scores[n])[:self.top_k]
        selection = self.select(expanded.parents, np.array(log_probs, np.float32))
        tree = specdec.selected_tree(expanded, selection)
        accepted = pair.verify(tree, None)
        return Step(len(tree), levels, len(accepted))


class BestFirst:
    """SpecExec: best-first growth, each node expanded with the draft's top_k children."""

    stochastic = False

    def __init__(self, budget: int, top_k: int = 4, min_gain: float = 0.0):
        self.budget, self.top_k, self.min_gain = budget, top_k, min_gain

    def start(self, pair: Pair) -> None:
        pass

    def step(self, pair: Pair) -> Step:
        levels = []

        def expand(path):
            chain = specdec.DraftTree(np.asarray(path, np.int32),
                                      np.arange(-1, len(path) - 1, dtype=np.int32))
            levels.append(1)
            return top_children(pair.draft_rows(chain)[1][-1], self.top_k)

        tree, _ = specdec.grow_best_first(expand, self.budget, self.min_gain, MAX_DEPTH)
        accepted = pair.verify(tree, None)
        return Step(len(tree), levels, len(accepted))


class ControlledChain:
    """A chain drafted one token at a time while a length controller says go on."""

    stochastic = True

    def __init__(self, make: Callable, max_length: int):
        self.make, self.max_length = make, max_length

    def start(self, pair: Pair) -> None:
        self.controller = self.make()

    def planned(self) -> int:
        c = self.controller
        if isinstance(c, specdec.HeuristicLength):
            return c.length()
        if isinstance(c, specdec.BatchAverageLength):
            return c.length(1)
        if isinstance(c, specdec.GoodputLength):
            return c.length()
        c.start()
        return self.max_length

    def stop(self, probability: float) -> bool:
        c = self.controller
        if isinstance(c, (specdec.CumulativeStop, specdec.HeuristicLength)):
            return c.stop_after(probability)
        return False

    def step(self, pair: Pair) -> Step:
        tree = specdec.DraftTree()
        rows_kept, levels = [], []
        for node in range(min(self.planned(), self.max_length)):
            rows, confidence = pair.draft_rows(tree)
            levels.append(1)
            token = pair.children(rows[-1], confidence[-1], 1, node - 1)[0]
            rows_kept.append(rows[-1])
            tree.add(token, node - 1)
            if self.stop(float(confidence[-1][token])):
                break
        draft_rows = np.array(rows_kept + [rows_kept[-1]], np.float32)
        accepted = pair.verify(tree, draft_rows)
        c = self.controller
        if isinstance(c, specdec.HeuristicLength):
            c.update(len(accepted))
        elif isinstance(c, specdec.BatchAverageLength):
            c.update(1, float(len(accepted)))
        elif isinstance(c, specdec.GoodputLength):
            c.update(len(tree), len(accepted))
        return Step(len(tree), levels, len(accepted))


def run_policy(policy, pair: Pair, prompts, tokens: int, costs: Costs):
    """Decodes `tokens` tokens after each prompt. Returns (tokens per step, model seconds per
    token, mean tree size, outputs)."""
    steps = emitted = nodes = 0
    seconds = 0.0
    outputs = []
    for sequence, prompt in enumerate(prompts):
        pair.reset(prompt, sequence)
        policy.start(pair)
        while pair.committed() - len(prompt) < tokens:
            before = pair.committed()
            step = policy.step(pair)
            steps += 1
            nodes += step.tree_size
            emitted += min(pair.committed(), len(prompt) + tokens) - before
            seconds += costs.verify[step.tree_size] + sum(costs.draft_level(t)
                                                           for t in step.level_tokens)
        outputs.append(pair.target.context()[len(prompt):len(prompt) + tokens])
    return emitted / steps, seconds / emitted, nodes / steps, outputs


def run_method(options: specdec.DecodeOptions, width: int, pair: Pair, prompts, tokens: int,
               costs: Costs):
    """The same numbers for a specdec.decode method (its own drafters and verifiers)."""
    steps = emitted = nodes = 0
    seconds = 0.0
    outputs = []
    options.max_new_tokens = tokens
    draft = None if options.method == specdec.Method.AUTOREGRESSIVE else pair.draft
    for sequence, prompt in enumerate(prompts):
        decoder = specdec.Decoder(pair.target, draft, options)
        decoder.reset(prompt, sequence)
        last = decoder.metrics()
        while not decoder.finished():
            decoder.step()
            now = decoder.metrics()
            tree = now.target_tree_tokens - last.target_tree_tokens
            calls = now.draft_calls - last.draft_calls
            seconds += costs.verify[min(tree, len(costs.verify) - 1)] + sum(
                costs.draft_level(1 if call == 0 else width) for call in range(calls))
            last = now
        steps += last.target_calls
        emitted += last.tokens_generated
        nodes += last.target_tree_tokens
        outputs.append([int(t) for t in decoder.generated()][:tokens])
    return emitted / steps, seconds / emitted, nodes / steps, outputs


def target_perplexity(target: GPT, prompts, outputs) -> float:
    """The target's own per-byte perplexity (temperature 1) of what a policy wrote."""
    total, count = 0.0, 0
    with torch.no_grad():
        for prompt, output in zip(prompts, outputs):
            sequence = torch.tensor([prompt + list(output)])
            logits = target.sequence_logits(sequence[:, :-1])[0, len(prompt) - 1:]
            total += float(torch.nn.functional.cross_entropy(logits, sequence[0, len(prompt):],
                                                             reduction="sum"))
            count += len(output)
    return math.exp(total / count)


# ---------------------------------------------------------------------------------------------
# The rows of the table


def policies(acceptance: list[float], costs: Costs):
    """(family, name, policy) for every shape policy and length controller."""
    rows = [("chain", f"chain k = {k}", StaticShape(shape_of([1] * k))) for k in range(2, 9)]
    for branching in ([2, 2, 2], [3, 3], [2, 2, 2, 2], [3, 3, 3]):
        rows.append(("k-ary tree", "k-ary " + "x".join(map(str, branching)),
                     StaticShape(shape_of(branching))))
    for budget in (12, 14, 30, 39):
        shape = specdec.sequoia_tree(acceptance, budget, MAX_DEPTH)
        rows.append(("Sequoia", f"Sequoia budget {budget}", StaticShape(shape.parents)))
    plan = specdec.sequoia_plan(acceptance, costs.verify.astype(np.float32),
                                costs.draft_level(4), MAX_DEPTH)
    rows.append(("Sequoia", "Sequoia hardware-aware", StaticShape(plan.shape.parents)))
    rows[-1][2].plan = (plan.budget, plan.depth)
    for budget in (14, 30):
        rows.append(("dynamic", f"EAGLE-2 rerank, budget {budget}", Expanded(
            4, 6, lambda parents, lp, b=budget: specdec.select_by_path_score(parents, lp, b))))
    for budget in (14, 30):
        rows.append(("dynamic", f"SpecExec best-first, budget {budget}", BestFirst(budget)))
    for gain in (0.3, 0.1):
        rows.append(("dynamic", f"OPT-Tree stop, min gain {gain}", Expanded(
            4, 6, lambda parents, lp, g=gain: specdec.select_by_path_score(parents, lp,
                                                                           LARGEST_TREE, g))))
    verify4, draft1 = float(costs.verify[4]), costs.draft_level(1)
    rows += [
        ("length", "SpecDec++ cumulative stop 0.7", ControlledChain(
            lambda: specdec.CumulativeStop(threshold=0.7, min_length=1, max_length=8), 8)),
        ("length", "Hugging Face heuristic", ControlledChain(
            lambda: specdec.HeuristicLength(initial=5, max_length=8), 8)),
        ("length", "batch average", ControlledChain(
            lambda: specdec.BatchAverageLength(initial=4, max_length=8), 8)),
        ("length", "goodput", ControlledChain(
            lambda: specdec.GoodputLength(draft_cost=draft1, verify_cost=verify4,
                                          max_length=8), 8)),
    ]
    return rows


def methods():
    """(family, name, options, draft width, lossless) for the specdec.decode methods."""
    m = specdec.Method
    return [
        ("method", "autoregressive", dict(method=m.AUTOREGRESSIVE), 1, True),
        ("method", "SD chain 4", dict(method=m.SD, depth=4), 1, True),
        ("method", "block SD chain 4", dict(method=m.SD_BLOCK, depth=4), 1, True),
        ("method", "SpecInfer 3 x 4", dict(method=m.SPECINFER, depth=4, width=3), 3, True),
        ("method", "SpecTr 3 x 4", dict(method=m.SPECTR, depth=4, width=3), 3, True),
        ("method", "RSD-C 3-1-1-1", dict(method=m.RSD_C, branching=[3, 1, 1, 1]), 3, True),
        ("method", "RSD-S 3 x 4", dict(method=m.RSD_S, depth=4, width=3), 3, True),
        ("lossy", "MTAD 3 x 4, tau 0.5", dict(method=m.MTAD, depth=4, width=3, tau=0.5), 3,
         False),
        ("lossy", "cascade (Chow) chain 4, alpha 0.5", dict(
            method=m.CASCADE, depth=4, cascade=specdec.Cascade(alpha=0.5)), 1, False),
        ("lossy", "lossy SD chain 4, alpha 0.3", dict(
            method=m.LOSSY, depth=4, lossy=specdec.Lossy(alpha=0.3)), 1, False),
    ]


# ---------------------------------------------------------------------------------------------
# The table and the plot


QUICK = {"chain k = 4", "k-ary 2x2x2", "Sequoia budget 14", "EAGLE-2 rerank, budget 14",
         "SpecExec best-first, budget 14", "OPT-Tree stop, min gain 0.1",
         "SpecDec++ cumulative stop 0.7", "Hugging Face heuristic", "batch average", "goodput",
         "autoregressive", "SD chain 4", "SpecTr 3 x 4", "RSD-S 3 x 4",
         "cascade (Chow) chain 4, alpha 0.5"}  # one or two rows of each family


def evaluate(temperatures, prompts, calibration_prompts, tokens, costs, target, draft, seed=1,
             log=print, quick=False):
    """{temperature: [row, ...]} with row = dict(family, name, efficiency, seconds, nodes,
    lossless, perplexity, outputs), and {temperature: (acceptance by rank, hardware-aware
    Sequoia's (budget, depth))}."""
    results, acceptances = {}, {}
    for temperature in temperatures:
        pair = Pair(target, draft, temperature, seed)
        acceptance = calibrate_by_rank(pair, calibration_prompts, tokens)
        log(f"temperature {temperature}: acceptance by rank "
            + " ".join(f"{a:.3f}" for a in acceptance))
        rows = []
        for family, name, policy in policies(acceptance, costs):
            if hasattr(policy, "plan"):
                acceptances[temperature] = (acceptance, policy.plan)
            if quick and name not in QUICK and name != "Sequoia hardware-aware":
                continue
            efficiency, seconds, nodes, outputs = run_policy(policy, pair, prompts, tokens, costs)
            rows.append(dict(family=family, name=name, efficiency=efficiency, seconds=seconds,
                             nodes=nodes, lossless=True, outputs=outputs))
            log(f"  {name:48s} {efficiency:5.2f} tokens/step {seconds * 1e3:6.2f} ms/token")
        for family, name, fields, width, lossless in methods():
            if quick and name not in QUICK:
                continue
            options = specdec.DecodeOptions(warp=specdec.Warp(temperature=temperature), seed=seed,
                                            **fields)
            try:
                efficiency, seconds, nodes, outputs = run_method(options, width, pair, prompts,
                                                                 tokens, costs)
            except specdec.Error as error:  # a method that does not apply at this temperature
                log(f"  {name:48s} skipped: {error}")
                continue
            rows.append(dict(family=family, name=name, efficiency=efficiency, seconds=seconds,
                             nodes=nodes, lossless=lossless, outputs=outputs))
            log(f"  {name:48s} {efficiency:5.2f} tokens/step {seconds * 1e3:6.2f} ms/token")
        for row in rows:
            row["perplexity"] = target_perplexity(target, prompts, row["outputs"])
        results[temperature] = rows
    return results, acceptances


def calibrate_by_rank(pair: Pair, prompts, tokens: int, ranks: int = 8) -> list[float]:
    """Sequoia's acceptance by child rank, measured with a wide tree (ranks children at the
    root, then 2, 1, 1) verified as the static shapes are, on calibration text."""
    estimator = specdec.AcceptanceEstimator()
    shape = StaticShape(shape_of([ranks, 2, 1, 1]))
    for sequence, prompt in enumerate(prompts):
        pair.reset(prompt, 1000 + sequence)
        while pair.committed() - len(prompt) < tokens:
            original = pair.verify

            def recording(tree, rows, original=original):
                kept = original(tree, rows)
                estimator.update(tree.parents, np.array(kept, np.int32))
                return kept

            pair.verify = recording
            try:
                shape.step(pair)
            finally:
                pair.verify = original
    return estimator.acceptance_by_rank(ranks)


def markdown(results, temperatures, acceptances) -> str:
    """The lossless table (best per column in bold), the lossy table with perplexities, and
    the measured acceptance by rank with hardware-aware Sequoia's choice."""
    names = []
    for rows in results.values():
        for row in rows:
            if (row["family"], row["name"]) not in names:
                names.append((row["family"], row["name"]))
    cell = {(t, r["name"]): r for t, rows in results.items() for r in rows}
    best = {}
    for t in temperatures:
        lossless = [r for r in results[t] if r["lossless"]]
        best[t, "efficiency"] = max(r["efficiency"] for r in lossless)
        best[t, "seconds"] = min(r["seconds"] for r in lossless)

    def number(t, name, key):
        row = cell.get((t, name))
        if row is None:
            return "-"
        value = row[key] * (1e3 if key == "seconds" else 1)
        text = f"{value:.2f}"
        return f"**{text}**" if row["lossless"] and row[key] == best[t, key] else text

    head = "| family | policy | " + " | ".join(
        f"T={t} tok/step | T={t} ms/tok" for t in temperatures) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(temperatures))]
    for family, name in names:
        if not cell.get((temperatures[0], name), {"lossless": True})["lossless"]:
            continue
        lines.append(f"| {family} | {name} | " + " | ".join(
            f"{number(t, name, 'efficiency')} | {number(t, name, 'seconds')}"
            for t in temperatures) + " |")
    lossy_temperatures = [t for t in temperatures if t > 0]
    lines += ["", "| policy | " + " | ".join(
        f"T={t} tok/step | T={t} ms/tok | T={t} target ppl" for t in lossy_temperatures) + " |",
        "|" + "---|" * (1 + 3 * len(lossy_temperatures))]
    for family, name in names:
        if family not in ("lossy",) and name not in ("autoregressive", "SD chain 4"):
            continue
        cells = []
        for t in lossy_temperatures:
            row = cell.get((t, name))
            cells.append("- | - | -" if row is None else
                         f"{row['efficiency']:.2f} | {row['seconds'] * 1e3:.2f} | "
                         f"{row['perplexity']:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| temperature | acceptance by child rank 0 .. 7 (calibration) | "
              "hardware-aware Sequoia: budget, depth |", "|---|---|---|"]
    for t in temperatures:
        acceptance, (budget, depth) = acceptances[t]
        lines.append(f"| {t} | " + " ".join(f"{a:.3f}" for a in acceptance)
                     + f" | {budget}, {depth} |")
    return "\n".join(lines) + "\n"


def plot(results, temperatures, costs, path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(temperatures) + 1, figsize=(4.2 * (len(temperatures) + 1),
                                                                   4.0))
    colours = {"chain": "tab:blue", "k-ary tree": "tab:orange", "Sequoia": "tab:green",
               "dynamic": "tab:red", "length": "tab:purple", "method": "tab:brown",
               "lossy": "tab:gray"}
    for ax, t in zip(axes, temperatures):
        for family, colour in colours.items():
            rows = [r for r in results[t] if r["family"] == family]
            if rows:
                ax.scatter([r["efficiency"] for r in rows], [r["seconds"] * 1e3 for r in rows],
                           color=colour, label=family, s=22,
                           marker="x" if family == "lossy" else "o")
        ax.set(xlabel="tokens per target call", ylabel="model ms per token",
               title=f"temperature {t}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    sizes = np.arange(len(costs.verify))
    for measured, fitted, label, colour in (
            (costs.verify_measured, costs.verify, "target (4 layers)", "tab:blue"),
            (costs.draft_measured, costs.draft, "draft (1 layer)", "tab:orange")):
        axes[-1].plot(sizes, measured * 1e3, ".", color=colour, alpha=0.5)
        axes[-1].plot(sizes, fitted * 1e3, color=colour, label=label + ", fitted")
    axes[-1].set(xlabel="tree nodes scored in one pass", ylabel="ms per forward pass",
                 title="measured forward cost")
    axes[-1].grid(alpha=0.3)
    axes[-1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(MODELS))
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--temperatures", default="0,0.7,1")
    parser.add_argument("--repeats", type=int, default=5, help="timings per tree size")
    parser.add_argument("--markdown", help="write the tables here")
    parser.add_argument("--plot", help="write the PNG plot here")
    parser.add_argument("--quick", action="store_true",
                        help="a row or two of each family, one prompt, 10 tokens, T = 0 and 1")
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts, args.tokens, args.temperatures, args.repeats = 1, 10, "0,1", 1
    torch.set_num_threads(1)
    models = pathlib.Path(args.models)
    target, draft, info = load_pair(models)
    temperatures = [float(t) for t in args.temperatures.split(",")]
    temperatures = [int(t) if t == int(t) else t for t in temperatures]
    prompts = prompts_from((models / "kjv_heldout.txt").read_text(), args.prompts)
    calibration = prompts_from((models / "kjv_calibration.txt").read_text(), args.prompts)
    verify_measured, verify = measure_costs(target, LARGEST_TREE, args.repeats)
    draft_measured, draft_cost = measure_costs(draft, LARGEST_TREE, args.repeats)
    costs = Costs(verify, draft_cost, verify_measured, draft_measured)
    print(f"forward cost, ms: target {costs.verify[0] * 1e3:.2f} (root only) to "
          f"{costs.verify[-1] * 1e3:.2f} ({LARGEST_TREE} nodes); draft "
          f"{costs.draft[0] * 1e3:.2f} to {costs.draft[-1] * 1e3:.2f}")
    results, acceptances = evaluate(temperatures, prompts, calibration, args.tokens, costs,
                                    target, draft, quick=args.quick)
    table = markdown(results, temperatures, acceptances)
    print(table)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table)
    if args.plot:
        plot(results, temperatures, costs, args.plot)
        print(f"wrote {args.plot}")
    return results, costs


if __name__ == "__main__":
    main()
