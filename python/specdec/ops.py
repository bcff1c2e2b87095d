"""specdec's batch entry points as PyTorch custom operators (``torch.ops.specdec.*``).

Importing this module registers them with ``torch.library`` for the CPU and CUDA dispatch keys,
with a Meta implementation (shapes only) so tracers such as ``torch.compile`` can call them
without a graph break. The operators never raise on bad sequence data: they return the status
words (int32 [B + 1], see ``specdec.SequenceStatus``) last, for ``specdec.check_status`` after
the step. Streams are a stream tensor (``specdec.stream_tensor``); a shared warp is four scalars.

    verify_chain_batch(target_rows, draft_rows, draft_tokens, streams, draft_offsets=None)
        -> (emitted, accepted, status)
    verify_chain_batch_logits(target_logits, draft_logits, draft_tokens, streams, temperature,
                              top_k, top_p, min_p, draft_offsets=None)
        -> (emitted, accepted, status)
    verify_tree_batch(rule, node_offsets, tokens, parents, target_rows, draft_rows, streams)
        -> (accepted_nodes, accepted, final_tokens, bonus, status)
        rule: "recursive", "multi_round" or "rejection"
"""

import torch

from . import _specdec

_RULES = {"recursive": _specdec.Recursive, "multi_round": _specdec.MultiRound,
          "rejection": _specdec.Rejection}

_SCHEMAS = {
    "verify_chain_batch":
        "verify_chain_batch(Tensor target_rows, Tensor draft_rows, Tensor draft_tokens, "
        "Tensor streams, Tensor? draft_offsets=None) -> (Tensor, Tensor, Tensor)",
    "verify_chain_batch_logits":
        "verify_chain_batch_logits(Tensor target_logits, Tensor draft_logits, "
        "Tensor draft_tokens, Tensor streams, float temperature, int top_k, float top_p, "
        "float min_p, Tensor? draft_offsets=None) -> (Tensor, Tensor, Tensor)",
    "verify_tree_batch":
        "verify_tree_batch(str rule, Tensor node_offsets, Tensor tokens, Tensor parents, "
        "Tensor target_rows, Tensor draft_rows, Tensor streams) "
        "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
}


def _chain(target_rows, draft_rows, draft_tokens, streams, draft_offsets=None):
    return _specdec.verify_chain_batch(
        target_rows=target_rows, draft_rows=draft_rows, draft_tokens=draft_tokens,
        streams=streams, draft_offsets=draft_offsets, check=False)


def _chain_logits(target_logits, draft_logits, draft_tokens, streams, temperature, top_k, top_p,
                  min_p, draft_offsets=None):
    warp = _specdec.Warp(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    return _specdec.verify_chain_batch_logits(
        target_logits=target_logits, draft_logits=draft_logits, warps=warp,
        draft_tokens=draft_tokens, streams=streams, draft_offsets=draft_offsets, check=False)


def _rule(name):
    if name not in _RULES:
        raise _specdec.Error(f"rule: {name!r} is not one of {sorted(_RULES)}")
    return _RULES[name]()


def _tree(rule, node_offsets, tokens, parents, target_rows, draft_rows, streams):
    return _specdec.verify_tree_batch(
        _rule(rule), node_offsets=node_offsets, tokens=tokens, parents=parents,
        target_rows=target_rows, draft_rows=draft_rows, streams=streams, check=False)


def _int32(*shape, like):
    return torch.empty(shape, dtype=torch.int32, device=like.device)


def _chain_meta(rows, draft_tokens, streams, draft_offsets):
    if draft_offsets is None:  # uniform: [B, gamma] tokens
        batch, gamma = draft_tokens.shape
        emitted = _int32(batch, gamma + 1, like=rows)
    else:
        batch = draft_offsets.shape[0] - 1
        emitted = _int32(draft_tokens.shape[0] + batch, like=rows)
    return emitted, _int32(batch, like=rows), _int32(batch + 1, like=rows)


def _chain_shapes(target_rows, draft_rows, draft_tokens, streams, draft_offsets=None):
    return _chain_meta(target_rows, draft_tokens, streams, draft_offsets)


def _chain_logits_shapes(target_logits, draft_logits, draft_tokens, streams, temperature, top_k,
                         top_p, min_p, draft_offsets=None):
    return _chain_meta(target_logits, draft_tokens, streams, draft_offsets)


def _tree_shapes(rule, node_offsets, tokens, parents, target_rows, draft_rows, streams):
    batch = node_offsets.shape[0] - 1
    bonus = torch.empty((batch,), dtype=torch.uint8, device=target_rows.device)
    return (_int32(tokens.shape[0], like=target_rows), _int32(batch, like=target_rows),
            _int32(batch, like=target_rows), bonus, _int32(batch + 1, like=target_rows))


_IMPLS = {"verify_chain_batch": (_chain, _chain_shapes),
          "verify_chain_batch_logits": (_chain_logits, _chain_logits_shapes),
          "verify_tree_batch": (_tree, _tree_shapes)}

# Kept alive for the process: dropping a Library removes its registrations.
_library = torch.library.Library("specdec", "DEF")
for _name, _schema in _SCHEMAS.items():
    _library.define(_schema)
    _run, _shapes = _IMPLS[_name]
    _library.impl(_name, _run, "CPU")
    _library.impl(_name, _run, "CUDA")
    _library.impl(_name, _shapes, "Meta")
    if int(torch.__version__.split(".")[0]) < 2:  # 1.x: no Autograd fallthrough for meta
        _library.impl(_name, _shapes, "AutogradMeta")

verify_chain_batch = torch.ops.specdec.verify_chain_batch
verify_chain_batch_logits = torch.ops.specdec.verify_chain_batch_logits
verify_tree_batch = torch.ops.specdec.verify_tree_batch
