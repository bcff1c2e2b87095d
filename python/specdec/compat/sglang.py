"""SGLang's tree verification over specdec: `tree_speculative_sampling_target_only` and
`verify_tree_greedy` with sgl-kernel's arguments, shapes and dtypes, writing into the caller's
`predicts`, `accept_index` and `accept_token_num` as SGLang does.

Switch: ``from specdec.compat.sglang import tree_speculative_sampling_target_only,
tree_speculative_sampling_target_only_rejmask, verify_tree_greedy`` in place of
``from sgl_kernel import ...``.

``tree_speculative_sampling_target_only_rejmask`` is sgl-kernel's faster form without
`draft_probs`: the rejected children are masked out of the row the final token is drawn from
instead of being written into a draft tensor, which gives the same tokens as the draft-less
form. Here it is the same walk (with ``draft_probs=None``), so it takes any number of children.

SGLang's layout: sequence b's draft tree has N = num_draft_tokens slots, slot 0 the root (the
last verified token); ``retrive_next_token[b, s]`` is the first child of slot s and
``retrive_next_sibling[b, s]`` its next sibling (-1 for none); ``retrive_index[b, s]`` is the
slot's position in the flat ``predicts``; ``candidates[b, s]`` its token. The walk starts at the
root, tries a node's children in sibling order and goes at most ``accept_index.shape[1] - 1``
deep; ``accept_index[b]`` gets the retrive indices of the root and the accepted nodes,
``predicts[accept_index[b, j]]`` the token emitted after them (the next accepted token, then the
correction or bonus token) and ``accept_token_num[b]`` the number of accepted drafts. Other entries
are left as they were (callers fill them with -1).

What differs from SGLang:

- Runs on the CPU: specdec has no device form of SGLang's walk (with its coins, thresholds and
  sibling order) yet, so CUDA tensors raise specdec.Error naming the first of them rather than
  being copied to the host and back. CPU torch tensors and NumPy arrays are read and written in
  place.
- Given SGLang's ``uniform_samples`` and ``uniform_samples_for_final_sampling`` the walk is
  SGLang's (one running coin per node; a child is accepted when the coin is at most the tried
  children's target mass / threshold_acc or its own target probability reaches threshold_single;
  all rejected, the token is drawn with the final uniform from the target without the tried
  children), so the tokens are SGLang's, except that: a token repeating an earlier sibling is
  never accepted (SGLang counts its probability twice, which is not lossless); the final draw
  sums in double precision (a uniform within float rounding of a boundary may pick the
  neighbour); a residual with no mass draws from the target row (SGLang emits token V - 1).
- With both uniform tensors None, draws come from specdec's Philox streams (sequence b uses
  ``RandomStream(seed, sequence=b)``; `seed` or `generator` pick the seed, else torch's global
  generator): at thresholds (1, 1) the output is then exactly the target's distribution.
- Thresholds below 1 are lossy, as in SGLang (specdec's C++ spells them
  ``AcceptanceThresholds{single, acc}``).
- `draft_probs` is read as SGLang reads it (subtracted from the row the final token is drawn
  from, except after a full-depth path) but never written (SGLang writes the probabilities of
  rejected children into it as scratch). It may be omitted or passed positionally in either of
  sgl-kernel's signatures (with or without `draft_probs`).
- A candidate outside ``[0, V)`` (a -1 placeholder included) is never tried and never used as an
  index: it and its subtree are left out of the walk. For `verify_tree_greedy` such a candidate
  simply never matches.
- Bad input raises specdec.Error naming the argument where SGLang reads out of bounds or loops:
  links out of range, cycles, a slot with two parents or unreachable from the root, retrive
  indices outside ``predicts``, coins or thresholds outside [0, 1], a probability row the walk
  reads that does not sum to 1 (rows it does not read are not checked; float16 / bfloat16 rows
  within 1% are rescaled). Both the ``retrive_*`` spelling and the ``retrieve_*`` spelling are
  accepted (by keyword). `deterministic` is accepted and has no effect.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _specdec
from ._common import (as_numpy, draw_seeds, error, is_cuda, is_torch, renormalised,
                      seed_from_generator, stream_words)

__all__ = ["tree_speculative_sampling_target_only", "tree_speculative_sampling_target_only_rejmask",
           "verify_tree_greedy"]

_LINKS = ("index", "next_token", "next_sibling")


def tree_speculative_sampling_target_only(
        predicts: Any, accept_index: Any, accept_token_num: Any, candidates: Any,
        retrive_index: Any = None, retrive_next_token: Any = None,
        retrive_next_sibling: Any = None, uniform_samples: Any = None,
        uniform_samples_for_final_sampling: Any = None, target_probs: Any = None,
        draft_probs: Any = None, threshold_single: float = 1.0, threshold_acc: float = 1.0,
        deterministic: bool = True, *, retrieve_index: Any = None,
        retrieve_next_token: Any = None, retrieve_next_sibling: Any = None, seed: Any = None,
        generator: Any = None) -> None:
    """Verifies bs draft trees without draft distributions with SGLang's walk and writes the
    result into `predicts` (int32 [bs * N]), `accept_index` (int32 [bs, num_spec_step]) and
    `accept_token_num` (int32 [bs]). candidates and the retrive tensors: int64 [bs, N];
    uniform_samples float32 [bs, N] and uniform_samples_for_final_sampling float32 [bs] (or both
    None: specdec's streams); target_probs float32 [bs, N, V] (row s: the target after slot s);
    draft_probs float32 [bs, N, V] or None; thresholds in [0, 1] (1, 1: lossless)."""
    if draft_probs is not None and isinstance(draft_probs, (int, float)):
        # sgl-kernel's signature without draft_probs, called positionally: shift the scalars.
        draft_probs, threshold_single, threshold_acc, deterministic = (
            None, draft_probs, threshold_single, threshold_acc)
    links, spellings, outputs = _begin(
        (predicts, accept_index, accept_token_num), candidates,
        (retrive_index, retrive_next_token, retrive_next_sibling),
        (retrieve_index, retrieve_next_token, retrieve_next_sibling),
        ("target_probs", "float32 [bs, num_draft_tokens, V]"), uniform_samples=uniform_samples,
        uniform_samples_for_final_sampling=uniform_samples_for_final_sampling,
        target_probs=target_probs, draft_probs=draft_probs)
    target = _rows(target_probs, "target_probs")
    draft = None if draft_probs is None else _rows(draft_probs, "draft_probs")
    coins = final = None
    streams = None
    if uniform_samples is None and uniform_samples_for_final_sampling is None:
        streams = _streams(seed, generator, int(target.shape[0]))
    else:
        coins = _host(uniform_samples, "uniform_samples", "float", 2)
        final = _host(uniform_samples_for_final_sampling, "uniform_samples_for_final_sampling",
                      "float", 1)
    _check_thresholds(threshold_single, threshold_acc)
    result = _call(spellings, outputs, candidates, links, target_probs=target, draft_probs=draft,
                   uniform_samples=coins, uniform_samples_for_final_sampling=final,
                   streams=streams, threshold_single=float(threshold_single),
                   threshold_acc=float(threshold_acc))
    outputs.write(*result)


def tree_speculative_sampling_target_only_rejmask(
        predicts: Any, accept_index: Any, accept_token_num: Any, candidates: Any,
        retrive_index: Any = None, retrive_next_token: Any = None,
        retrive_next_sibling: Any = None, uniform_samples: Any = None,
        uniform_samples_for_final_sampling: Any = None, target_probs: Any = None,
        threshold_single: float = 1.0, threshold_acc: float = 1.0, deterministic: bool = True,
        *, retrieve_index: Any = None, retrieve_next_token: Any = None,
        retrieve_next_sibling: Any = None, seed: Any = None, generator: Any = None) -> None:
    """sgl-kernel's rejection-mask form: tree_speculative_sampling_target_only without
    `draft_probs` (the final token is drawn from the target with the tried children masked out),
    with its arguments, shapes, dtypes and in-place outputs."""
    _check_thresholds(threshold_single, threshold_acc)
    tree_speculative_sampling_target_only(
        predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
        retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
        None, threshold_single, threshold_acc, deterministic, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        seed=seed, generator=generator)


def verify_tree_greedy(predicts: Any, accept_index: Any, accept_token_num: Any, candidates: Any,
                       retrive_index: Any = None, retrive_next_token: Any = None,
                       retrive_next_sibling: Any = None, target_predict: Any = None, *,
                       retrieve_index: Any = None, retrieve_next_token: Any = None,
                       retrieve_next_sibling: Any = None) -> None:
    """Greedy tree verification as SGLang's: at each node the child whose token equals the
    target's argmax there (``target_predict`` int64 [bs, N], read at the node's retrive index in
    the flattened tensor) is accepted; otherwise, or after a leaf or a full-depth path, that
    argmax is the emitted token. Writes `predicts`, `accept_index` and `accept_token_num` as
    tree_speculative_sampling_target_only does."""
    links, spellings, outputs = _begin(
        (predicts, accept_index, accept_token_num), candidates,
        (retrive_index, retrive_next_token, retrive_next_sibling),
        (retrieve_index, retrieve_next_token, retrieve_next_sibling),
        ("target_predict", "int64 [bs, num_draft_tokens]"), target_predict=target_predict)
    predicted = _host(target_predict, "target_predict", "int", 2)
    result = _call(spellings, outputs, candidates, links, target_predict=predicted)
    outputs.write(*result)


def _begin(outputs: tuple, candidates: Any, retrive: tuple, retrieve: tuple,
           required: tuple[str, str], **inputs: Any) -> tuple[list, dict, "_Outputs"]:
    """What every entry point does first: refuses CUDA tensors by name, reads the three links
    (retrive_* or retrieve_*), requires the input `required` = (name, its shape) among `inputs`
    and checks the outputs (predicts, accept_index, accept_token_num). Returns (links, the
    spelling of each link, the outputs)."""
    old = {f"retrive_{suffix}": value for suffix, value in zip(_LINKS, retrive)}
    new = {f"retrieve_{suffix}": value for suffix, value in zip(_LINKS, retrieve)}
    _refuse_cuda(**dict(zip(("predicts", "accept_index", "accept_token_num"), outputs)),
                 candidates=candidates, **old, **inputs, **new)
    links, spellings = _links(retrive, retrieve)
    name, shape = required
    if inputs[name] is None:
        raise error(name, f"is required ({shape})")
    return links, spellings, _Outputs(*outputs)


def _check_thresholds(threshold_single: Any, threshold_acc: Any) -> None:
    for name, value in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
        if not isinstance(value, (int, float, np.floating, np.integer)):
            raise error(name, f"is a {type(value).__name__}; expected a float in [0, 1]")


def _refuse_cuda(**arguments: Any) -> None:
    """specdec.Error naming the first CUDA tensor: the walk runs on the host only, and copying
    the engine's tensors there and back is what the caller should see, not what we hide."""
    for name, value in arguments.items():
        if value is not None and is_cuda(value):
            raise error(name, "is a CUDA tensor; specdec has no CUDA form of SGLang's tree walk "
                        "yet (docs/engines.md): pass CPU tensors")


