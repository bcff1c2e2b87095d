"""What the engine adapters share: reading torch / NumPy inputs, errors, and chain verification
of ragged batches whose draft tokens may be unusable (a placeholder, an id outside the vocabulary,
a token its draft row gives no probability)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _specdec

_INDEX_KINDS = "iu"


def error(argument: str, problem: str) -> _specdec.Error:
    """A specdec.Error as the extension raises it: `argument`, `problem`, 'argument: problem'."""
    exception = _specdec.Error(f"{argument}: {problem}")
    exception.argument = argument
    exception.problem = problem
    return exception


def is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def is_cuda(value: Any) -> bool:
    return is_torch(value) and getattr(value, "is_cuda", False)


def as_numpy(value: Any, name: str, *, kind: str, ndim: Optional[int] = None,
             check_finite: bool = True) -> np.ndarray:
    """`value` (NumPy array, list, torch CPU tensor) as a NumPy array of float32 (kind 'float') or
    int64 (kind 'int'); a CUDA tensor (which the torch paths take where they lie) or the wrong
    kind or rank raises specdec.Error naming it. check_finite=False skips the pass that refuses
    NaN and +inf (for a caller whose next call checks them)."""
    if is_cuda(value):
        raise error(name, "is a CUDA tensor where a host array is read")
    if is_torch(value):
        value = value.detach()
        if kind == "float" and value.is_floating_point():
            value = value.float()  # bfloat16 has no NumPy type
        array = value.numpy()
    else:
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise error(name, f"is not an array ({e})") from None
    if ndim is not None and array.ndim != ndim:
        raise error(name, f"has {array.ndim} dimensions; expected {ndim}")
    if kind == "float":
        if array.dtype.kind != "f":
            raise error(name, f"has dtype {array.dtype}; expected floating point")
        array = array.astype(np.float32, copy=False)
        total = array.sum() if check_finite else 0.0  # NaN or +inf makes it NaN or +inf
        if not (np.isfinite(total) or total == -np.inf):
            if np.isnan(array).any() or (array == np.inf).any():
                raise error(name, "holds NaN or +inf")
    else:
        if array.size and array.dtype.kind not in _INDEX_KINDS:
            raise error(name, f"has dtype {array.dtype}; expected integers")
        array = array.astype(np.int64, copy=False)
    return array


def per_request(value: Any, name: str, batch: int, *, kind: str, default: Any) -> np.ndarray:
    """A per-request parameter: None gives `default` for all, else it must have `batch` entries."""
    if value is None:
        return np.full(batch, default, np.float64 if kind == "float" else np.int64)
    array = as_numpy(value, name, kind=kind, ndim=1)
    if array.shape[0] != batch:
        raise error(name, f"has {array.shape[0]} entries; expected one per request ({batch})")
    return array.astype(np.float64) if kind == "float" else array


def draw_seeds(count: int) -> np.ndarray:
    """Fresh stream seeds from torch's global generator when torch is loaded (so torch.manual_seed
    makes runs repeat, as engines expect), else from NumPy's."""
    try:
        import torch
    except ImportError:
        return np.random.randint(0, 2**63 - 1, size=count, dtype=np.int64)
    return np.array(torch.randint(0, 2**63 - 1, (count,), dtype=torch.int64).tolist(), np.int64)


def seed_from_generator(generator: Any, name: str) -> int:
    """One stream seed drawn from a caller's torch.Generator or numpy.random.Generator."""
    if type(generator).__module__.startswith("torch"):
        import torch
        return int(torch.randint(0, 2**63 - 1, (1,), generator=generator, dtype=torch.int64,
                                 device=generator.device))  # a CUDA generator draws there
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, 2**63 - 1))
    raise error(name, f"is a {type(generator).__name__}; expected a torch or NumPy generator")


def rescaled_rows(sums: Any) -> Any:
    """Which rows, by their sums (NumPy or torch), are within 1% of summing to 1 but not within
    float32 rounding of it: the float16 / bfloat16 rows renormalisation scales."""
    off = abs(sums - 1.0)
    return (off > 1e-4) & (off <= 1e-2)  # float32 rounding alone stays below 1e-4


