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
  (float32, float16, bfloat16 probabilities), torch in, torch out. Torch tensors are used where
  they lie (CPU or CUDA): the work runs there as torch operations and specdec's batch calls,
  with no copy of rows, tokens or outputs between host and device (a specdec built without
  CUDA raises specdec.Error naming the argument). Bad input raises specdec.Error naming the
  argument.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import numpy as np

from .. import _specdec
from ._common import (_USER_DOMAIN, _VERIFY_DOMAIN, as_numpy, draw_seeds, error, is_torch,
                      read_flags, renormalised, rescale_torch, rescaled_rows, row_refusal,
                      seed_from_generator, stream_words, torch_device, torch_ints, torch_rows,
                      verify_chains, verify_chains_torch)

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
    device = torch_device(target_probs, draft_probs, draft_token_ids)
    if device is not None:
        return _chain_torch(draft_probs, draft_token_ids, target_probs,
                            maybe_output_accepted_token_num, maybe_output_emitted_draft_token_num,
                            generator, seed, offset, device)
    narrow = [np.asarray(x).dtype != np.float32 if not is_torch(x) else True
              for x in (draft_probs, target_probs)]
    # The verifier checks the rows (NaN, negative, sums): no pass of our own over them.
    draft = as_numpy(draft_probs, "draft_probs", kind="float", ndim=3, check_finite=False)
    tokens = as_numpy(draft_token_ids, "draft_token_ids", kind="int", ndim=2)
    target = as_numpy(target_probs, "target_probs", kind="float", ndim=3, check_finite=False)
    batch, n, vocab = _check_shapes(draft.shape, tokens.shape, target.shape)
    if narrow[0]:  # float16 / bfloat16 rounding: rescaled first
        draft = renormalised(draft)
    if narrow[1]:
        target = renormalised(target)
    accepted_out = _counter(maybe_output_accepted_token_num, "maybe_output_accepted_token_num",
                            batch)
    emitted_out = _counter(maybe_output_emitted_draft_token_num,
                           "maybe_output_emitted_draft_token_num", batch)
    seeds = _seeds(seed, generator, batch)
    offsets = _per_row(offset, "offset", batch, 0)
    if offset is not None:
        _check_positions(offsets.max() if batch else 0, n)
    words = stream_words(seeds, offsets)
    token_probs = _token_probs(tokens, draft, target)
    if batch == 0:
        output, emitted = np.zeros((0, n + 1), np.int32), np.zeros(0, np.int32)
    else:
        def verify(draft, target, usable):
            return verify_chains(target.reshape(batch * (n + 1), vocab), tokens.reshape(-1),
                                 np.full(batch, n, np.int64), draft.reshape(batch * n, vocab),
                                 words, names=_NAMES, usable=usable.reshape(-1), uniform=True)
        try:
            output, emitted = verify(draft, target, token_probs[0])
        except _specdec.Error as refused:  # rows off by float16-like rounding: rescaled once
            if not row_refusal(refused, _NAMES.values()) or all(narrow):
                raise
            rescaled = renormalised(draft), renormalised(target)
            if rescaled[0] is draft and rescaled[1] is target:
                raise
            draft, target = rescaled
            token_probs = _token_probs(tokens, draft, target)
            output, emitted = verify(draft, target, token_probs[0])
    def user() -> np.ndarray:  # the same streams in the USER domain, made only when needed
        words_user = words.copy()
        words_user[:, 5] = _USER_DOMAIN
        return words_user

    accepted = emitted + _later_passes(token_probs, np.asarray(emitted), user)
    results = []
    for counts, out in ((accepted, accepted_out), (emitted, emitted_out)):
        counts = np.asarray(counts, np.int32)
        if out is None:
            results.append(counts)
        else:
            out += counts
            results.append(out)
    return (np.asarray(output, np.int32), *results)


_NAMES = {"target_rows": "target_probs", "draft_rows": "draft_probs",
          "draft_tokens": "draft_token_ids"}


def _check_shapes(draft: tuple, tokens: tuple, target: tuple) -> tuple[int, int, int]:
    """B, n and V of FlashInfer's three inputs, or specdec.Error naming the one that disagrees."""
    batch, n = tokens
    vocab = target[2]
    if tuple(draft[:2]) != (batch, n):
        raise error("draft_probs", f"has shape {tuple(draft)}; expected ({batch}, {n}, V) "
                    "for draft_token_ids of shape (B, n)")
    if tuple(target[:2]) != (batch, n + 1):
        raise error("target_probs", f"has shape {tuple(target)}; expected ({batch}, {n + 1}, "
                    "V): one row per draft position and the bonus row")
    if draft[2] != vocab:
        raise error("draft_probs", f"has vocabulary {draft[2]}; target_probs has {vocab}")
    if vocab == 0:
        raise error("target_probs", "has no columns (vocabulary 0)")
    return batch, n, vocab