def _links(retrive: tuple, retrieve: tuple) -> tuple[list, dict]:
    """The three link tensors under either spelling, and the spelling used for each name."""
    values, spellings = [], {}
    for suffix, old, new in zip(_LINKS, retrive, retrieve):
        if old is not None and new is not None:
            raise error(f"retrieve_{suffix}", f"given together with retrive_{suffix}; pass one")
        if old is None and new is None:
            raise error(f"retrive_{suffix}", "is required (int64 [bs, num_draft_tokens])")
        name = f"retrive_{suffix}" if new is None else f"retrieve_{suffix}"
        spellings[f"retrive_{suffix}"] = name
        values.append(_host(old if new is None else new, name, "int", 2))
    return values, spellings


def _call(spellings: dict, outputs: "_Outputs", candidates: Any, links: list, **kwargs: Any):
    """The compiled walk; its errors name the caller's spelling of the argument."""
    tokens = _host(candidates, "candidates", "int", 2)
    if outputs.accept_index.shape[0] != tokens.shape[0]:
        raise error("accept_index", f"has {outputs.accept_index.shape[0]} rows; candidates has "
                    f"{tokens.shape[0]} sequences")
    index, next_token, next_sibling = links
    try:
        return _specdec._sglang_verify_trees(
            candidates=np.ascontiguousarray(tokens), retrive_index=np.ascontiguousarray(index),
            retrive_next_token=np.ascontiguousarray(next_token),
            retrive_next_sibling=np.ascontiguousarray(next_sibling),
            num_spec_step=outputs.accept_index.shape[1], predicts_size=outputs.predicts.shape[0],
            **{k: (np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v)
               for k, v in kwargs.items()})
    except _specdec.Error as refused:
        base, _, rest = refused.argument.partition("[")
        if base in spellings and spellings[base] != base:
            raise error(spellings[base] + ("[" + rest if rest else ""), refused.problem) from None
        raise


