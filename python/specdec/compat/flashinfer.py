"""FlashInfer's `chain_speculative_sampling` over specdec: the same arguments, shapes and 3-tuple,
verified by specdec's batched rejection sampler.

Switch: ``from specdec.compat.flashinfer import chain_speculative_sampling`` in place of
``from flashinfer.sampling import chain_speculative_sampling``.

What differs from FlashInfer:

- Draws come from specdec's Philox streams: request b uses ``RandomStream(seed=seed_b,
  sequence=b, position=offset_b)`` (positions offset_b .. offset_b + n for the chain), so tokens
  equal FlashInfer's only in distribution. `seed` and `offset` may hold one value per request and
  each is used (FlashInfer reads only the first); advance `offset` by n + 1 or more per call for
  fresh draws. Without `seed`, one seed is drawn from `generator` (or torch's global generator).
- `deterministic` is accepted and has no effect: every result is reproducible.
- A draft token outside ``[0, V)`` or with draft probability 0 is rejected without being read
  (FlashInfer accepts a zero-draft-probability token whenever the target gives it mass); the
  token at its position comes from the residual max(p - q, 0).
- Probability rows must sum to 1 (within 1%, then rescaled: float16 / bfloat16 rounding);
  FlashInfer reads unnormalised rows as they are. Inputs are torch tensors or NumPy arrays
  (float32, float16, bfloat16 probabilities), torch in, torch out; CUDA tensors go to specdec's CUDA backend when it was built, and raise specdec.Error
  naming the argument otherwise. Bad input raises specdec.Error naming the argument.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _specdec
from ._common import (as_numpy, draw_seeds, error, is_cuda, is_torch, renormalised,
                      seed_from_generator, verify_chains)

__all__ = ["chain_speculative_sampling"]


def chain_speculative_sampling(draft_probs: Any, draft_token_ids: Any, target_probs: Any,
                               maybe_output_accepted_token_num: Any = None,
                               maybe_output_emitted_draft_token_num: Any = None,
                               deterministic: bool = True, generator: Any = None,
                               seed: Any = None, offset: Any = None) -> tuple[Any, Any, Any]:
    """Verifies B chains of n draft tokens: draft_probs (B, n, V), draft_token_ids (B, n),
    target_probs (B, n + 1, V). Returns (output_token_ids (B, n + 1) int32 padded with -1,
    output_accepted_token_num (B,) int32, output_emitted_draft_token_num (B,) int32).

    "Emitted" counts the draft tokens kept (those before the first rejection); "accepted", as in
    FlashInfer, counts every position whose draft token passes its own test, also after the first
    rejection (a measure of draft/target agreement, each position tested with a fresh uniform).
    When the maybe_output_* counters (int32 (B,)) are given, the counts are added to them in place
    (zero them first) and they are returned."""
    cuda = any(is_cuda(x) for x in (draft_probs, draft_token_ids, target_probs))
    device = next((x.device for x in (target_probs, draft_probs, draft_token_ids) if is_cuda(x)),
                  None)
    draft = renormalised(_host(draft_probs, "draft_probs", "float", 3))
    tokens = _host(draft_token_ids, "draft_token_ids", "int", 2)
    target = renormalised(_host(target_probs, "target_probs", "float", 3))
    batch, n = tokens.shape
    vocab = target.shape[2]
    if draft.shape[:2] != (batch, n):
        raise error("draft_probs", f"has shape {tuple(draft.shape)}; expected ({batch}, {n}, V) "
                    "for draft_token_ids of shape (B, n)")
    if target.shape[:2] != (batch, n + 1):
        raise error("target_probs", f"has shape {tuple(target.shape)}; expected ({batch}, {n + 1}, "
                    "V): one row per draft position and the bonus row")
    if draft.shape[2] != vocab:
        raise error("draft_probs", f"has vocabulary {draft.shape[2]}; target_probs has {vocab}")
    if vocab == 0:
        raise error("target_probs", "has no columns (vocabulary 0)")
    for name, rows in (("draft_probs", draft), ("target_probs", target)):
        if rows.size and rows.min() < 0:
            raise error(name, "holds a negative probability")
    accepted_out = _counter(maybe_output_accepted_token_num, "maybe_output_accepted_token_num",
                            batch)
    emitted_out = _counter(maybe_output_emitted_draft_token_num,
                           "maybe_output_emitted_draft_token_num", batch)
    seeds = _seeds(seed, generator, batch)
    offsets = _per_row(offset, "offset", batch, 0)
    if (offsets > 2**32 - 1 - (n + 1)).any():  # stream positions are 32-bit
        raise error("offset", f"{int(offsets.max())} leaves no room for {n + 1} positions below 2^32")
    streams = [_specdec.RandomStream(seed=int(seeds[b]) % 2**64, sequence=b,
                                     position=int(offsets[b])) for b in range(batch)]
    if batch == 0:
        output, emitted = np.zeros((0, n + 1), np.int32), np.zeros(0, np.int32)
    elif cuda and _usable(tokens, draft).all():
        output, emitted = _on_device(draft, tokens, target, device, streams)
    else:
        output, emitted = verify_chains(target.reshape(batch * (n + 1), vocab),
                                        tokens.reshape(-1), np.full(batch, n, np.int64),
                                        draft.reshape(batch * n, vocab), streams,
                                        names={"target_rows": "target_probs",
                                               "draft_rows": "draft_probs",
                                               "draft_tokens": "draft_token_ids"})
    accepted = emitted + _later_passes(draft, tokens, target, np.asarray(emitted), streams)
    results = []
    for counts, out in ((accepted, accepted_out), (emitted, emitted_out)):
        counts = np.asarray(counts, np.int32)
        if out is None:
            results.append(_like(counts, target_probs, device))
        else:
            out += _like(counts, out, getattr(out, "device", None))
            results.append(out)
    return (_like(np.asarray(output, np.int32), target_probs, device), *results)


def _host(value: Any, name: str, kind: str, ndim: int) -> np.ndarray:
    """A host copy for the checks (a CUDA tensor is copied; the extension still reads it)."""
    if is_cuda(value):
        value = value.detach().cpu()
    return as_numpy(value, name, kind=kind, ndim=ndim)


def _usable(tokens: np.ndarray, draft: np.ndarray) -> np.ndarray:
    """Draft tokens inside the vocabulary that their draft row gives probability."""
    inside = (tokens >= 0) & (tokens < draft.shape[2])
    safe = np.where(inside, tokens, 0)
    return inside & (np.take_along_axis(draft, safe[..., None], axis=2)[..., 0] > 0)


def _later_passes(draft, tokens, target, emitted, streams):
    """FlashInfer's extra "accepted" count: positions after the first rejection whose draft
    token passes u * q(x) < p(x), u drawn from the request's stream in the USER domain."""
    batch, n = tokens.shape
    usable = _usable(tokens, draft)
    safe = np.where(usable, tokens, 0)[..., None]
    q = np.take_along_axis(draft, safe, axis=2)[..., 0]
    p = np.take_along_axis(target[:, :n], safe, axis=2)[..., 0]
    extra = np.zeros(batch, np.int32)
    for b in range(batch):
        first = int(emitted[b]) + 1  # the rejected position itself does not count
        if first >= n:
            continue
        u = streams[b].in_domain(_specdec.Domain.USER).uniforms(n)
        passes = usable[b] & (u * q[b] < p[b])
        extra[b] = int(passes[first:].sum())
    return extra


