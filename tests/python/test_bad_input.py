"""One table of bad arrays against every public entry point that reads arrays.

The entry points are found by introspection: every function, constructor and method of the
type stubs (which test_stubs.py keeps equal to the extension) with a parameter annotated as an
array. Each needs a good example below, so a new entry point without one fails here instead of
going untested. For every array argument of an example the same bad values are tried (float64
rows, a dimension too many, leading dimensions swapped, empty rows or tokens, tokens out of
range, negative and beyond int32), each of which must raise specdec.Error naming the argument.
"""

import ast
from pathlib import Path

import numpy as np
import pytest

import specdec
from specdec import _specdec

V = 8  # the vocabulary of every example
ARRAY_TYPES = {"ArrayLike", "Array"}


# ---- the entry points, from the stubs --------------------------------------------------------


def mentions_array(annotation):
    return annotation is not None and any(
        isinstance(node, ast.Name) and node.id in ARRAY_TYPES for node in ast.walk(annotation))


def array_parameters(function, helpers=None):
    """The array parameters of a stub function, those of `**kwargs: Unpack[_Keywords]` (a
    stub-only TypedDict among `helpers`) included."""
    arguments = function.args
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    names = [a.arg for a in every if mentions_array(a.annotation)]
    if arguments.kwarg is not None and helpers:
        for node in ast.walk(arguments.kwarg.annotation):
            if isinstance(node, ast.Name) and node.id in helpers:
                names += helper_arrays(helpers[node.id], helpers)
    return names


def helper_arrays(helper, helpers):
    """The array fields of a stub-only TypedDict, those of the helpers it derives from first."""
    names = [name for base in helper.bases if isinstance(base, ast.Name) and base.id in helpers
             for name in helper_arrays(helpers[base.id], helpers)]
    return names + [item.target.id for item in helper.body
                    if isinstance(item, ast.AnnAssign) and mentions_array(item.annotation)]


def array_entry_points():
    """{'name' or 'Class.method': [array parameter names]} from the stubs."""
    stub = Path(_specdec.__file__).with_name("_specdec.pyi")
    body = ast.parse(stub.read_text()).body
    helpers = {n.name: n for n in body if isinstance(n, ast.ClassDef) and n.name.startswith("_")}
    entries = {}
    for node in body:
        if isinstance(node, ast.FunctionDef) and array_parameters(node, helpers):
            entries[node.name] = array_parameters(node, helpers)
        elif isinstance(node, ast.ClassDef) and node.name not in helpers:
            # A class's own methods and those of the stub-only helper classes it derives from.
            bases = [helpers[b.id] for base in node.bases for b in ast.walk(base)
                     if isinstance(b, ast.Name) and b.id in helpers]
            for item in [i for cls in [node, *bases] for i in cls.body]:
                if isinstance(item, ast.FunctionDef) and array_parameters(item):
                    entries[f"{node.name}.{item.name}"] = array_parameters(item)
    return entries


# ---- good examples ---------------------------------------------------------------------------


def rows(*shape, seed=0):
    """Probability rows (float32) of the given shape, the last dimension V."""
    values = np.random.default_rng(seed).random(shape, dtype=np.float32) + 0.1
    return (values / values.sum(axis=-1, keepdims=True)).astype(np.float32)


def tokens(*values):
    return np.array(values, np.int32)


def stream(**fields):
    return specdec.RandomStream(seed=3, **fields)


def markov():
    return specdec.MarkovModel(rows(V, V))


def markov_provider():
    provider = specdec.MarkovProvider(markov(), specdec.ProviderOptions(hidden_size=3))
    provider.reset(tokens(1, 2))
    return provider


def head():
    return specdec.ReDrafterHead.random(specdec.ReDrafterConfig(hidden=4, exit_dim=8, vocab=V), 1)


def saved_head(tmp_path):
    path = tmp_path / "head.safetensors"
    specdec.save_redrafter_head(str(path), head())
    return str(path)


