"""vLLM v1's rejection sampler over specdec: the tensors vLLM's `RejectionSampler.forward` takes,
verified by specdec's chain verifiers.

Switch: replace ``vllm.v1.sample.rejection_sampler.RejectionSampler(sampler)`` with
``specdec.compat.vllm.RejectionSampler(sampler)``; `forward`, `parse_output` and the output
``[B, max_spec_len + 1]`` int32 padded with ``PLACEHOLDER_TOKEN_ID`` are vLLM's.

What differs from vLLM:

- Draws come from specdec's Philox streams, one stream per request seeded from the request's
  generator (one draw from it per call) or, for unseeded requests, from torch's global generator.
  Tokens therefore equal vLLM's only in distribution; greedy requests give exactly vLLM's tokens.
- The bonus token is drawn here from the bonus row (vLLM hands that row to its `Sampler`);
  penalties, bad words and allowed-token masks are not applied: apply them to `logits` first.
- Requests with draft probabilities are verified with standard rejection sampling (accept x with
  probability min(1, p(x) / q(x))), or with ``rejection_sample_method="block"`` by block
  verification (Sun et al. 2024, vLLM's "block": lossless, and at least as many accepted tokens
  in expectation); without them (``draft_probs=None``: n-gram, EAGLE and MTP
  greedy drafts) with the target-only rule (accept x with probability p(x), at a rejection draw
  from p with x removed), exactly vLLM's distributions. vLLM runs that rule for such drafts under
  "block" too, and so does this adapter: for drafts without probabilities no lossless rule
  accepts the first k tokens more often than the product of their target probabilities, which
  the target-only rule attains, so block verification has the same law there. "synthetic"
  (vLLM's benchmarking mode, whose acceptance ignores the target) is not offered: it raises
  specdec.Error.
- Under "block", a chain with an unusable draft token (below) is block-verified up to it, and
  when that prefix is all accepted the token there is drawn from the target row.
- A draft token outside ``[0, V)`` (the placeholder -1 included) or with draft probability 0 is
  rejected without being read, as in vLLM; the token at its position comes from the target row
  (with draft rows, from the residual max(p - q, 0)).
- Draft probability rows must sum to 1 (within 1%, then rescaled). Inputs are torch CPU
  tensors or NumPy arrays (torch in, torch out); a CUDA tensor raises
  specdec.Error naming it. Bad input raises specdec.Error naming the argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from .. import _specdec
from ._common import (as_numpy, draw_seeds, error, is_torch, per_request, renormalised,
                      seed_from_generator, verify_chains)

PLACEHOLDER_TOKEN_ID = -1
GREEDY_TEMPERATURE = 0
MAX_SPEC_LEN = 128
REJECTION_SAMPLE_METHODS = ("standard", "block")

__all__ = ["PLACEHOLDER_TOKEN_ID", "GREEDY_TEMPERATURE", "MAX_SPEC_LEN",
           "REJECTION_SAMPLE_METHODS", "SpecDecodeMetadata",
           "SamplingMetadata", "SamplerOutput", "RejectionSampler", "rejection_sample"]


@dataclass
class SpecDecodeMetadata:
    """vLLM's layout of a batch of drafts: `draft_token_ids` flattened [num_tokens],
    `num_draft_tokens` per request, `cu_num_draft_tokens` their inclusive cumulative sum (no
    leading 0), and the rows of `logits` that score each draft position and each bonus token."""
    draft_token_ids: Any
    num_draft_tokens: list
    cu_num_draft_tokens: Any
    target_logits_indices: Any
    bonus_logits_indices: Any
    logits_indices: Any = None
    cu_num_sampled_tokens: Any = None

    @property
    def max_spec_len(self) -> int:
        return max(self.num_draft_tokens, default=0)

    @classmethod
    def make_dummy(cls, draft_token_ids: Sequence[Sequence[int]], device: Any = None
                   ) -> "SpecDecodeMetadata":
        """The metadata of per-request draft lists, with logits laid out request by request:
        request b's draft positions, then its bonus row (torch tensors when torch is present)."""
        counts = [len(tokens) for tokens in draft_token_ids]
        flat = [int(t) for tokens in draft_token_ids for t in tokens]
        cu = np.cumsum(counts, dtype=np.int32) if counts else np.zeros(0, np.int32)
        target, bonus, start = [], [], 0
        for n in counts:
            target += range(start, start + n)
            bonus.append(start + n)
            start += n + 1
        arrays = [np.asarray(flat, np.int32), cu, np.asarray(target, np.int32),
                  np.asarray(bonus, np.int32), np.arange(start, dtype=np.int32),
                  (cu + np.arange(1, len(counts) + 1)).astype(np.int32)]
        try:
            import torch
            arrays = [torch.from_numpy(a).to(device or "cpu") for a in arrays]
        except ImportError:
            pass
        return cls(draft_token_ids=arrays[0], num_draft_tokens=counts, cu_num_draft_tokens=arrays[1],
                   target_logits_indices=arrays[2], bonus_logits_indices=arrays[3],
                   logits_indices=arrays[4], cu_num_sampled_tokens=arrays[5])