def _chain_torch(draft_probs, draft_token_ids, target_probs, accepted_out, emitted_out,
                 generator, seed, offset, device):
    """chain_speculative_sampling on torch tensors where they lie (CPU or CUDA): the same draws
    and outputs as the NumPy path, with torch operations on `device` and the batch bindings.
    No pass over the rows of its own: the verifier checks them (on CUDA through the status words,
    read back once), and float32 rows it refuses are rescaled as renormalised rescales them and
    tried again. The host reads back one flag (whether every draft is usable), and the seeds'
    and offsets' checks when those are tensors."""
    import torch
    draft = torch_rows(draft_probs, "draft_probs", 3, device)
    tokens = torch_ints(draft_token_ids, "draft_token_ids", 2, device)
    target = torch_rows(target_probs, "target_probs", 3, device)
    batch, n, vocab = _check_shapes(draft.shape, tokens.shape, target.shape)
    for name, out in (("maybe_output_accepted_token_num", accepted_out),
                      ("maybe_output_emitted_draft_token_num", emitted_out)):
        _counter(out, name, batch)
        if out is not None and not is_torch(out):
            raise error(name, "is not a torch tensor while the inputs are")
        if out is not None and out.device != device:
            raise error(name, f"is on {out.device}, the inputs on {device}")
    verify_words, user_words = _stream_words(seed, generator, offset, batch, n, device)
    narrow = [x.dtype != (torch.float32 if is_torch(x) else np.float32)
              for x in (draft_probs, target_probs)]
    if narrow[0]:  # float16 / bfloat16 rounding: rescaled as the NumPy path rescales
        draft = _rescaled(draft)
    if narrow[1]:
        target = _rescaled(target)
    token_probs = _token_probs(tokens, draft, target)
    if batch == 0:
        output = torch.zeros((0, n + 1), dtype=torch.int32, device=device)
        emitted = torch.zeros(0, dtype=torch.int32, device=device)
    else:
        def verify(draft, target, usable):
            return verify_chains_torch(
                target, tokens.reshape(-1),
                torch.full((batch,), n, dtype=torch.int64, device=device), draft, verify_words,
                n + 1, usable.reshape(-1), bool(usable.all()), names=_NAMES,
                uniform=True)
        try:
            output, emitted = verify(draft, target, token_probs[0])
        except _specdec.Error as refused:  # rows off by float16-like rounding: rescaled once
            if not row_refusal(refused, _NAMES.values()) or all(narrow):
                raise
            rescaled = [_rescaled(draft), _rescaled(target)]
            if not any(read_flags(*((r != x).any() for r, x in zip(rescaled, (draft, target))))):
                raise
            draft, target = rescaled
            token_probs = _token_probs(tokens, draft, target)
            output, emitted = verify(draft, target, token_probs[0])
    accepted = emitted + _later_passes(token_probs, emitted, user_words)
    results = []
    for counts, out in ((accepted, accepted_out), (emitted, emitted_out)):
        if out is None:
            results.append(counts.to(torch.int32))
        else:
            out += counts.to(torch.int32)
            results.append(out)
    return (output, *results)


def _rescaled(rows: Any) -> Any:
    """renormalised's rescaling of torch rows, where they lie."""
    sums = rows.sum(2, keepdim=True)
    return rescale_torch(rows, sums, rescaled_rows(sums))


def _stream_words(seed, generator, offset, batch, n, device):
    """The stream tensors (verify and USER domains) on `device`: made on the host from host
    seeds and offsets (checked there), or on the device from tensors (checked by one read-back)."""
    import torch
    if not is_torch(seed) and not is_torch(offset):
        seeds = _seeds(seed, generator, batch)
        positions = _per_row(offset, "offset", batch, 0)
        _check_positions(positions.max() if batch else 0, n)
        words = np.stack([stream_words(seeds, positions)] * 2)
        words[1, :, 5] = _USER_DOMAIN
        words = torch.as_tensor(words, device=device)  # on CUDA: one upload of 12 B words
        return words[0], words[1]
    seeds = _seeds_torch(seed, generator, batch, device)
    positions = _per_row_torch(offset, "offset", batch, device)
    bad_seed, negative, high = read_flags((seeds < 0).any(), (positions < 0).any(),
                                          (positions > 2**32 - 1 - (n + 1)).any())
    if bad_seed:
        raise error("seed", "holds a negative value; expected values >= 0")
    if negative:
        raise error("offset", "holds a negative value; expected values >= 0")
    if high:
        _check_positions(2**32, n)
    return tuple(stream_words(seeds, positions, domain) for domain in (_VERIFY_DOMAIN, _USER_DOMAIN))