def renormalised(rows: np.ndarray) -> np.ndarray:
    """Rows within 1% of summing to 1 (float16 / bfloat16 rounding) scaled to sum 1; other rows
    are left for the verifier to refuse."""
    sums = rows.sum(axis=-1, keepdims=True)
    scale = rescaled_rows(sums)
    if not scale.any():
        return rows  # the common case: no copy
    return (rows / np.where(scale, sums, 1.0)).astype(np.float32)


def verify_chains(target_rows: np.ndarray, draft_tokens: np.ndarray, counts: np.ndarray,
                  draft_rows: Optional[np.ndarray], streams: Any,
                  threads: int = 0, names: Optional[dict] = None, call: Any = None,
                  usable: Optional[np.ndarray] = None,
                  uniform: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Verifies B ragged chains: request b has counts[b] drafts and counts[b] + 1 warped target
    rows (the last gives the bonus token), laid out one request after another. Without draft rows
    the target-only rule runs. A draft token outside [0, V), or one whose draft row gives it no
    probability, is rejected without being read: the chain stops there and its token is drawn
    from that position's target row (with draft rows: from the residual max(p - q, 0), the
    distribution a rejection draws from). Returns tokens [B, max(counts) + 1] int32 padded with
    -1 and accepted [B] int32. An error of the verifier names the caller's argument: `names`
    maps the verifier's names ('target_rows', 'draft_rows', 'draft_tokens') to the caller's.
    `streams`: a sequence of RandomStream or a stream tensor (int32 [B, 6]).
    `call` replaces the verifier: call(draft_rows=None or rows, **the batch's arguments).
    `usable` [G]: the caller's own finding of which drafts are usable (as found here), when it
    has one already. `uniform`: every count is the same (then, every draft usable, one call on
    the rows as given: no offsets)."""
    batch, vocab = len(counts), target_rows.shape[1]
    width = int(counts.max()) + 1 if batch else 1  # before any chain is cut
    if usable is not None:
        valid = usable
    else:
        valid = (draft_tokens >= 0) & (draft_tokens < vocab)
        if draft_rows is not None:
            safe = np.where(valid, draft_tokens, 0)
            valid &= draft_rows[np.arange(len(draft_tokens)), safe] > 0
    all_valid = bool(valid.all())
    streams = streams if isinstance(streams, np.ndarray) else list(streams)
    if uniform and all_valid and batch:
        tokens = np.ascontiguousarray(draft_tokens, np.int32).reshape(batch, width - 1)
        args = dict(target_rows=np.ascontiguousarray(target_rows, np.float32),
                    draft_tokens=tokens, streams=streams, threads=threads)
        flat, accepted = _verify_call(call, draft_rows, args, names)
        return np.asarray(flat, np.int32), np.asarray(accepted, np.int32)
    offsets = np.zeros(batch + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if not all_valid:  # the rows a cut turns into residuals are checked first
        _check_cut_rows(names, target_rows=target_rows, draft_rows=draft_rows)
        target_rows, draft_tokens, counts, draft_rows = _cut_at_unusable(
            target_rows, draft_tokens, counts, draft_rows, offsets, valid)
        offsets = np.zeros(batch + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
    args = dict(target_rows=np.ascontiguousarray(target_rows, np.float32),
                draft_tokens=np.ascontiguousarray(draft_tokens, np.int32),
                draft_offsets=offsets.astype(np.int32),
                streams=streams, threads=threads)
    flat, accepted = _verify_call(call, draft_rows, args, names)
    flat = np.asarray(flat)
    if flat.shape[0] == batch * width:  # every chain uncut at the longest length: rows of flat
        return flat.reshape(batch, width).astype(np.int32), np.asarray(accepted, np.int32)
    # Request b's tokens start at flat[offsets[b] + b]; slots past its counts[b] + 1 stay -1.
    slot = np.arange(width)
    take = np.minimum((offsets[:-1] + np.arange(batch))[:, None] + slot, max(flat.shape[0] - 1, 0))
    out = np.where(slot <= counts[:, None], flat[take] if flat.size else -1, -1).astype(np.int32)
    return out, np.asarray(accepted, np.int32)


def _verify_call(call: Any, draft_rows: Optional[np.ndarray], args: dict,
                 names: Optional[dict]) -> tuple[Any, Any]:
    """The chain verifier (`call`, or specdec's with or without draft rows) on `args`; its
    errors name the caller's arguments (`names`: the verifier's row numbers are not the
    caller's)."""
    drafts = None if draft_rows is None else np.ascontiguousarray(draft_rows, np.float32)
    try:
        if call is not None:
            return call(draft_rows=drafts, **args)
        if drafts is None:
            return _specdec.verify_chain_batch_target_only(**args)
        return _specdec.verify_chain_batch(draft_rows=drafts, **args)
    except _specdec.Error as refused:
        base = refused.argument.split("[")[0]
        if names and base in names:
            raise error(names[base], refused.problem) from None
        raise


def _check_cut_rows(names: Optional[dict], **rows: Any) -> None:
    """specdec.Error naming rows (NumPy or torch) that hold a negative, NaN or infinite entry:
    a cut chain's residual max(p - q, 0) would hide them from the verifier."""
    for name, values in rows.items():
        if values is None or not values.shape[0]:
            continue
        low, total = values.min(), values.sum()
        if not (low >= 0 and abs(float(total)) < float("inf")):
            raise error((names or {}).get(name, name), "holds a negative probability, NaN or inf")


def _cut_at_unusable(target_rows, draft_tokens, counts, draft_rows, offsets, valid):
    """Each chain cut before its first unusable draft token; the row there becomes the row its
    token is drawn from."""
    rows, tokens, new_counts, drafts = [], [], counts.copy(), []
    for b in range(len(counts)):
        lo, hi = offsets[b], offsets[b + 1]
        bad = np.flatnonzero(~valid[lo:hi])
        cut = int(bad[0]) if bad.size else int(counts[b])
        first_row = lo + b  # request b's first target row
        chain_rows = target_rows[first_row:first_row + cut + 1].copy()
        if cut < counts[b] and draft_rows is not None:
            residual = np.maximum(chain_rows[cut] - draft_rows[lo + cut], 0.0)
            if residual.sum() > 0:  # else p <= q everywhere: keep p
                chain_rows[cut] = residual / residual.sum()
        rows.append(chain_rows)
        tokens.append(draft_tokens[lo:lo + cut])
        if draft_rows is not None:
            drafts.append(draft_rows[lo:lo + cut])
        new_counts[b] = cut
    vocab = target_rows.shape[1]
    joined_drafts = None
    if draft_rows is not None:
        joined_drafts = np.concatenate(drafts) if drafts else np.zeros((0, vocab), np.float32)
    return (np.concatenate(rows), np.concatenate(tokens).astype(np.int64), new_counts,
            joined_drafts)


# The torch paths: torch tensors are read where they lie (CPU or CUDA), every step is a torch
# operation on their device or a batch binding (which runs on the device of its tensors, on
# PyTorch's current stream), and outputs are made there: no row, token or output crosses between
# host and device. The one branch on the device is the bindings' own dispatch.

_VERIFY_DOMAIN = 2  # Domain.VERIFY, a RandomStream's default
_USER_DOMAIN = 15  # Domain.USER


def torch_device(*values: Any) -> Any:
    """The device of the first torch tensor among `values` (None when there is none)."""
    return next((v.device for v in values if is_torch(v)), None)


def torch_rows(value: Any, name: str, ndim: int, device: Any) -> Any:
    """Floating rows as a contiguous float32 torch tensor on `device` (float16 / bfloat16 are
    widened there); a tensor on another device raises specdec.Error naming it."""
    import torch
    tensor = _on(value, name, device)
    if not tensor.is_floating_point():
        raise error(name, f"has dtype {tensor.dtype}; expected floating point")
    if tensor.dim() != ndim:
        raise error(name, f"has {tensor.dim()} dimensions; expected {ndim}")
    return tensor.to(torch.float32).contiguous()


def torch_ints(value: Any, name: str, ndim: Optional[int], device: Any) -> Any:
    """Integers as an int64 torch tensor on `device`."""
    import torch
    tensor = _on(value, name, device)
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
        raise error(name, f"has dtype {tensor.dtype}; expected integers")
    if ndim is not None and tensor.dim() != ndim:
        raise error(name, f"has {tensor.dim()} dimensions; expected {ndim}")
    return tensor.to(torch.int64)


def _on(value: Any, name: str, device: Any) -> Any:
    import torch
    if is_torch(value):
        if value.device != device:
            raise error(name, f"is on {value.device}, the other inputs on {device}")
        return value.detach()
    try:  # a NumPy array or list beside torch inputs: the caller's host data, put on `device`
        return torch.as_tensor(np.asarray(value), device=device)
    except (TypeError, ValueError, RuntimeError) as e:
        raise error(name, f"is not an array ({e})") from None


def row_refusal(refused: _specdec.Error, names: Any) -> bool:
    """Whether a verifier's error may be a row off by float16-like rounding: one naming the rows
    (the CPU's checks) or a status word (CUDA's, read back with check=True)."""
    return refused.argument in names or refused.argument.startswith("status")


def read_flags(*flags: Any) -> list:
    """Boolean scalar tensors read back together: on CUDA the one synchronisation of a check."""
    import torch
    return torch.stack([f.reshape(()) for f in flags]).tolist() if flags else []


def stream_words(seeds: Any, positions: Any, domain: int = _VERIFY_DOMAIN,
                 numbered: bool = True) -> Any:
    """The stream tensor (int32 [B, 6], specdec.stream_tensor's layout) of RandomStream(seed =
    seeds[b] mod 2^64, sequence = b (0 when not `numbered`), position = positions[b]) in
    `domain`: a torch tensor where `seeds` lie, or a NumPy array for NumPy seeds (int64;
    positions in [0, 2^32))."""
    batch = seeds.shape[0]
    if not is_torch(seeds):  # the 64-bit seeds' two words and the positions' low word, as bytes
        words = np.zeros((batch, 6), np.int32)
        words[:, :2] = np.ascontiguousarray(seeds, np.int64).view(np.int32).reshape(batch, 2)
        words[:, 3] = np.asarray(positions, np.int64).astype(np.uint32).view(np.int32)
        if numbered:
            words[:, 2] = np.arange(batch)
        words[:, 5] = domain
        return words
    import torch

    def word(x):  # the low 32 bits as a signed int32, the stream's bytes
        return (((x & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000).to(torch.int32)

    words = torch.zeros((batch, 6), dtype=torch.int32, device=seeds.device)
    words[:, 0], words[:, 1], words[:, 3] = word(seeds), word(seeds >> 32), word(positions)
    if numbered:
        words[:, 2] = torch.arange(batch, dtype=torch.int32, device=seeds.device)
    words[:, 5] = domain
    return words


def rescale_torch(rows: Any, sums: Any, scale: Any) -> Any:
    """`rows` with the rows `scale` marks divided by their `sums` (renormalised's torch form)."""
    import torch
    return rows / torch.where(scale, sums, torch.ones_like(sums))


def verify_chains_torch(target_rows: Any, draft_tokens: Any, counts: Any, draft_rows: Any,
                        streams: Any, width: int, usable: Any, all_usable: bool,
                        names: Optional[dict] = None, uniform: bool = False, threads: int = 0,
                        call: Any = None) -> tuple[Any, Any]:
    """verify_chains on torch tensors where they lie: B ragged chains (counts [B] int64 on the
    device of the rows, `width` - 1 >= max(counts) known to the caller), `usable` [G] the draft
    tokens inside the vocabulary with positive draft probability, `streams` a stream tensor.
    Returns tokens [B, width] int32 padded with -1 and accepted [B] int32. `uniform`: every
    count is width - 1 (then the rows may be [B, width, V] and the call needs no offsets).
    `call` replaces the verifier as in verify_chains; `threads` goes to the CPU backend."""
    import torch
    batch, device = counts.shape[0], counts.device
    vocab = target_rows.shape[-1]
    if uniform and all_usable:  # one call on the rows as given: no offsets, no gather
        offsets = slot = None
    else:
        offsets = torch.zeros(batch + 1, dtype=torch.int64, device=device)
        torch.cumsum(counts, 0, out=offsets[1:])
        slot = torch.arange(width, device=device)
    cut = counts
    if not all_usable:  # each chain cut before its first unusable token (shapes read back once)
        _check_cut_rows(names, target_rows=target_rows, draft_rows=draft_rows)
        target_rows = target_rows.reshape(-1, vocab)
        inside = slot[:-1] < counts[:, None]
        at = (offsets[:-1, None] + slot[:-1]).clamp(max=max(draft_tokens.shape[0] - 1, 0))
        bad = inside & ~usable[at] if draft_tokens.shape[0] else inside
        cut = torch.where(bad.any(1), bad.int().argmax(1), counts)
        keep_row = (slot[None, :] <= cut[:, None]) & (slot[None, :] <= counts[:, None])
        row_at = offsets[:-1, None] + torch.arange(batch, device=device)[:, None] + slot
        kept_rows = row_at[keep_row]  # request by request, slot by slot
        rows = target_rows[kept_rows]
        keep_token = slot[None, :-1] < cut[:, None]
        draft_tokens = draft_tokens[at[keep_token]] if draft_tokens.shape[0] else draft_tokens
        new_offsets = torch.zeros_like(offsets)
        torch.cumsum(cut, 0, out=new_offsets[1:])
        if draft_rows is not None:
            draft_rows = draft_rows.reshape(-1, vocab)
            # The row a rejection draws from: the residual max(p - q, 0) where it has mass.
            q_at = (offsets[:-1] + cut).clamp(max=max(draft_rows.shape[0] - 1, 0))
            p_at = new_offsets[:-1] + torch.arange(batch, device=device) + cut
            residual = (rows[p_at] - draft_rows[q_at]).clamp(min=0.0)
            mass = residual.sum(1, keepdim=True)
            swap = (cut < counts)[:, None] & (mass > 0)
            rows[p_at] = torch.where(swap, residual / torch.where(swap, mass, torch.ones_like(mass)),
                                     rows[p_at])
            draft_rows = draft_rows[at[keep_token]] if draft_rows.shape[0] else draft_rows
        target_rows, offsets, uniform = rows, new_offsets, False
    args = dict(target_rows=target_rows, draft_tokens=draft_tokens.to(torch.int32),
                streams=streams, threads=threads)
    if uniform:
        args["draft_tokens"] = args["draft_tokens"].reshape(batch, width - 1)
    else:
        args["draft_offsets"] = offsets.to(torch.int32)
        args["target_rows"] = target_rows.reshape(-1, vocab)
        if draft_rows is not None:
            draft_rows = draft_rows.reshape(-1, vocab)
    try:
        if call is not None:
            flat, accepted = call(draft_rows=draft_rows, **args)
        elif draft_rows is None:
            flat, accepted = _specdec.verify_chain_batch_target_only(**args)
        else:
            flat, accepted = _specdec.verify_chain_batch(draft_rows=draft_rows, **args)
    except _specdec.Error as refused:
        base = refused.argument.split("[")[0]
        if names and base in names:
            raise error(names[base], refused.problem) from None
        raise
    if uniform:
        return flat, accepted
    # Request b's tokens start at flat[offsets[b] + b]; slots past its cut + 1 stay -1.
    start = offsets[:-1] + torch.arange(batch, device=device)
    take = (start[:, None] + slot).clamp(max=max(flat.shape[0] - 1, 0))
    picked = flat[take] if flat.shape[0] else torch.full_like(take, -1, dtype=torch.int32)
    out = torch.where(slot[None, :] <= cut[:, None], picked, torch.full_like(picked, -1))
    return out.to(torch.int32), accepted