@dataclass
class SamplingMetadata:
    """The fields of vLLM's SamplingMetadata this adapter reads (a vLLM SamplingMetadata works
    as it is): per-request `temperature` (0 = greedy; None when all are greedy), `top_k`, `top_p`
    (None when unused), and `generators`, {request index: torch or NumPy generator}."""
    temperature: Any = None
    all_greedy: bool = True
    all_random: bool = False
    top_k: Any = None
    top_p: Any = None
    generators: dict = field(default_factory=dict)


@dataclass
class SamplerOutput:
    """`sampled_token_ids` [B, max_spec_len + 1] int32, padded with PLACEHOLDER_TOKEN_ID."""
    sampled_token_ids: Any
    logprobs_tensors: Any = None


def rejection_sample(draft_token_ids: Any, num_draft_tokens: Sequence[int],
                     cu_num_draft_tokens: Any, draft_probs: Any, logits: Any,
                     target_logits_indices: Any, bonus_logits_indices: Any, *,
                     temperature: Any = None, top_k: Any = None, top_p: Any = None,
                     seeds: Any = None, max_spec_len: Optional[int] = None,
                     threads: int = 0, rejection_sample_method: str = "standard") -> Any:
    """Verifies a vLLM batch and returns the tokens to append, [B, max_spec_len + 1] int32
    padded with -1.

    draft_token_ids [num_tokens] and num_draft_tokens [B] / cu_num_draft_tokens [B] (inclusive
    cumulative sum) give the drafts; logits [num_tokens + B, V] (float32, float16, bfloat16) the
    target, row target_logits_indices[i] scoring draft position i and row bonus_logits_indices[b]
    the bonus token of request b; draft_probs [num_tokens, V] the draft's probabilities, or None
    for drafts without them. temperature [B] (0 = greedy; None: all greedy), top_k [B] (0 or >= V:
    off), top_p [B] (1: off) warp the target rows; seeds [B] seed each request's stream (None:
    drawn from torch's global generator). Greedy requests emit the target's argmax up to and
    including the first mismatch, and the bonus argmax when every draft matches.
    rejection_sample_method: "standard" (token by token) or "block" (block verification of each
    sampled request that has draft probabilities; see the module docstring)."""
    block = _method(rejection_sample_method) == "block"
    rows = as_numpy(logits, "logits", kind="float", ndim=2)
    tokens = as_numpy(draft_token_ids, "draft_token_ids", kind="int", ndim=1)
    counts = as_numpy(list(num_draft_tokens) if not hasattr(num_draft_tokens, "shape")
                      else num_draft_tokens, "num_draft_tokens", kind="int", ndim=1)
    batch, vocab = counts.shape[0], rows.shape[1]
    if vocab == 0:
        raise error("logits", "has no columns (vocabulary 0)")
    if (counts < 0).any():
        raise error("num_draft_tokens", f"holds {int(counts.min())}; counts are >= 0")
    if counts.sum() != tokens.shape[0]:
        raise error("num_draft_tokens", f"sums to {int(counts.sum())}, but draft_token_ids "
                    f"has {tokens.shape[0]} tokens")
    cu = as_numpy(cu_num_draft_tokens, "cu_num_draft_tokens", kind="int", ndim=1)
    if cu.shape[0] != batch or (batch and not np.array_equal(cu, np.cumsum(counts))):
        raise error("cu_num_draft_tokens", "is not the inclusive cumulative sum of "
                    "num_draft_tokens")
    longest = int(counts.max()) if batch else 0
    if max_spec_len is not None and max_spec_len < longest:
        raise error("max_spec_len", f"{max_spec_len} is below the longest draft ({longest})")
    width = (longest if max_spec_len is None else int(max_spec_len)) + 1
    target_at = _row_indices(target_logits_indices, "target_logits_indices", tokens.shape[0],
                             rows.shape[0])
    bonus_at = _row_indices(bonus_logits_indices, "bonus_logits_indices", batch, rows.shape[0])
    probs = None
    if draft_probs is not None:
        probs = renormalised(as_numpy(draft_probs, "draft_probs", kind="float", ndim=2))
        if probs.shape != (tokens.shape[0], vocab):
            raise error("draft_probs", f"has shape {tuple(probs.shape)}; expected "
                        f"({tokens.shape[0]}, {vocab}) (num_tokens, V)")
        if probs.size and probs.min() < 0:
            raise error("draft_probs", "holds a negative probability")
    temps = per_request(temperature, "temperature", batch, kind="float",
                        default=GREEDY_TEMPERATURE)
    ks = per_request(top_k, "top_k", batch, kind="int", default=0)
    ps = per_request(top_p, "top_p", batch, kind="float", default=1.0)
    for b in range(batch):
        if not (np.isfinite(temps[b]) and (temps[b] >= 0 or temps[b] == -1)):
            raise error(f"temperature[{b}]", f"{temps[b]} is not a temperature (>= 0; 0 = greedy)")
        if not 0 < ps[b] <= 1:
            raise error(f"top_p[{b}]", f"{ps[b]} is outside (0, 1]")
    stream_seeds = (draw_seeds(batch) if seeds is None
                    else per_request(seeds, "seeds", batch, kind="int", default=0))
    out = np.full((batch, width), PLACEHOLDER_TOKEN_ID, np.int32)
    if batch:
        greedy = temps <= 0  # 0, and -1 in older vLLM
        order = np.concatenate([np.append(target_at[cu[b] - counts[b]:cu[b]], bonus_at[b])
                                for b in range(batch)])
        warped = _warp_requests(rows[order], counts, greedy, temps, ks, ps, vocab)
        streams = [_specdec.RandomStream(seed=int(s) % 2**64) for s in stream_seeds]
        groups = [np.arange(batch)] if probs is None else [np.flatnonzero(greedy),
                                                           np.flatnonzero(~greedy)]
        for g, members in enumerate(groups):
            if members.size == 0:
                continue
            uses_draft = probs is not None and g == 1
            sub = _subset(members, counts, warped, tokens, probs if uses_draft else None)
            member_streams = [streams[b] for b in members]
            if block and uses_draft:
                chosen = _verify_blocks(*sub, member_streams)
            else:
                chosen, _ = verify_chains(*sub, member_streams, threads, names=_NAMES)
            out[members, :chosen.shape[1]] = chosen
    if is_torch(logits):
        import torch
        return torch.from_numpy(out).to(logits.device)
    return out