def _check_positions(largest: int, n: int) -> None:
    if largest > 2**32 - 1 - (n + 1):  # stream positions are 32-bit
        raise error("offset", f"{int(largest)} leaves no room for {n + 1} positions below 2^32")


def _token_probs(tokens: Any, draft: Any, target: Any) -> tuple[Any, Any, Any]:
    """(usable, q, p) [B, n] for the draft tokens: whether each is inside the vocabulary with
    draft probability > 0, and its draft and target probabilities (read at id 0 where it
    is outside, then masked by `usable`). One gather per row tensor; NumPy or torch."""
    batch, n, vocab = tokens.shape[0], tokens.shape[1], draft.shape[2]
    if is_torch(tokens):
        import torch
        inside = (tokens >= 0) & (tokens < vocab)
        safe = torch.where(inside, tokens, 0)
        q, p = (torch.gather(rows, 2, safe[..., None])[..., 0] for rows in (draft, target[:, :n]))
    else:  # flat indices into the rows (int64 tokens: a negative one wraps above any V)
        inside = tokens.view(np.uint64) < vocab
        safe = tokens if inside.all() else np.where(inside, tokens, 0)
        draft_at, target_at = _row_starts(batch, n, vocab)
        q = draft.ravel().take(safe + draft_at)
        p = target.ravel().take(safe + target_at)
    return inside & (q > 0), q, p


@functools.lru_cache(maxsize=16)
def _row_starts(batch: int, n: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Where row (b, i) starts in the flat draft rows [B, n, V] and target rows [B, n + 1, V]
    (read-only; kept for the next call of the same shape)."""
    draft = np.arange(batch * n, dtype=np.int64).reshape(batch, n) * vocab
    target = draft + (np.arange(batch, dtype=np.int64) * vocab)[:, None]
    draft.flags.writeable = target.flags.writeable = False
    return draft, target


def _later_passes(token_probs, emitted, user_words):
    """FlashInfer's extra "accepted" count: positions after the first rejection whose draft
    token passes u * q(x) < p(x), u the request's uniforms in the USER domain (`user_words`, its
    stream tensor, or a function making it); `token_probs` from _token_probs; NumPy or torch,
    where the rows lie."""
    usable, q, p = token_probs
    n = usable.shape[1]
    if not is_torch(usable) and (not usable.size or emitted.min() == n):  # none after a rejection
        return np.zeros(usable.shape[0], np.int32)
    u = _specdec._fill_uniforms(user_words() if callable(user_words) else user_words, n)
    if is_torch(usable):
        import torch
        later = torch.arange(n, device=usable.device, dtype=emitted.dtype) > emitted[:, None]
        return (usable & later & (u * q < p)).sum(1, dtype=torch.int32)
    later = np.arange(n)[None, :] > emitted[:, None]
    return (usable & (np.asarray(u) * q < p) & later).sum(1).astype(np.int32)


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
        return np.full(batch, int(value), np.int64)
    array = as_numpy(value, name, kind="int", ndim=1)
    if array.shape[0] not in (1, batch):
        raise error(name, f"has {array.shape[0]} entries; expected 1 or {batch}")
    if (array < 0).any():
        raise error(name, f"holds {int(array.min())}; expected values >= 0")
    return np.broadcast_to(array, (batch,))


def _per_row_torch(value: Any, name: str, batch: int, device: Any) -> Any:
    """_per_row where the rows lie: an int, or a tensor of 1 or B entries (range checked by the
    caller's flags)."""
    import torch
    if value is None or isinstance(value, (int, np.integer)):
        return torch.as_tensor(_per_row(value, name, batch, 0).copy(), device=device)
    array = torch_ints(value, name, 1, device)
    if array.shape[0] not in (1, batch):
        raise error(name, f"has {array.shape[0]} entries; expected 1 or {batch}")
    return array.expand(batch)


def _seeds_torch(seed: Any, generator: Any, batch: int, device: Any) -> Any:
    if seed is not None and not isinstance(seed, (int, np.integer)):
        return _per_row_torch(seed, "seed", batch, device)
    import torch
    return torch.as_tensor(_seeds(seed, generator, batch).copy(), device=device)


def _seeds(seed: Any, generator: Any, batch: int) -> np.ndarray:
    if seed is not None:
        return _per_row(seed, "seed", batch, 0)
    if generator is not None:
        return np.full(batch, seed_from_generator(generator, "generator"), np.int64)
    return np.full(batch, int(draw_seeds(1)[0]), np.int64)