def _on_device(draft, tokens, target, device, streams):
    """The checked rows on the CUDA device, to the batch verifier (specdec.Error naming the
    argument if specdec was built without CUDA)."""
    import torch
    try:
        out, accepted = _specdec.verify_chain_batch(
            target_rows=torch.from_numpy(target).to(device),
            draft_rows=torch.from_numpy(draft).to(device),
            draft_tokens=torch.from_numpy(tokens.astype(np.int32)).to(device), streams=streams)
    except _specdec.Error as refused:
        names = {"target_rows": "target_probs", "draft_rows": "draft_probs",
                 "draft_tokens": "draft_token_ids"}
        raise error(names.get(refused.argument.split("[")[0], refused.argument),
                    refused.problem) from None
    return out.cpu().numpy(), accepted.cpu().numpy()


def _counter(value: Any, name: str, batch: int) -> Optional[Any]:
    if value is None:
        return None
    dtype = str(getattr(value, "dtype", ""))
    if dtype not in ("int32", "torch.int32"):
        raise error(name, f"has dtype {dtype or type(value).__name__}; expected int32 (added to "
                    "in place)")
    if tuple(value.shape) != (batch,):
        raise error(name, f"has shape {tuple(value.shape)}; expected ({batch},)")
    return value


def _per_row(value: Any, name: str, batch: int, default: int) -> np.ndarray:
    """An int or a 1-D array of 1 or B entries (FlashInfer's seed / offset), as B ints."""
    if value is None:
        return np.full(batch, default, np.int64)
    if isinstance(value, (int, np.integer)):
        if not 0 <= int(value) < 2**63:
            raise error(name, f"{int(value)} is outside [0, 2^63)")
        array = np.array([int(value)], np.int64)
    else:
        array = as_numpy(value.cpu() if is_cuda(value) else value, name, kind="int", ndim=1)
    if array.shape[0] not in (1, batch):
        raise error(name, f"has {array.shape[0]} entries; expected 1 or {batch}")
    if (array < 0).any():
        raise error(name, f"holds {int(array.min())}; expected values >= 0")
    return np.broadcast_to(array, (batch,))


def _seeds(seed: Any, generator: Any, batch: int) -> np.ndarray:
    if seed is not None:
        return _per_row(seed, "seed", batch, 0)
    if generator is not None:
        return np.full(batch, seed_from_generator(generator, "generator"), np.int64)
    return np.full(batch, int(draw_seeds(1)[0]), np.int64)


def _like(array: np.ndarray, reference: Any, device: Any) -> Any:
    """`array` as a torch tensor on `device` when `reference` is one, else as it is."""
    if is_torch(reference):
        import torch
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        return tensor.to(device) if device is not None else tensor
    return array