def tensors_embedding_last():
    """The head's tensors with the embedding last: the first one is the one the table spoils,
    and `embedding` overrides embed_tokens.weight."""
    tensors = specdec.redrafter_head_tensors(head())
    embedding = tensors.pop("embed_tokens.weight")
    return {**tensors, "embed_tokens.weight": embedding}


def tree():
    return specdec.DraftTree(tokens(1, 2, 3), tokens(-1, 0, 0))


def tree_batch():
    return specdec.TreeBatch.from_tree(tree(), 2)


def compressed():
    return specdec.compress_beams(tokens(1, 2, 1, 3).reshape(2, 2), V)


def options():
    return specdec.DecodeOptions(method=specdec.Method.SD, depth=2, max_new_tokens=4, seed=1)


class Example:
    """A call with good arguments: `call(**args)` succeeds. `ids` names the arguments holding
    token ids of the vocabulary V (so V is out of range); `empty_ok` those an empty array is
    valid for; `any_shape` those any matrix is valid for (no other argument fixes its shape);
    `any_rank` those any array is valid for, whatever its number of dimensions (a file's tensors)."""

    def __init__(self, call, ids=(), empty_ok=(), any_shape=(), any_rank=(), **args):
        self.call, self.args = call, args
        self.ids, self.empty_ok = set(ids), set(empty_ok)
        self.any_rank = set(any_rank)
        self.any_shape = set(any_shape) | self.any_rank


def two_streams():
    return [stream(sequence=0), stream(sequence=1)]


def uniform_batch(rows_or_logits):
    """Two sequences of two draft tokens as [B, gamma + 1, V] / [B, gamma, V] / [B, gamma]."""
    return {f"target_{rows_or_logits}": rows(2, 3, V), f"draft_{rows_or_logits}": rows(2, 2, V, seed=1),
            "draft_tokens": tokens(1, 2, 3, 4).reshape(2, 2)}


def ragged_batch(rows_or_logits):
    """Sequences of two and one draft tokens in CSR form."""
    return {f"target_{rows_or_logits}": rows(5, V), f"draft_{rows_or_logits}": rows(3, V, seed=1),
            "draft_tokens": tokens(1, 2, 3), "draft_offsets": tokens(0, 2, 3)}


def constrained_batch(draft, tree=False):
    """ragged_batch("logits") (or a batch of two trees of 3 and 1 nodes, 6 rows) with every
    constraint given (a mask of ones)."""
    batch = ragged_batch("logits")
    if tree:
        batch = {"node_offsets": tokens(0, 3, 4), "tokens": tokens(1, 2, 3, 5),
                 "parents": tokens(-1, 0, 0, -1), "target_logits": rows(6, V),
                 "draft_logits": rows(6, V, seed=1)}
    if not draft:
        del batch["draft_logits"]
    per_sequence = {"allowed_token_ids": [tokens(1, 2, 3, 4, 5), tokens(3, 5)],
                    "stop_token_ids": [tokens(7), tokens(6)],
                    "prompt_token_ids": [tokens(1, 4), tokens(2)],
                    "output_token_ids": [tokens(3), tokens(5, 6)],
                    "bad_words": [[tokens(6, 7)], [tokens(4)]]}
    return dict(batch, ids={"tokens" if tree else "draft_tokens", *per_sequence},
                empty_ok=set(per_sequence) - {"bad_words"},
                bitmask=np.full((6 if tree else 5, 1), -1, np.int32), min_tokens=tokens(2, 3),
                repetition_penalty=np.array([1.5, 2.0], np.float32),
                frequency_penalty=np.array([0.5, 0.0], np.float32),
                presence_penalty=np.array([0.0, 0.25], np.float32), **per_sequence)


def draft_probs_batch():
    """constrained_batch(draft=True) with draft probabilities for the draft logits."""
    batch = constrained_batch(draft=True)
    logits = batch.pop("draft_logits")
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    batch["draft_probs"] = (probs / probs.sum(axis=1, keepdims=True)).astype(np.float32)
    batch["ids"] = batch["ids"] - {"draft_tokens"}
    return batch