class _Outputs:
    """The caller's three output tensors as writable host arrays sharing their memory."""

    def __init__(self, predicts: Any, accept_index: Any, accept_token_num: Any) -> None:
        self._tensors = (predicts, accept_index, accept_token_num)
        self.predicts = _writable(predicts, "predicts", 1)
        self.accept_index = _writable(accept_index, "accept_index", 2)
        self.accept_token_num = _writable(accept_token_num, "accept_token_num", 1)
        batch = self.accept_index.shape[0]
        if self.accept_token_num.shape[0] != batch:
            raise error("accept_token_num", f"has {self.accept_token_num.shape[0]} entries; "
                        f"accept_index has {batch} rows")

    def write(self, accept_index: np.ndarray, tokens: np.ndarray, accepted: np.ndarray) -> None:
        written = accept_index >= 0  # the root and the accepted nodes of each sequence
        self.accept_index[written] = accept_index[written]
        self.predicts[accept_index[written]] = tokens[written]
        self.accept_token_num[:] = accepted


def _writable(value: Any, name: str, ndim: int) -> np.ndarray:
    """An int32 output tensor (CPU) as a NumPy array sharing its memory."""
    if is_torch(value):
        if str(value.dtype) != "torch.int32":
            raise error(name, f"has dtype {value.dtype}; expected torch.int32 (written in place)")
        array = value.detach().numpy()
    elif isinstance(value, np.ndarray):
        if value.dtype != np.int32:
            raise error(name, f"has dtype {value.dtype}; expected int32 (written in place)")
        if not value.flags.writeable:
            raise error(name, "is read-only; it is written in place")
        array = value
    else:
        raise error(name, f"is a {type(value).__name__}; expected an int32 torch tensor or NumPy "
                    "array (written in place)")
    if array.ndim != ndim:
        raise error(name, f"has {array.ndim} dimensions; expected {ndim}")
    return array