class RejectionSampler:
    """vLLM v1's `RejectionSampler` interface: `forward(metadata, draft_probs, logits,
    sampling_metadata)` returns a SamplerOutput whose `sampled_token_ids` are
    [B, max_spec_len + 1] int32 padded with -1. See the module docstring for what differs."""

    def __init__(self, sampler: Any = None, *args: Any, threads: int = 0,
                 rejection_sample_method: str = "standard", **kwargs: Any) -> None:
        self.sampler = sampler  # kept for vLLM's signature; the bonus token is drawn here
        self.threads = threads
        # vLLM reads it from SpeculativeConfig.rejection_sample_method: "standard" or "block"
        self.rejection_sample_method = _method(rejection_sample_method)

    def forward(self, metadata: SpecDecodeMetadata, draft_probs: Any, logits: Any,
                sampling_metadata: Any) -> SamplerOutput:
        batch = len(metadata.num_draft_tokens)
        seeds = draw_seeds(batch)
        for index, generator in (getattr(sampling_metadata, "generators", None) or {}).items():
            if not 0 <= int(index) < batch:
                raise error("sampling_metadata.generators", f"names request {index} of {batch}")
            seeds[int(index)] = seed_from_generator(
                generator, f"sampling_metadata.generators[{index}]")
        all_greedy = bool(getattr(sampling_metadata, "all_greedy", False))
        temperature = None if all_greedy else sampling_metadata.temperature
        sampled = rejection_sample(
            metadata.draft_token_ids, metadata.num_draft_tokens, metadata.cu_num_draft_tokens,
            draft_probs, logits, metadata.target_logits_indices, metadata.bonus_logits_indices,
            temperature=temperature, top_k=getattr(sampling_metadata, "top_k", None),
            top_p=getattr(sampling_metadata, "top_p", None), seeds=seeds,
            max_spec_len=metadata.max_spec_len, threads=self.threads,
            rejection_sample_method=self.rejection_sample_method)
        return SamplerOutput(sampled_token_ids=sampled)

    __call__ = forward

    @staticmethod
    def parse_output(output_token_ids: Any, vocab_size: int,
                     discard_req_indices: Sequence[int] = (),
                     return_cu_num_tokens: bool = False
                     ) -> tuple[list[list[int]], Optional[list[int]]]:
        """Per-request token lists without placeholders and ids >= vocab_size; requests in
        discard_req_indices get empty lists. With return_cu_num_tokens also [0, n0, n0 + n1, ...]."""
        tokens = as_numpy(output_token_ids, "output_token_ids", kind="int", ndim=2)
        discard = set(int(i) for i in discard_req_indices)
        lists = [[] if b in discard else [int(t) for t in row if 0 <= t < vocab_size]
                 for b, row in enumerate(tokens)]
        cu = None
        if return_cu_num_tokens:
            cu = [0] + np.cumsum([len(x) for x in lists], dtype=np.int64).tolist()
        return lists, cu