def examples(tmp_path):
    r, d = rows(V), rows(V, seed=1)
    node = dict(target=r, draft=d, candidates=tokens(1, 2))
    cascade = dict(raw_target=r, raw_draft=d, target=r, draft=d)
    return {
        # core
        "warp_logits": Example(lambda **a: specdec.warp_logits(specdec.Warp(), **a),
                               any_shape={"logits"}, logits=rows(2, V)),
        "warp_probabilities": Example(lambda **a: specdec.warp_probabilities(specdec.Warp(), **a),
                                      probabilities=rows(2, V)),
        "sample": Example(lambda **a: specdec.sample(u=0.5, **a), probabilities=r),
        # one node
        "verify_node": Example(
            lambda **a: specdec.verify_node(specdec.MultiRound(), stream=stream(), **a),
            ids={"candidates"}, raw_target=r, raw_draft=d, **node),
        "verify_rejection": Example(
            lambda **a: specdec.verify_rejection(candidate=1, stream=stream(), **a),
            target=r, draft=d),
        "verify_multi_round": Example(lambda **a: specdec.verify_multi_round(stream=stream(), **a),
                                      ids={"candidates"}, **node),
        "verify_recursive": Example(lambda **a: specdec.verify_recursive(stream=stream(), **a),
                                    ids={"candidates"}, **node),
        "verify_spectr": Example(lambda **a: specdec.verify_spectr(gamma=0.0, stream=stream(), **a),
                                 ids={"candidates"}, **node),
        "verify_lossy": Example(
            lambda **a: specdec.verify_lossy(candidate=1, alpha=0.1, beta=1.0, stream=stream(), **a),
            target=r, draft=d),
        "verify_lossy_greedy": Example(
            lambda **a: specdec.verify_lossy_greedy(candidate=1, alpha=0.1, **a), target=r),
        "verify_cascade": Example(
            lambda **a: specdec.verify_cascade(candidate=1, rule=specdec.Deferral.CHOW, alpha=0.2,
                                               stream=stream(), **a), **cascade),
        "verify_typical": Example(
            lambda **a: specdec.verify_typical(epsilon=0.3, delta=0.09, stream=stream(), **a),
            ids={"candidates"}, target=r, candidates=tokens(1, 2)),
        "verify_greedy": Example(lambda **a: specdec.verify_greedy(**a), ids={"candidates"},
                                 target=r, candidates=tokens(1, 2)),
        "verify_target_only": Example(
            lambda **a: specdec.verify_target_only(stream=stream(), **a), ids={"candidates"},
            target=r, candidates=tokens(1, 2, 1)),
        # sequences
        "verify_chain": Example(
            lambda **a: specdec.verify_chain(specdec.Rejection(), stream=stream(), **a),
            ids={"draft_tokens"}, target_rows=rows(3, V), draft_rows=rows(2, V, seed=1),
            draft_tokens=tokens(1, 2), raw_target_rows=rows(3, V), raw_draft_rows=rows(2, V)),
        "verify_block": Example(
            lambda **a: specdec.verify_block(stream=stream(), **a), ids={"draft_tokens"},
            target_rows=rows(3, V), draft_rows=rows(2, V, seed=1), draft_tokens=tokens(1, 2)),
        "verify_tree": Example(
            lambda **a: specdec.verify_tree(specdec.Recursive(), tree(), stream=stream(), **a),
            target_rows=rows(4, V), draft_rows=rows(4, V, seed=1), raw_target_rows=rows(4, V),
            raw_draft_rows=rows(4, V)),
        "verify_chain_target_only": Example(
            lambda **a: specdec.verify_chain_target_only(stream=stream(), **a),
            ids={"draft_tokens"}, target_rows=rows(3, V), draft_tokens=tokens(1, 2)),
        "verify_tree_target_only": Example(
            lambda **a: specdec.verify_tree_target_only(tree(), stream=stream(), **a),
            target_rows=rows(4, V)),
        "verify_tree_target_only_thresholded": [
            Example(lambda **a: specdec.verify_tree_target_only_thresholded(
                tree(), threshold_single=0.9, threshold_acc=0.5, stream=stream(), **a),
                target_rows=rows(4, V)),
            Example(lambda **a: specdec.verify_tree_target_only_thresholded(tree(), **a),
                    target_rows=rows(4, V), node_coins=np.full(4, 0.3, np.float32))],
        "verify_tree_target_only_typical": Example(
            lambda **a: specdec.verify_tree_target_only_typical(
                tree(), rule=specdec.Typical(epsilon=0.3, delta=0.09), stream=stream(), **a),
            target_rows=rows(4, V)),
        "verify_chain_logits": Example(
            lambda **a: specdec.verify_chain_logits(specdec.Warp(), stream=stream(), **a),
            ids={"draft_tokens"}, target_logits=rows(3, V), draft_logits=rows(2, V, seed=1),
            draft_tokens=tokens(1, 2)),
        "verify_block_logits": Example(
            lambda **a: specdec.verify_block_logits(specdec.Warp(), stream=stream(), **a),
            ids={"draft_tokens"}, target_logits=rows(3, V), draft_logits=rows(2, V, seed=1),
            draft_tokens=tokens(1, 2)),
        "verify_chain_target_only_logits": Example(
            lambda **a: specdec.verify_chain_target_only_logits(specdec.Warp(), stream=stream(),
                                                                **a),
            ids={"draft_tokens"}, target_logits=rows(3, V), draft_tokens=tokens(1, 2)),
        "verify_tree_logits": Example(
            lambda **a: specdec.verify_tree_logits(specdec.Recursive(), specdec.Warp(), tree(),
                                                   stream=stream(), **a),
            target_logits=rows(4, V), draft_logits=rows(4, V, seed=1)),
        "verify_tree_target_only_logits": Example(
            lambda **a: specdec.verify_tree_target_only_logits(specdec.Warp(), tree(),
                                                               stream=stream(), **a),
            target_logits=rows(4, V)),
        "verify_mtad": Example(
            lambda **a: specdec.verify_mtad(tau=0.5, stream=stream(), **a), ids={"draft_tokens"},
            draft_tokens=tokens(1, 2), draft_log_probs=np.log(np.array([0.5, 0.4], np.float32)),
            target_rows=rows(3, V)),
        # exact laws and row helpers
        "exact_node_distribution": Example(
            lambda **a: specdec.exact_node_distribution(specdec.Rejection(), count=1, **a),
            target=r, draft=d, raw_target=r, raw_draft=d),
        "claimed_distribution": Example(
            lambda **a: specdec.claimed_distribution(specdec.Rejection(), count=1, **a),
            target=r, draft=d, raw_target=r, raw_draft=d),
        "spectr_gamma": Example(lambda **a: specdec.spectr_gamma(count=2, **a), target=r, draft=d),
        "lossy_tuned_beta": Example(lambda **a: specdec.lossy_tuned_beta(alpha=0.1, **a),
                                    target=r, draft=d),
        "cascade_target": Example(
            lambda **a: specdec.cascade_target(rule=specdec.Deferral.CHOW, alpha=0.2, **a),
            **cascade),
        "tv_distance": Example(lambda **a: specdec.tv_distance(**a), a=r, b=d),
        "entropy": Example(lambda **a: specdec.entropy(**a), probabilities=r),
        # batches
        "check_status": Example(lambda **a: specdec.check_status(**a), status=tokens(0, 0, 0)),
        "verify_chain_batch": [
            Example(lambda **a: specdec.verify_chain_batch(streams=two_streams(), **a),
                    ids={"draft_tokens"}, **uniform_batch("rows")),
            Example(lambda **a: specdec.verify_chain_batch(streams=two_streams(), **a),
                    ids={"draft_tokens"}, **ragged_batch("rows"))],
        "verify_chain_batch_logits": [
            Example(lambda **a: specdec.verify_chain_batch_logits(
                warps=specdec.Warp(), streams=two_streams(), **a),
                ids={"draft_tokens"}, **uniform_batch("logits")),
            Example(lambda **a: specdec.verify_chain_batch_logits(
                warps=specdec.Warp(), streams=two_streams(), **a),
                ids={"draft_tokens"}, **ragged_batch("logits"))],
        "verify_chain_batch_logits_constrained": Example(
            lambda **a: specdec.verify_chain_batch_logits_constrained(
                warps=specdec.Warp(), streams=two_streams(), **a),
            **constrained_batch(draft=True)),
        # A draft token outside the vocabulary is vLLM's placeholder here: rejected, no error.
        "verify_chain_batch_draft_probs_constrained": Example(
            lambda **a: specdec.verify_chain_batch_draft_probs_constrained(
                warps=specdec.Warp(), streams=two_streams(), **a),
            **draft_probs_batch()),
        "verify_chain_batch_target_only_logits_constrained": Example(
            lambda **a: specdec.verify_chain_batch_target_only_logits_constrained(
                warps=specdec.Warp(), streams=two_streams(), **a),
            **constrained_batch(draft=False)),
        "verify_block_batch_logits_constrained": Example(
            lambda **a: specdec.verify_block_batch_logits_constrained(
                warps=specdec.Warp(), streams=two_streams(), **a),
            **constrained_batch(draft=True)),
        # Block verification refuses a draft token it cannot verify (no placeholders).
        "verify_block_batch_draft_probs_constrained": Example(
            lambda **a: specdec.verify_block_batch_draft_probs_constrained(
                warps=specdec.Warp(), streams=two_streams(), **a),
            **dict(draft_probs_batch(), ids=constrained_batch(draft=True)["ids"])),
        "verify_chain_batch_greedy_logits_constrained": Example(
            specdec.verify_chain_batch_greedy_logits_constrained,
            **constrained_batch(draft=False)),
        "verify_chain_batch_typical_logits_constrained": Example(
            lambda **a: specdec.verify_chain_batch_typical_logits_constrained(
                specdec.Typical(), warps=specdec.Warp(), streams=two_streams(), **a),
            **constrained_batch(draft=False)),
        "verify_tree_batch_logits_constrained": Example(
            lambda **a: specdec.verify_tree_batch_logits_constrained(
                specdec.Recursive(), warps=specdec.Warp(), streams=two_streams(), **a),
            **constrained_batch(draft=True, tree=True)),
        "verify_tree_batch_target_only_logits_constrained": Example(
            lambda **a: specdec.verify_tree_batch_target_only_logits_constrained(
                warps=specdec.Warp(), streams=two_streams(), **a),
            **constrained_batch(draft=False, tree=True)),
        "verify_chain_batch_synthetic": Example(
            lambda **a: specdec.verify_chain_batch_synthetic(streams=two_streams(), **a),
            ids={"draft_tokens"}, target_rows=rows(5, V), draft_tokens=tokens(1, 2, 3),
            draft_offsets=tokens(0, 2, 3),
            synthetic_acceptance_rates=np.array([0.5, 0.25], dtype=np.float32)),
        "verify_chain_batch_fly": Example(
            lambda **a: specdec.verify_chain_batch_fly(streams=two_streams(), **a),
            ids={"draft_tokens"}, **ragged_batch("rows")),
        "verify_tree_batch": Example(
            lambda **a: specdec.verify_tree_batch(specdec.Recursive(), streams=two_streams(), **a),
            ids={"tokens"}, node_offsets=tokens(0, 3, 4), tokens=tokens(1, 2, 3, 5),
            parents=tokens(-1, 0, 0, -1), target_rows=rows(6, V), draft_rows=rows(6, V, seed=1)),
        "verify_chain_batch_target_only": [
            Example(lambda **a: specdec.verify_chain_batch_target_only(streams=two_streams(), **a),
                    ids={"draft_tokens"}, target_rows=rows(2, 3, V),
                    draft_tokens=tokens(1, 2, 3, 4).reshape(2, 2)),
            Example(lambda **a: specdec.verify_chain_batch_target_only(streams=two_streams(), **a),
                    ids={"draft_tokens"}, target_rows=rows(5, V), draft_tokens=tokens(1, 2, 3),
                    draft_offsets=tokens(0, 2, 3))],
        "verify_tree_batch_target_only": Example(
            lambda **a: specdec.verify_tree_batch_target_only(streams=two_streams(), **a),
            ids={"tokens"}, node_offsets=tokens(0, 3, 4), tokens=tokens(1, 2, 3, 5),
            parents=tokens(-1, 0, 0, -1), target_rows=rows(6, V)),
        # drafting
        "sample_iid": Example(lambda **a: specdec.sample_iid(stream=stream(), k=2, **a),
                              probabilities=r),
        "gumbel_top_k": Example(lambda **a: specdec.gumbel_top_k(k=2, stream=stream(), **a),
                                log_weights=np.log(r)),
        "gumbel_top_k_probabilities": Example(
            lambda **a: specdec.gumbel_top_k_probabilities(k=2, stream=stream(), **a),
            probabilities=r),
        "gumbel_top_k_batch": Example(
            lambda **a: specdec.gumbel_top_k_batch(specdec.RowKind.PROBABILITIES, k=2,
                                                   streams=[stream(), stream(sequence=1)], **a),
            rows=rows(2, V)),
        "stochastic_beam_level_batch": Example(
            lambda **a: specdec.stochastic_beam_level_batch(streams=[stream()], **a),
            draft_rows=rows(2, V), beam_counts=tokens(1), nodes=tokens(-1, -1).reshape(1, 2),
            log_probs=np.zeros((1, 2), np.float32), scores=np.zeros((1, 2), np.float32)),
        "load_redrafter_head": Example(
            lambda **a: specdec.load_redrafter_head(saved_head(tmp_path), **a),
            embedding=rows(V, 4)),
        "write_safetensors": Example(
            lambda **a: specdec.write_safetensors(str(tmp_path / "written.safetensors"), **a),
            any_rank={"tensors"}, tensors={"weight": rows(2, V)}),
        "redrafter_head_from_tensors": Example(
            lambda **a: specdec.redrafter_head_from_tensors(**a),
            tensors=tensors_embedding_last(), embedding=rows(V, 4)),
        "redrafter_step": Example(
            lambda **a: specdec.redrafter_step(head(), token=1, **a), hidden=rows(4),
            state=rows(4)),
        "redrafter_beam_search": Example(
            lambda **a: specdec.redrafter_beam_search(head(), init_token=1, width=2, length=2, **a),
            hidden=rows(4)),
        "redrafter_stochastic_beam_search": Example(
            lambda **a: specdec.redrafter_stochastic_beam_search(head(), init_token=1, width=2,
                                                                 depth=2, stream=stream(), **a),
            hidden=rows(4)),
        # trees
        "DraftTree.__init__": Example(lambda **a: specdec.DraftTree(**a), empty_ok={"tokens"},
                                      tokens=tokens(1, 2), parents=tokens(-1, 0)),
        "kv_compaction": Example(lambda **a: specdec.kv_compaction(tree(), 4, **a),
                                 empty_ok={"accepted"}, accepted=tokens(0)),
        "pack_accepted_paths": Example(
            lambda **a: specdec.pack_accepted_paths([tree(), tree()], **a),
            empty_ok={"accepted"}, context_lengths=tokens(4, 5),
            accepted=[tokens(0), tokens(0, 1)]),
        "prefix_match": Example(lambda **a: specdec.prefix_match(vocab=V, **a), ids={"beams"},
                                beams=tokens(1, 2, 1, 3).reshape(2, 2)),
        "compress_beams": Example(lambda **a: specdec.compress_beams(vocab=V, **a),
                                  ids={"beams"}, beams=tokens(1, 2, 1, 3).reshape(2, 2)),
        "unpack_beams": Example(lambda **a: specdec.unpack_beams(compressed(), **a),
                                packed=np.arange(3, dtype=np.float32)),
        "export_flashinfer_masks": Example(
            lambda **a: specdec.export_flashinfer_masks([tree(), tree()], **a),
            context_lengths=tokens(4, 5)),
        "parents_from_sibling_lists": Example(
            lambda **a: specdec.parents_from_sibling_lists(**a),
            first_child=np.array([1, 2, -1], np.int64),
            next_sibling=np.array([-1, -1, -1], np.int64)),
        # tree shapes and draft lengths
        "sequoia_tree": Example(lambda **a: specdec.sequoia_tree(budget=4, max_depth=2, **a),
                                acceptance_by_rank=np.array([0.6, 0.3], np.float32)),
        "expected_accepted": Example(lambda **a: specdec.expected_accepted(**a),
                                     empty_ok={"parents"},
                                     acceptance_by_rank=np.array([0.6, 0.3], np.float32),
                                     parents=tokens(-1, 0, -1)),
        "sequoia_plan": Example(lambda **a: specdec.sequoia_plan(draft_cost_per_level=0.1, **a),
                                acceptance_by_rank=np.array([0.6, 0.3], np.float32),
                                verify_cost=np.array([1.0, 1.0, 1.2], np.float32)),
        "select_by_path_score": Example(
            lambda **a: specdec.select_by_path_score(budget=2, **a), parents=tokens(-1, 0, 0),
            log_probs=np.log(np.array([0.5, 0.4, 0.3], np.float32))),
        "AcceptanceEstimator.update": Example(
            lambda **a: specdec.AcceptanceEstimator().update(**a), empty_ok={"accepted_nodes"},
            parents=tokens(-1, 0, -1), accepted_nodes=tokens(0, 1)),
        "goodput_length": Example(lambda **a: specdec.goodput_length(**a),
                                  acceptance_by_depth=np.array([0.5, 0.4], np.float32)),
        # decoding
        "decode": Example(
            lambda **a: specdec.decode(markov_provider(), markov_provider(), options=options(), **a),
            ids={"prompt"}, prompt=tokens(1, 2)),
        "decode_batch": Example(
            lambda **a: specdec.decode_batch([markov_provider()], [markov_provider()],
                                             options=options(), **a),
            ids={"prompts"}, prompts=[tokens(1, 2)]),
        "Decoder.reset": Example(
            lambda **a: specdec.Decoder(markov_provider(), markov_provider(), options()).reset(**a),
            ids={"prompt"}, prompt=tokens(1, 2)),
        "decode_redrafter": Example(
            lambda **a: specdec.decode_redrafter(
                specdec.MarkovProvider(markov(), specdec.ProviderOptions(hidden_size=V + 3)),
                specdec.markov_head(markov(), V + 3),
                options=specdec.ReDrafterOptions(width=2, depth=2, max_new_tokens=4), **a),
            ids={"prompt"}, prompt=tokens(1, 2)),
        "MarkovModel.__init__": Example(lambda **a: specdec.MarkovModel(**a), transition=rows(V, V)),
        "MarkovModel.next_probabilities": Example(lambda **a: markov().next_probabilities(**a),
                                                  ids={"context"}, context=tokens(1, 2)),
        "NGramModel.next_probabilities": Example(
            lambda **a: specdec.NGramModel(vocab=V).next_probabilities(**a), ids={"context"},
            empty_ok={"context"},  # the model conditions on up to `order` last tokens
            context=tokens(1, 2)),
        **{f"{cls}.{method}": example
           for cls, provider in (("MarkovProvider", markov_provider),
                                 ("NGramProvider", lambda: ngram_provider()))
           for method, example in provider_examples(provider).items()},
    }