def _host(value: Any, name: str, kind: str, ndim: int) -> np.ndarray:
    if value is None:
        raise error(name, "is required")
    return as_numpy(value, name, kind=kind, ndim=ndim)


def _rows(value: Any, name: str) -> np.ndarray:
    """Probability rows [bs, N, V] as float32. The walk checks the rows it reads (most are not
    read), so float32 rows are passed as they are; float16 / bfloat16 rows are widened and those
    within 1% of summing to 1 rescaled."""
    if is_torch(value) and str(value.dtype) == "torch.float32":
        array = value.detach().numpy()
    elif isinstance(value, np.ndarray) and value.dtype == np.float32:
        array = value
    else:
        return renormalised(as_numpy(value, name, kind="float", ndim=3))
    if array.ndim != 3:
        raise error(name, f"has {array.ndim} dimensions; expected 3")
    return array


def _streams(seed: Any, generator: Any, batch: int) -> np.ndarray:
    """The stream tensor of RandomStream(seed, sequence=b) for the batch's sequences."""
    if seed is not None:
        if not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
            raise error("seed", f"{seed!r} is not an integer in [0, 2^64)")
        base = int(seed)
    elif generator is not None:
        base = seed_from_generator(generator, "generator")
    else:
        base = int(draw_seeds(1)[0])
    return stream_words(np.full(batch, base, np.uint64).view(np.int64), np.zeros(batch, np.int64))