_NAMES = {"draft_rows": "draft_probs", "draft_tokens": "draft_token_ids", "target_rows": "logits"}


def _method(value: Any) -> str:
    if value == "synthetic":
        raise error("rejection_sample_method", "'synthetic' (vLLM's benchmarking mode, whose "
                    "acceptance ignores the target: lossy) is not offered; use 'standard' or "
                    "'block'")
    if value not in REJECTION_SAMPLE_METHODS:
        raise error("rejection_sample_method", f"{value!r} is not one of 'standard', 'block'")
    return value


def _verify_blocks(rows, tokens, counts, probs, streams):
    """Block verification of each request (rows, tokens, counts and draft rows laid out as
    verify_chains takes them), one stream per request; a chain is cut before its first unusable
    draft token. Returns tokens [B, max(counts) + 1] int32 padded with -1."""
    batch, vocab = len(counts), rows.shape[1]
    out = np.full((batch, int(counts.max()) + 1 if batch else 1), -1, np.int32)
    start = 0
    for b in range(batch):
        n = int(counts[b])
        chain, draft = tokens[start:start + n], probs[start:start + n]
        usable = (chain >= 0) & (chain < vocab)
        usable[usable] &= draft[np.flatnonzero(usable), chain[usable]] > 0
        cut = n if usable.all() else int(np.flatnonzero(~usable)[0])
        target = rows[start + b:start + b + cut + 1]
        if cut == 0:  # nothing to verify: the token is a draw from the row
            _, emitted = _specdec.verify_chain_target_only(
                target, np.zeros(0, np.int32), streams[b])
        else:
            try:
                _, emitted = _specdec.verify_block(
                    np.ascontiguousarray(target, np.float32),
                    np.ascontiguousarray(draft[:cut], np.float32),
                    np.ascontiguousarray(chain[:cut], np.int32), streams[b])
            except _specdec.Error as refused:
                base = refused.argument.split("[")[0]
                raise error(_NAMES.get(base, base), refused.problem) from None
        out[b, :len(emitted)] = emitted
        start += n
    return out


def _row_indices(value: Any, name: str, count: int, rows: int) -> np.ndarray:
    indices = as_numpy(value, name, kind="int", ndim=1)
    if indices.shape[0] != count:
        raise error(name, f"has {indices.shape[0]} entries; expected {count}")
    bad = np.flatnonzero((indices < 0) | (indices >= rows))
    if bad.size:
        raise error(f"{name}[{bad[0]}]", f"row {int(indices[bad[0]])} is outside logits' {rows} rows")
    return indices


def _warp_requests(rows, counts, greedy, temps, ks, ps, vocab):
    """Each request's rows warped by its own temperature / top-k / top-p, one call per distinct
    warp (greedy rows become the one-hot argmax)."""
    owner = np.repeat(np.arange(len(counts)), counts + 1)
    settings = [(0.0, 0, 1.0) if greedy[b] else
                (float(temps[b]), int(ks[b]) if 0 < ks[b] < vocab else 0, float(ps[b]))
                for b in range(len(counts))]
    if len(set(settings)) == 1:  # one warp for the batch: no masked copies
        t, k, p = settings[0]
        return np.asarray(_specdec.warp_logits(_specdec.Warp(temperature=t, top_k=k, top_p=p),
                                               rows))
    warped = np.empty_like(rows)
    for setting in set(settings):
        members = [b for b, s in enumerate(settings) if s == setting]
        mask = np.isin(owner, members)
        warp = _specdec.Warp(temperature=setting[0], top_k=setting[1], top_p=setting[2])
        warped[mask] = np.asarray(_specdec.warp_logits(warp, np.ascontiguousarray(rows[mask])))
    return warped


def _subset(members, counts, rows, tokens, probs):
    """The rows, tokens, counts and draft rows of the requests `members`, in their order."""
    if len(members) == len(counts):  # the whole batch, in order
        return rows, tokens, counts, probs
    row_start = np.concatenate([[0], np.cumsum(counts + 1)])
    token_start = np.concatenate([[0], np.cumsum(counts)])
    row_pick = np.concatenate([np.arange(row_start[b], row_start[b + 1]) for b in members])
    token_pick = np.concatenate([np.arange(token_start[b], token_start[b + 1])
                                 for b in members]).astype(np.int64)
    return (rows[row_pick], tokens[token_pick], counts[members],
            None if probs is None else probs[token_pick])