def ngram_provider():
    provider = specdec.NGramProvider(specdec.NGramModel(vocab=V),
                                     specdec.ProviderOptions(hidden_size=3))
    provider.reset(tokens(1, 2))
    return provider


def provider_examples(provider):
    batch_rows = tree_batch().rows()
    return {
        "reset": Example(lambda **a: provider().reset(**a), ids={"prompt"}, prompt=tokens(1, 2)),
        "evaluate": Example(lambda **a: provider().evaluate(tree_batch(), **a),
                            logits=np.zeros((batch_rows, V), np.float32)),
        "evaluate_with_hidden": Example(
            lambda **a: provider().evaluate_with_hidden(tree_batch(), **a),
            logits=np.zeros((batch_rows, V), np.float32),
            hidden=np.zeros((batch_rows, 3), np.float32)),
        "commit": Example(lambda **a: provider().commit(tree_batch(), next=1, **a),
                          empty_ok={"kept_nodes"}, kept_nodes=tokens(0, 1)),
    }


# ---- the bad values --------------------------------------------------------------------------


def bad_values(good, kind, example, name):
    """(label, bad value) pairs for one array argument whose good value is `good`."""
    out = []
    if kind == "floats":
        out.append(("float64", good.astype(np.float64)))
        out.append(("empty", good[..., :0]))
    else:
        out.append(("float64", good.astype(np.float64)))
        if name not in example.empty_ok:
            out.append(("empty", good[..., :0] if good.ndim > 1 else good[:0]))
        if good.size:
            big = good.astype(np.int64)
            big.flat[0] = 2**40
            out.append(("beyond int32", big))
            if name in example.ids:
                out.append(("negative", np.where(np.arange(good.size).reshape(good.shape) == 0,
                                                 -3, good).astype(good.dtype)))
                out.append(("out of range", np.where(np.arange(good.size).reshape(good.shape) == 0,
                                                     V, good).astype(good.dtype)))
    if name not in example.any_rank:
        out.append(("one dimension more", good[None] if good.ndim > 1 else good[:, None]))
    if good.ndim >= 2 and good.shape[0] != good.shape[1] and name not in example.any_shape:
        swapped = good.reshape((good.shape[1], good.shape[0]) + good.shape[2:])
        out.append(("leading dimensions swapped", swapped))
    return out


def as_list(example):
    return example if isinstance(example, list) else [example]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return {entry: as_list(example)
            for entry, example in examples(tmp_path_factory.mktemp("heads")).items()}


def test_every_entry_point_has_an_example(table):
    entries = array_entry_points()
    assert len(entries) >= 40  # the stubs were read
    assert sorted(set(entries) - set(table)) == []
    assert sorted(set(table) - set(entries)) == []
    for entry, parameters in entries.items():
        covered = set().union(*(example.args for example in table[entry]))
        assert covered == set(parameters), entry


def test_the_good_examples_run(table):
    for entry, examples_of_entry in table.items():
        for example in examples_of_entry:
            example.call(**example.args)


def replaced(value, bad):
    """`value` with `bad` in place of its array (the first one of a list or dict of arrays) and
    the name the error must carry ('' for the argument's own name, else a dict's key)."""
    if isinstance(value, list):
        return [bad] + value[1:], ""
    if isinstance(value, dict):
        key = next(iter(value))
        return {**value, key: bad}, key
    return bad, ""


def first_array(value):
    if isinstance(value, list):
        return value[0]
    if isinstance(value, dict):
        return next(iter(value.values()))
    return value


def failures_of(example):
    failures = []
    for name in sorted(example.args):
        good = np.asarray(first_array(example.args[name]))
        kind = "floats" if good.dtype.kind == "f" else "ints"
        for label, bad in bad_values(good, kind, example, name):
            value, key = replaced(example.args[name], bad)
            expected = key or name
            try:
                example.call(**{**example.args, name: value})
            except specdec.Error as error:
                if expected not in error.argument and expected not in str(error):
                    failures.append(f"{name} ({label}): names {error.argument!r}: {error}")
            except Exception as error:  # noqa: BLE001 - any other exception is a failure here
                failures.append(f"{name} ({label}): {type(error).__name__}: {error}")
            else:
                failures.append(f"{name} ({label}): accepted")
    return failures


@pytest.mark.parametrize("entry", sorted(array_entry_points()))
def test_bad_arrays_raise_errors_naming_the_argument(table, entry):
    assert [f for example in table[entry] for f in failures_of(example)] == []
