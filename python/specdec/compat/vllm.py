"""vLLM v1's rejection sampler over specdec: the tensors vLLM's `RejectionSampler.forward` takes,
verified by specdec's chain verifiers.

Switch: replace ``vllm.v1.sample.rejection_sampler.RejectionSampler(sampler, spec_config,
device)`` with ``specdec.compat.vllm.RejectionSampler(sampler, spec_config, device)``; `forward`,
`parse_output` and the output ``[B, max_spec_len + 1]`` int32 padded with
``PLACEHOLDER_TOKEN_ID`` are vLLM's. ``spec_config.rejection_sample_method`` picks the method
("standard", "block", "synthetic" or "fly"; anything else is a specdec.Error at construction) and
the fields those methods take are read from it (``synthetic_acceptance_rates``,
``fly_window_size``, ``fly_entropy_threshold``). The bonus tokens come from `sampler` on
``logits[bonus_logits_indices]`` as in vLLM, so the engine's penalties and processors apply;
``SamplerOutput.logprobs_tensors`` is filled when ``sampling_metadata.max_num_logprobs`` is set.

What differs from vLLM:

- Draws come from specdec's Philox streams, one stream per request seeded from the request's
  generator (one draw from it per call) or, for unseeded requests, from torch's global generator.
  Tokens therefore equal vLLM's only in distribution; greedy requests give exactly vLLM's tokens.
- Without a sampler (``RejectionSampler()``, or ``sampler=None``) the bonus token is drawn here
  from the warped bonus row, without the engine's penalties and processors.
- "synthetic" and "fly" are specdec's lossy rules of the same names (verify/synthetic.hpp,
  verify/fly.hpp; docs/engines.md says what they trade): synthetic accepts position i with
  probability ``synthetic_acceptance_rates[i]`` whatever the rows say (a rejected position takes
  a token from the target row without the draft token); fly keeps a draft token the lossless
  test rejects when the target allows it, the target row's entropy exceeds
  ``fly_entropy_threshold`` nats and the next ``fly_window_size`` drafts pass the lossless test.
  Greedy requests have one-hot rows (entropy 0), so fly never relaxes them.
- Requests with draft probabilities are verified with standard rejection sampling (accept x with
  probability min(1, p(x) / q(x))), or with ``rejection_sample_method="block"`` by block
  verification (Sun et al. 2024, vLLM's "block": lossless, and at least as many accepted tokens
  in expectation); without them (``draft_probs=None``: n-gram, EAGLE and MTP
  greedy drafts) with the target-only rule (accept x with probability p(x), at a rejection draw
  from p with x removed), exactly vLLM's distributions. vLLM runs that rule for such drafts under
  "block" too, and so does this adapter: for drafts without probabilities no lossless rule
  accepts the first k tokens more often than the product of their target probabilities, which
  the target-only rule attains, so block verification has the same law there.
- Under "block", a chain with an unusable draft token (below) is block-verified up to it, and
  when that prefix is all accepted the token there is drawn from the target row.
- A draft token outside ``[0, V)`` (the placeholder -1 included) or with draft probability 0 is
  rejected without being read, as in vLLM (under every method); the token at its position comes from the target row
  (with draft rows, from the residual max(p - q, 0)).
- Request constraints in `sampling_metadata` (penalties unless ``no_penalties``,
  ``allowed_token_ids_mask``, ``bad_words_token_ids``, ``min_tokens``) transform the target and
  bonus rows as vLLM's sampler does, each row's draft prefix counted as output: the fields are
  packed once per call and specdec's constrained verifiers transform each row as they read it,
  on the host ("standard" and "block", greedy requests by constrained greedy matching: another
  method, or CUDA tensors, with a constraint raise specdec.Error naming the field).
- Draft probability rows must sum to 1 (within 1%, then rescaled). Inputs are torch tensors
  or NumPy arrays (torch in, torch out). Torch tensors are used where they lie (CPU or CUDA):
  the checks, warps (_warp_rows), verification and logprobs run there, with no copy of rows,
  tokens or outputs between host and device and no loop over the batch; the host reads back a
  few flags. "block", "synthetic" and "fly" run on the host only (CUDA tensors raise
  specdec.Error naming rejection_sample_method or logits). Bad input raises specdec.Error
  naming the argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from .. import _specdec
from ._common import (as_numpy, draw_seeds, error, is_cuda, is_torch, per_request,
                      read_flags, renormalised, rescale_torch, rescaled_rows, row_refusal,
                      seed_from_generator, stream_words, torch_ints, torch_rows, verify_chains,
                      verify_chains_torch)

PLACEHOLDER_TOKEN_ID = -1
GREEDY_TEMPERATURE = 0
MAX_SPEC_LEN = 128
REJECTION_SAMPLE_METHODS = ("standard", "block", "synthetic", "fly")

Tensor = Any  # a torch tensor (CPU or CUDA) or a NumPy array, as the engine holds it

__all__ = ["PLACEHOLDER_TOKEN_ID", "GREEDY_TEMPERATURE", "MAX_SPEC_LEN",
           "REJECTION_SAMPLE_METHODS", "SpecDecodeMetadata", "SamplingMetadata",
           "SamplerOutput", "LogprobsTensors", "SpeculativeConfig", "RejectionSampler",
           "rejection_sample"]


@dataclass
class SpecDecodeMetadata:
    """vLLM's layout of a batch of drafts: `draft_token_ids` flattened [num_tokens],
    `num_draft_tokens` per request, `cu_num_draft_tokens` their inclusive cumulative sum (no
    leading 0), and the rows of `logits` that score each draft position and each bonus token."""
    draft_token_ids: Tensor
    num_draft_tokens: list
    cu_num_draft_tokens: Tensor
    target_logits_indices: Tensor
    bonus_logits_indices: Tensor
    logits_indices: Optional[Tensor] = None
    cu_num_sampled_tokens: Optional[Tensor] = None

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
    (None when unused), `generators`, {request index: torch or NumPy generator}, and
    `max_num_logprobs` (None: no logprobs; n: the sampled token's and the top n).

    The request constraints, applied to the target rows as vLLM's sampler applies them (each
    row's draft prefix counted as output): unless `no_penalties`, `repetition_penalties`,
    `frequency_penalties`, `presence_penalties` [B] over `prompt_token_ids` [B, P] (padded with
    ids >= V) and `output_token_ids` (B lists); `allowed_token_ids_mask` [B, V] bool (True:
    banned); `bad_words_token_ids` {request: [token lists]}; `min_tokens` {request: (count, stop
    ids)} (the stop ids banned while the output is shorter than count)."""
    temperature: Optional[Tensor] = None
    all_greedy: bool = True
    all_random: bool = False
    top_k: Optional[Tensor] = None
    top_p: Optional[Tensor] = None
    generators: dict = field(default_factory=dict)
    max_num_logprobs: Optional[int] = None
    no_penalties: bool = True
    prompt_token_ids: Optional[Tensor] = None
    frequency_penalties: Optional[Tensor] = None
    presence_penalties: Optional[Tensor] = None
    repetition_penalties: Optional[Tensor] = None
    output_token_ids: Optional[Sequence[Sequence[int]]] = None
    allowed_token_ids_mask: Optional[Tensor] = None
    bad_words_token_ids: dict = field(default_factory=dict)
    min_tokens: dict = field(default_factory=dict)


@dataclass
class SpeculativeConfig:
    """The fields of vLLM's SpeculativeConfig the sampler reads (a vLLM SpeculativeConfig works
    as it is): the method, the per-position acceptance rates of "synthetic" and the window and
    entropy threshold (nats) of "fly"."""
    rejection_sample_method: str = "standard"
    synthetic_acceptance_rates: Optional[Sequence[float]] = None
    fly_window_size: Optional[int] = None
    fly_entropy_threshold: Optional[float] = None


@dataclass
class LogprobsTensors:
    """vLLM's LogprobsTensors, one row per slot of `sampled_token_ids` (B * (max_spec_len + 1)
    rows, request by request): column 0 the slot's token, columns 1.. the top max_num_logprobs
    tokens, all under the raw target logits of the row that scored the slot (log-softmax);
    placeholder slots hold id -1, logprob -inf and rank -1. `selected_token_ranks` is the 1-based
    rank of the slot's token in its row."""
    logprob_token_ids: Tensor
    logprobs: Tensor
    selected_token_ranks: Tensor


@dataclass
class SamplerOutput:
    """`sampled_token_ids` [B, max_spec_len + 1] int32, padded with PLACEHOLDER_TOKEN_ID, and
    `logprobs_tensors` when the sampling metadata asks for them."""
    sampled_token_ids: Tensor
    logprobs_tensors: Optional[LogprobsTensors] = None


def rejection_sample(draft_token_ids: Tensor, num_draft_tokens: Sequence[int],
                     cu_num_draft_tokens: Tensor, draft_probs: Optional[Tensor], logits: Tensor,
                     target_logits_indices: Tensor, bonus_logits_indices: Tensor, *,
                     temperature: Optional[Tensor] = None, top_k: Optional[Tensor] = None,
                     top_p: Optional[Tensor] = None, seeds: Optional[Tensor] = None,
                     max_spec_len: Optional[int] = None, threads: int = 0,
                     rejection_sample_method: str = "standard",
                     synthetic_acceptance_rates: Optional[Sequence[float]] = None,
                     fly_window_size: int = 1, fly_entropy_threshold: float = 0.0,
                     bonus_token_ids: Optional[Tensor] = None,
                     constraints: Optional[dict] = None) -> Tensor:
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
    rejection_sample_method: "standard" (token by token), "block" (block verification of each
    sampled request that has draft probabilities), or the lossy "synthetic" (position i accepted
    with probability synthetic_acceptance_rates[i]) and "fly" (fly_window_size,
    fly_entropy_threshold); see the module docstring. bonus_token_ids [B] (the engine sampler's
    draws) replace the bonus tokens drawn here; with them bonus_logits_indices is not read.
    constraints: SamplingMetadata's request constraints as RejectionSampler reads them
    ({field: value}, "standard" and "block" on the CPU only), applied to the target and bonus
    rows by specdec's constrained verifiers."""
    method = _method(rejection_sample_method)
    block = method == "block"
    if is_torch(logits) and not block and constraints is None:
        return _rejection_sample_torch(
            draft_token_ids, num_draft_tokens, cu_num_draft_tokens, draft_probs, logits,
            target_logits_indices, bonus_logits_indices, temperature=temperature, top_k=top_k,
            top_p=top_p, seeds=seeds, max_spec_len=max_spec_len, threads=threads, method=method,
            synthetic_acceptance_rates=synthetic_acceptance_rates,
            fly=(int(fly_window_size), float(fly_entropy_threshold)),
            bonus_token_ids=bonus_token_ids)
    if block and is_cuda(logits):
        raise error("rejection_sample_method", "'block' verifies request by request on the host; "
                    "specdec has no CUDA form of it yet (docs/engines.md)")
    # warp_logits refuses NaN and +inf naming the row: no pass of its own here.
    rows = as_numpy(logits, "logits", kind="float", ndim=2, check_finite=False)
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
    if bonus_token_ids is None:
        bonus_at = _row_indices(bonus_logits_indices, "bonus_logits_indices", batch, rows.shape[0])
    else:  # any row serves: the token drawn from it is replaced by the sampler's
        bonus_at = np.zeros(batch, np.int64)
        bonus_token_ids = as_numpy(bonus_token_ids, "bonus_token_ids", kind="int").reshape(-1)
        if bonus_token_ids.shape[0] != batch:
            raise error("bonus_token_ids", f"has {bonus_token_ids.shape[0]} entries; expected {batch}")
    rates = None
    if method == "synthetic":
        rates = _rates(synthetic_acceptance_rates, int(counts.max()) if batch else 0)
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
    bad = np.flatnonzero(~(np.isfinite(temps) & ((temps >= 0) | (temps == -1))))
    if bad.size:
        b = bad[0]
        raise error(f"temperature[{b}]", f"{temps[b]} is not a temperature (>= 0; 0 = greedy)")
    bad = np.flatnonzero(~((ps > 0) & (ps <= 1)))
    if bad.size:
        raise error(f"top_p[{bad[0]}]", f"{ps[bad[0]]} is outside (0, 1]")
    stream_seeds = (draw_seeds(batch) if seeds is None
                    else per_request(seeds, "seeds", batch, kind="int", default=0))
    out = np.full((batch, width), PLACEHOLDER_TOKEN_ID, np.int32)
    if batch:
        greedy = temps <= 0  # 0, and -1 in older vLLM
        # Request b's rows in specdec's layout: its draft positions, then its bonus row.
        order = np.empty(tokens.shape[0] + batch, np.int64)
        bonus_slot = cu + np.arange(batch)
        draft_slot = np.ones(order.shape[0], bool)
        draft_slot[bonus_slot] = False
        order[draft_slot], order[bonus_slot] = target_at, bonus_at
        # vLLM lays logits out this way already: then the rows are used where they lie.
        in_place = np.array_equal(order, np.arange(order.shape[0])) and order.shape[0] == rows.shape[0]
        streams = stream_words(stream_seeds, np.zeros(batch, np.int64), numbered=False)
        if constraints is not None:
            chosen = _verify_constrained(rows if in_place else rows[order], tokens, counts, probs,
                                         greedy, _request_warps(greedy, temps, ks, ps, vocab),
                                         streams, constraints, threads, block)
            out[:, :chosen.shape[1]] = chosen
            groups = []  # verified
        else:
            try:
                warped = _warp_requests(rows if in_place else rows[order], counts, greedy, temps,
                                        ks, ps, vocab)
            except _specdec.Error as refused:  # its row numbers are not the caller's
                raise error("logits", refused.problem) from None
            groups = [np.arange(batch)] if probs is None else [np.flatnonzero(greedy),
                                                               np.flatnonzero(~greedy)]
        for g, members in enumerate(groups):
            if members.size == 0:
                continue
            uses_draft = probs is not None and g == 1 and method != "synthetic"
            sub = _subset(members, counts, warped, tokens, probs if uses_draft else None)
            member_streams = streams[members]
            if block and uses_draft:  # request by request: RandomStream objects
                chosen = _verify_blocks(*sub, [_specdec.RandomStream(seed=int(s) % 2**64)
                                               for s in stream_seeds[members]])
            elif method in ("synthetic", "fly"):
                chosen = _lossy_chains(*sub, member_streams, threads, rates=rates,
                                       fly=(int(fly_window_size), float(fly_entropy_threshold)))
            else:
                chosen, _ = verify_chains(*sub, member_streams, threads, names=_NAMES)
            out[members, :chosen.shape[1]] = chosen
        if bonus_token_ids is not None:  # all drafts accepted: the sampler's token
            full = out[np.arange(batch), counts] != PLACEHOLDER_TOKEN_ID
            out[full, counts[full]] = bonus_token_ids[full]
    if is_torch(logits):
        import torch
        return torch.from_numpy(out).to(logits.device)
    return out


def _rejection_sample_torch(draft_token_ids, num_draft_tokens, cu_num_draft_tokens, draft_probs,
                            logits, target_logits_indices, bonus_logits_indices, *, temperature,
                            top_k, top_p, seeds, max_spec_len, threads, method,
                            synthetic_acceptance_rates, fly, bonus_token_ids):
    """rejection_sample on torch tensors where they lie (CPU or CUDA): the same checks, warps,
    draws and tokens as the NumPy path, as torch operations on the logits' device and batch
    bindings (rows warped there by _warp_rows with one warp per row, verified by the batch
    verifiers); what the host reads back is a handful of flags (one synchronisation on CUDA),
    and on mixed greedy / sampled batches with draft rows the sizes of the two groups."""
    import torch
    device = logits.device
    rows = logits.detach()
    if rows.dim() != 2:
        raise error("logits", f"has {rows.dim()} dimensions; expected 2")
    if not rows.is_floating_point():
        raise error("logits", f"has dtype {rows.dtype}; expected floating point")
    tokens = torch_ints(draft_token_ids, "draft_token_ids", 1, device)
    counts_host = as_numpy(list(num_draft_tokens) if not hasattr(num_draft_tokens, "shape")
                           else num_draft_tokens, "num_draft_tokens", kind="int", ndim=1)
    batch, vocab, total = counts_host.shape[0], rows.shape[1], tokens.shape[0]
    if vocab == 0:
        raise error("logits", "has no columns (vocabulary 0)")
    if (counts_host < 0).any():
        raise error("num_draft_tokens", f"holds {int(counts_host.min())}; counts are >= 0")
    if counts_host.sum() != total:
        raise error("num_draft_tokens", f"sums to {int(counts_host.sum())}, but draft_token_ids "
                    f"has {total} tokens")
    longest = int(counts_host.max()) if batch else 0
    if max_spec_len is not None and max_spec_len < longest:
        raise error("max_spec_len", f"{max_spec_len} is below the longest draft ({longest})")
    width = (longest if max_spec_len is None else int(max_spec_len)) + 1
    # vLLM's layout, known from the host counts: request b's draft rows, then its bonus row.
    # Uploaded once (with the row -> request map the warps take) and compared on the device.
    cu_host = np.cumsum(counts_host)
    draft_rows_host = np.arange(total) + np.repeat(np.arange(batch), counts_host)
    row_owner = np.repeat(np.arange(batch), counts_host + 1)
    layout = torch.as_tensor(np.concatenate([counts_host, cu_host, draft_rows_host,
                                             cu_host + np.arange(batch), row_owner]),
                             device=device)
    counts, cu_expected, draft_rows_at, bonus_rows_at, row_owner = torch.split(
        layout, [batch, batch, total, batch, total + batch])
    cu = torch_ints(cu_num_draft_tokens, "cu_num_draft_tokens", 1, device)
    if cu.shape[0] != batch:
        raise error("cu_num_draft_tokens", "is not the inclusive cumulative sum of "
                    "num_draft_tokens")
    target_at = _row_indices_torch(target_logits_indices, "target_logits_indices", total, device)
    fits = rows.shape[0] == total + batch
    if bonus_token_ids is None:
        bonus_at = _row_indices_torch(bonus_logits_indices, "bonus_logits_indices", batch, device)
    else:  # any row serves: the token drawn from it is replaced by the sampler's
        bonus_at = bonus_rows_at if fits else torch.zeros_like(bonus_rows_at)
        bonus_token_ids = torch_ints(bonus_token_ids, "bonus_token_ids", None, device).reshape(-1)
        if bonus_token_ids.shape[0] != batch:
            raise error("bonus_token_ids", f"has {bonus_token_ids.shape[0]} entries; expected {batch}")
    rates = _rates(synthetic_acceptance_rates, longest) if method == "synthetic" else None
    probs = None
    if draft_probs is not None:
        probs = torch_rows(draft_probs, "draft_probs", 2, device)
        if tuple(probs.shape) != (total, vocab):
            raise error("draft_probs", f"has shape {tuple(probs.shape)}; expected "
                        f"({total}, {vocab}) (num_tokens, V)")
    temps = ks = ps = None  # None: every request greedy / top-k off / top-p off
    checks = {"cu_num_draft_tokens": (cu != cu_expected).any()}
    if fits:  # the logits already in specdec's layout: used where they lie
        checks["in_place"] = (target_at == draft_rows_at).all() & (bonus_at == bonus_rows_at).all()
    if temperature is not None:
        temps = _per_request_torch(temperature, "temperature", batch, torch.float64, 0, device)
        checks["temperature"] = ~(torch.isfinite(temps) & ((temps >= 0) | (temps == -1)))
    if top_k is not None:
        ks = _per_request_torch(top_k, "top_k", batch, torch.int64, 0, device)
    if top_p is not None:
        ps = _per_request_torch(top_p, "top_p", batch, torch.float64, 1.0, device)
        checks["top_p"] = ~((ps > 0) & (ps <= 1))
    flags = dict(zip(checks, read_flags(*(v if v.dim() == 0 else v.any()
                                          for v in checks.values()))))
    if flags["cu_num_draft_tokens"]:
        raise error("cu_num_draft_tokens", "is not the inclusive cumulative sum of "
                    "num_draft_tokens")
    for name, values, expected in (("temperature", temps, "is not a temperature (>= 0; 0 = greedy)"),
                                   ("top_p", ps, "is outside (0, 1]")):
        if flags.get(name):  # the error path: the first bad entry read back to name it
            b = int(torch.nonzero(checks[name])[0])
            raise error(f"{name}[{b}]", f"{float(values[b])} {expected}")
    in_place = flags.get("in_place", False)
    if not in_place:
        for indices, name in ((target_at, "target_logits_indices"),
                              (bonus_at, "bonus_logits_indices")):
            if read_flags(((indices < 0) | (indices >= rows.shape[0])).any())[0]:
                _row_indices(indices.tolist(), name, indices.shape[0], rows.shape[0])
    # No pass over the draft rows here: the verifier checks them, and float32 rows it refuses
    # are rescaled as renormalised rescales them and tried again (float16 / bfloat16: first).
    narrow = probs is not None and draft_probs.dtype != (
        torch.float32 if is_torch(draft_probs) else np.float32)
    if narrow:
        probs = _rescaled_rows(probs)
    if seeds is None or not is_torch(seeds):  # host seeds: the streams made on the host
        host = draw_seeds(batch) if seeds is None else per_request(seeds, "seeds", batch,
                                                                   kind="int", default=0)
        streams = torch.as_tensor(stream_words(host, np.zeros(batch, np.int64), numbered=False),
                                  device=device)
    else:
        seeds = _per_request_torch(seeds, "seeds", batch, torch.int64, 0, device)
        streams = stream_words(seeds, torch.zeros_like(seeds), numbered=False)
    out = torch.full((batch, width), PLACEHOLDER_TOKEN_ID, dtype=torch.int32, device=device)
    if batch == 0:
        return out
    greedy = None if temps is None else temps <= 0  # 0, and -1 in older vLLM (None: all)
    if not in_place:
        order = torch.empty(total + batch, dtype=torch.int64, device=device)
        order[draft_rows_at], order[bonus_rows_at] = target_at, bonus_at
        rows = rows[order]
    # One warp per request (Warp's bytes), then one per row.
    warps = torch.zeros((batch, 4), dtype=torch.int32, device=device)
    warps[:, 2] = _ONE_BITS
    if temps is not None:
        warps[:, 0] = torch.where(greedy, 0.0, temps).to(torch.float32).view(torch.int32)
        if ks is not None:
            warps[:, 1] = torch.where(greedy | (ks <= 0) | (ks >= vocab), 0, ks)
        if ps is not None:
            warps[:, 2] = torch.where(greedy, 1.0, ps).to(torch.float32).view(torch.int32)
    try:
        warped = _specdec._warp_rows(rows, warps[row_owner], threads)
    except _specdec.Error as refused:  # its row numbers are not the caller's
        raise error("logits", refused.problem) from None
    inside = (tokens >= 0) & (tokens < vocab)
    if probs is None or method == "synthetic" or greedy is None:
        groups = [(None, probs is not None and greedy is not None and method != "synthetic")]
    else:
        all_greedy, any_greedy = read_flags(greedy.all(), greedy.any())
        groups = ([(None, False)] if all_greedy else [(None, True)] if not any_greedy
                  else [(greedy, False), (~greedy, True)])
    call = _lossy_call(rates, fly) if method in ("synthetic", "fly") else None
    same_counts = bool((counts_host == width - 1).all())  # uniform: no offsets, no unpacking

    def verify(chosen, uses_draft, probs):
        sub = _subset_torch(chosen, counts, warped, tokens, probs if uses_draft else None,
                            total, batch)
        usable = inside if chosen is None else sub[1].ge(0) & sub[1].lt(vocab)
        if uses_draft:
            safe = torch.where(usable, sub[1], torch.zeros_like(sub[1]))
            usable = usable & (torch.gather(sub[3], 1, safe[:, None])[:, 0] > 0)
        return verify_chains_torch(
            sub[0], sub[1], sub[2], sub[3], streams if chosen is None else streams[chosen], width,
            usable, bool(usable.all()), names=_NAMES, threads=threads, call=call,
            uniform=chosen is None and same_counts and call is None)[0]

    for chosen, uses_draft in groups:
        try:
            picked = verify(chosen, uses_draft, probs)
        except _specdec.Error as refused:
            if not row_refusal(refused, ("draft_probs",)) or narrow:
                raise
            rescaled = _rescaled_rows(probs)
            if not read_flags((rescaled != probs).any())[0]:
                raise
            probs, narrow = rescaled, True
            picked = verify(chosen, uses_draft, probs)
        if chosen is None:
            out = picked
        else:
            out[chosen] = picked
    if bonus_token_ids is not None:  # all drafts accepted: the sampler's token
        at = torch.arange(batch, device=device)
        full = out[at, counts] != PLACEHOLDER_TOKEN_ID
        out[at, counts] = torch.where(full, bonus_token_ids.to(torch.int32), out[at, counts])
    return out


_ONE_BITS = int(np.float32(1.0).view(np.int32))  # top_p = 1 (off) as a Warp's bytes


def _rescaled_rows(rows):
    """renormalised's rescaling of torch rows [N, V], where they lie."""
    sums = rows.sum(1, keepdim=True)
    return rescale_torch(rows, sums, rescaled_rows(sums))


def _lossy_call(rates, fly):
    """The verifier of "synthetic" (rates given) or "fly" ((window, threshold)) for
    verify_chains / verify_chains_torch."""
    def call(draft_rows, **args):
        if rates is not None:
            return _specdec.verify_chain_batch_synthetic(synthetic_acceptance_rates=rates, **args)
        return _specdec.verify_chain_batch_fly(draft_rows=draft_rows, fly_window_size=fly[0],
                                               fly_entropy_threshold=fly[1], **args)
    return call


def _per_request_torch(value, name, batch, dtype, default, device):
    """per_request on the device: None gives `default` for all, else `batch` entries."""
    import torch
    if value is None:
        return torch.full((batch,), default, dtype=dtype, device=device)
    tensor = _on_device(value, name, device).to(dtype)
    if tensor.dim() != 1 or tensor.shape[0] != batch:
        raise error(name, f"has {tensor.shape[0] if tensor.dim() else 0} entries; expected one "
                    f"per request ({batch})")
    return tensor


def _on_device(value, name, device):
    if is_torch(value):
        if value.device != device:
            raise error(name, f"is on {value.device}, the logits on {device}")
        return value.detach()
    import torch
    return torch.as_tensor(np.asarray(value), device=device)


def _row_indices_torch(value, name, count, device):
    indices = torch_ints(value, name, 1, device)
    if indices.shape[0] != count:
        raise error(name, f"has {indices.shape[0]} entries; expected {count}")
    return indices


def _subset_torch(chosen, counts, rows, tokens, probs, total, batch):
    """_subset on the device: the rows, tokens, counts and draft rows of the requests `chosen`
    marks (None: all of them)."""
    import torch
    if chosen is None:
        return rows, tokens, counts, probs
    row_pick = torch.repeat_interleave(chosen, counts + 1, output_size=total + batch)
    token_pick = torch.repeat_interleave(chosen, counts, output_size=total)
    return (rows[row_pick], tokens[token_pick], counts[chosen],
            None if probs is None else probs[token_pick])


class RejectionSampler:
    """vLLM v1's `RejectionSampler`, built as vLLM builds it: ``RejectionSampler(sampler,
    spec_config, device)``. `forward(metadata, draft_probs, logits, sampling_metadata)` returns a
    SamplerOutput whose `sampled_token_ids` are [B, max_spec_len + 1] int32 padded with -1 and
    whose `logprobs_tensors` are filled when ``sampling_metadata.max_num_logprobs`` is set. The
    bonus tokens are `sampler`'s draws on ``logits[bonus_logits_indices]`` (sampler None: drawn
    here from the warped bonus rows). `rejection_sample_method`, when given, overrides
    spec_config's. See the module docstring for what differs."""

    def __init__(self, sampler: Any = None, spec_config: Any = None, device: Any = None, *,
                 threads: int = 0, rejection_sample_method: Optional[str] = None) -> None:
        self.sampler = sampler
        self.device = device
        self.threads = threads
        method, name = rejection_sample_method, "rejection_sample_method"
        if method is None:
            method = getattr(spec_config, "rejection_sample_method", None) or "standard"
            name = "spec_config.rejection_sample_method"
        self.rejection_sample_method = _method(method, name)
        self.synthetic_acceptance_rates = None
        self.fly_window_size, self.fly_entropy_threshold = 1, 0.0
        if method == "synthetic":
            rates = getattr(spec_config, "synthetic_acceptance_rates", None)
            if rates is None:
                raise error("spec_config.synthetic_acceptance_rates",
                            "is required by 'synthetic' (one acceptance probability per position)")
            self.synthetic_acceptance_rates = _rates(rates, 0)
        if method == "fly":
            window = getattr(spec_config, "fly_window_size", None)
            threshold = getattr(spec_config, "fly_entropy_threshold", None)
            for name, value in (("fly_window_size", window),
                                ("fly_entropy_threshold", threshold)):
                if value is None:
                    raise error(f"spec_config.{name}", "is required by 'fly'")
            if int(window) != window or window < 0:
                raise error("spec_config.fly_window_size", f"{window!r} is not a count >= 0")
            if not float(threshold) >= 0:
                raise error("spec_config.fly_entropy_threshold",
                            f"{threshold!r} is not an entropy >= 0 (nats)")
            self.fly_window_size, self.fly_entropy_threshold = int(window), float(threshold)

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
        bonus = None
        if self.sampler is not None:
            bonus = self._bonus_tokens(logits, metadata.bonus_logits_indices, sampling_metadata)
        constraints = _constraints(sampling_metadata)
        if constraints:  # absent (the common case): the rows are used as they are
            self._check_constrainable(logits, constraints)
        sampled = rejection_sample(
            metadata.draft_token_ids, metadata.num_draft_tokens, metadata.cu_num_draft_tokens,
            draft_probs, logits, metadata.target_logits_indices, metadata.bonus_logits_indices,
            temperature=temperature, top_k=getattr(sampling_metadata, "top_k", None),
            top_p=getattr(sampling_metadata, "top_p", None), seeds=seeds,
            max_spec_len=metadata.max_spec_len, threads=self.threads,
            rejection_sample_method=self.rejection_sample_method,
            synthetic_acceptance_rates=self.synthetic_acceptance_rates,
            fly_window_size=self.fly_window_size,
            fly_entropy_threshold=self.fly_entropy_threshold, bonus_token_ids=bonus,
            constraints=constraints or None)
        logprobs = None
        top = getattr(sampling_metadata, "max_num_logprobs", None)
        if top is not None:
            logprobs = (_logprobs_torch if is_torch(sampled) else _logprobs)(
                sampled, logits, metadata, int(top))
        return SamplerOutput(sampled_token_ids=sampled, logprobs_tensors=logprobs)

    def _check_constrainable(self, logits: Any, constraints: dict) -> None:
        """Constraints are applied by "standard" and "block" on the CPU only: else the first is
        named."""
        name = "sampling_metadata." + next(iter(constraints))
        if self.rejection_sample_method not in ("standard", "block"):
            raise error(name, f"is a request constraint; rejection_sample_method "
                        f"{self.rejection_sample_method!r} verifies raw rows (only 'standard' "
                        "and 'block' apply constraints)")
        if is_cuda(logits):
            raise error(name, "is a request constraint; constraints are applied on the CPU only "
                        "(the logits are on CUDA)")

    def _bonus_tokens(self, logits: Any, bonus_logits_indices: Any, sampling_metadata: Any):
        """The engine sampler's draws on the bonus rows, as vLLM's rejection sampler asks."""
        indices = bonus_logits_indices
        if is_torch(logits):  # torch indexes with int64 only
            import torch
            indices = torch.as_tensor(indices, device=logits.device).long()
        rows = logits[indices]
        try:
            result = self.sampler(logits=rows, sampling_metadata=sampling_metadata,
                                  predict_bonus_token=True)
        except TypeError:  # a Sampler from before predict_bonus_token
            result = self.sampler(logits=rows, sampling_metadata=sampling_metadata)
        return getattr(result, "sampled_token_ids", result)

    __call__ = forward

    @staticmethod
    def parse_output(output_token_ids: Any, vocab_size: int,
                     discard_req_indices: Sequence[int] = (),
                     return_cu_num_tokens: bool = False
                     ) -> tuple[list[list[int]], Optional[list[int]]]:
        """Per-request token lists without placeholders and ids >= vocab_size; requests in
        discard_req_indices get empty lists. With return_cu_num_tokens also [0, n0, n0 + n1, ...]."""
        if is_cuda(output_token_ids):  # Python lists are host objects: read back, as vLLM does
            output_token_ids = np.array(output_token_ids.tolist(), np.int64).reshape(
                tuple(output_token_ids.shape))
        tokens = as_numpy(output_token_ids, "output_token_ids", kind="int", ndim=2)
        discard = set(int(i) for i in discard_req_indices)
        lists = [[] if b in discard else [int(t) for t in row if 0 <= t < vocab_size]
                 for b, row in enumerate(tokens)]
        cu = None
        if return_cu_num_tokens:
            cu = [0] + np.cumsum([len(x) for x in lists], dtype=np.int64).tolist()
        return lists, cu


_NAMES = {"draft_rows": "draft_probs", "draft_tokens": "draft_token_ids", "target_rows": "logits"}


def _method(value: Any, name: str = "rejection_sample_method") -> str:
    if value not in REJECTION_SAMPLE_METHODS:
        raise error(name, f"{value!r} is not one of "
                    + ", ".join(repr(m) for m in REJECTION_SAMPLE_METHODS))
    return value


def _rates(value: Any, positions: int) -> np.ndarray:
    """synthetic_acceptance_rates as float32, one probability per position (at least
    `positions`)."""
    name = "spec_config.synthetic_acceptance_rates"
    rates = np.asarray(value if value is not None else [], np.float32).reshape(-1)
    if rates.shape[0] < max(positions, 1):
        raise error(name, f"has {rates.shape[0]} entries; the drafts have {max(positions, 1)} "
                    "positions")
    bad = np.flatnonzero(~((rates >= 0) & (rates <= 1)))
    if bad.size:
        raise error(f"{name}[{bad[0]}]", f"{float(rates[bad[0]])} is outside [0, 1]")
    return rates


def _lossy_chains(rows, tokens, counts, probs, streams, threads, *, rates, fly):
    """verify_chains with "synthetic" (rates given) or "fly" ((window, threshold)) as the
    verifier. Returns tokens [B, max(counts) + 1] int32 padded with -1."""
    return verify_chains(rows, tokens, counts, probs, streams, threads, names=_NAMES,
                         call=_lossy_call(rates, fly))[0]


def _logprobs(sampled: Any, logits: Any, metadata: SpecDecodeMetadata, top: int
              ) -> LogprobsTensors:
    """LogprobsTensors of every slot of `sampled` under the raw logits row that scored it (draft
    position j: target_logits_indices; the bonus slot: bonus_logits_indices)."""
    tokens = as_numpy(sampled, "sampled_token_ids", kind="int", ndim=2)
    rows = as_numpy(logits, "logits", kind="float", ndim=2)
    batch, width = tokens.shape
    counts = np.asarray(metadata.num_draft_tokens, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if batch else counts
    target_at = as_numpy(metadata.target_logits_indices, "target_logits_indices",
                         kind="int").astype(np.int64)
    bonus_at = as_numpy(metadata.bonus_logits_indices, "bonus_logits_indices",
                        kind="int").astype(np.int64)
    slot = np.arange(width)
    draft_slot = slot < counts[:, None]
    used = tokens >= 0
    empty = np.zeros((batch, width), np.int64)
    from_target = (target_at[np.minimum(starts[:, None] + slot, target_at.size - 1)]
                   if target_at.size else empty)
    from_bonus = bonus_at[:, None] + empty if bonus_at.size == batch else empty
    row_of = np.where(draft_slot, from_target, from_bonus)
    picked = rows[row_of[used]].astype(np.float32)
    shifted = picked - picked.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    chosen = tokens[used].astype(np.int64)
    chosen_logp = logp[np.arange(len(chosen)), chosen]
    n = min(top, rows.shape[1])
    ids = np.full((batch * width, n + 1), -1, np.int64)
    values = np.full((batch * width, n + 1), -np.inf, np.float32)
    ranks = np.full(batch * width, -1, np.int64)
    flat_used = used.reshape(-1)
    ids[flat_used, 0], values[flat_used, 0] = chosen, chosen_logp
    ranks[flat_used] = (logp >= chosen_logp[:, None]).sum(axis=1)  # 1-based, as vLLM counts
    if n > 0:  # a selection, then a sort of the n chosen
        best = np.argpartition(-logp, n - 1, axis=1)[:, :n]
        order = np.argsort(-np.take_along_axis(logp, best, axis=1), axis=1, kind="stable")
        best = np.take_along_axis(best, order, axis=1)
        ids[flat_used, 1:] = best
        values[flat_used, 1:] = np.take_along_axis(logp, best, axis=1)
    if is_torch(logits):
        import torch
        return LogprobsTensors(*(torch.from_numpy(a).to(logits.device)
                                 for a in (ids, values, ranks)))
    return LogprobsTensors(ids, values, ranks)


def _logprobs_torch(sampled: Any, logits: Any, metadata: SpecDecodeMetadata, top: int
                    ) -> LogprobsTensors:
    """_logprobs where the logits lie: every slot's row scored (placeholders masked after), so
    nothing is read back."""
    import torch
    device = logits.device
    tokens = sampled.to(torch.int64)
    batch, width = tokens.shape
    counts = torch.as_tensor(np.asarray(metadata.num_draft_tokens, np.int64), device=device)
    starts = torch.cumsum(counts, 0) - counts
    target_at = torch_ints(metadata.target_logits_indices, "target_logits_indices", 1, device)
    bonus_at = torch_ints(metadata.bonus_logits_indices, "bonus_logits_indices", 1, device)
    slot = torch.arange(width, device=device)
    empty = torch.zeros((batch, width), dtype=torch.int64, device=device)
    from_target = (target_at[(starts[:, None] + slot).clamp(max=target_at.shape[0] - 1)]
                   if target_at.shape[0] else empty)
    from_bonus = bonus_at[:, None] + empty if bonus_at.shape[0] == batch else empty
    row_of = torch.where(slot < counts[:, None], from_target, from_bonus).reshape(-1)
    logp = torch.log_softmax(logits.detach()[row_of].to(torch.float32), dim=1)
    used = (tokens >= 0).reshape(-1)
    chosen = tokens.reshape(-1).clamp(min=0)
    chosen_logp = torch.gather(logp, 1, chosen[:, None])[:, 0]
    n = min(top, logits.shape[1])
    ids = torch.full((batch * width, n + 1), -1, dtype=torch.int64, device=device)
    values = torch.full((batch * width, n + 1), -float("inf"), dtype=torch.float32, device=device)
    ids[:, 0] = torch.where(used, chosen, ids[:, 0])
    values[:, 0] = torch.where(used, chosen_logp, values[:, 0])
    ranks = torch.where(used, (logp >= chosen_logp[:, None]).sum(1), torch.full_like(chosen, -1))
    if n > 0:  # a selection of the n best, sorted
        best_values, best = torch.topk(logp, n, dim=1)
        ids[:, 1:] = torch.where(used[:, None], best, ids[:, 1:])
        values[:, 1:] = torch.where(used[:, None], best_values, values[:, 1:])
    return LogprobsTensors(ids, values, ranks)


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


def _warp_settings(greedy, temps, ks, ps, vocab):
    """(temperature, top_k, top_p) per request, [B, 3] float64: greedy requests 0, 0, 1."""
    return np.stack([np.where(greedy, 0.0, temps),
                     np.where(greedy | (ks <= 0) | (ks >= vocab), 0, ks),
                     np.where(greedy, 1.0, ps)], axis=1).astype(np.float64)


def _request_warps(greedy, temps, ks, ps, vocab):
    """One Warp per request (a greedy request's: temperature 0), one object per distinct warp."""
    distinct, which = np.unique(_warp_settings(greedy, temps, ks, ps, vocab), axis=0,
                                return_inverse=True)
    warps = np.empty(len(distinct), object)
    warps[:] = [_specdec.Warp(temperature=float(t), top_k=int(k), top_p=float(p))
                for t, k, p in distinct]
    return list(warps[which.reshape(-1)])


def _warp_requests(rows, counts, greedy, temps, ks, ps, vocab):
    """Each request's rows warped by its own temperature / top-k / top-p, one call per distinct
    warp (greedy rows become the one-hot argmax)."""
    settings = _warp_settings(greedy, temps, ks, ps, vocab)
    if (settings == settings[0]).all():  # one warp for the batch: no masked copies
        t, k, p = settings[0]
        return np.asarray(_specdec.warp_logits(
            _specdec.Warp(temperature=float(t), top_k=int(k), top_p=float(p)), rows))
    distinct, which = np.unique(settings, axis=0, return_inverse=True)
    which = which.reshape(-1)
    warps = [_specdec.Warp(temperature=float(t), top_k=int(k), top_p=float(p))
             for t, k, p in distinct]
    owner = np.repeat(which, counts + 1)
    warped = np.empty_like(rows)
    for w, warp in enumerate(warps):
        mask = owner == w
        warped[mask] = np.asarray(_specdec.warp_logits(warp, np.ascontiguousarray(rows[mask])))
    return warped


def _subset(members, counts, rows, tokens, probs):
    """The rows, tokens, counts and draft rows of the requests `members` (ascending)."""
    if len(members) == len(counts):  # the whole batch, in order
        return rows, tokens, counts, probs
    chosen = np.zeros(len(counts), bool)
    chosen[members] = True
    row_pick = np.repeat(chosen, counts + 1)
    token_pick = np.repeat(chosen, counts)
    return (rows[row_pick], tokens[token_pick], counts[members],
            None if probs is None else probs[token_pick])


_PENALTIES = ("repetition_penalties", "frequency_penalties", "presence_penalties")


def _constraints(sampling_metadata: Any) -> dict:
    """The request constraints `sampling_metadata` holds, {field: value} in vLLM's order of
    application; empty when there are none."""
    found = {}
    if not getattr(sampling_metadata, "no_penalties", True):
        found.update((name, getattr(sampling_metadata, name, None)) for name in _PENALTIES)
    for name in ("allowed_token_ids_mask", "bad_words_token_ids", "min_tokens"):
        value = getattr(sampling_metadata, name, None)
        if value is not None and (not isinstance(value, dict) or value):
            found[name] = value
    if found:  # what the rules read the history from
        for name in ("prompt_token_ids", "output_token_ids"):
            found[name] = getattr(sampling_metadata, name, None)
    return found


def _request_tokens(value: Any, name: str, batch: int, vocab: int) -> list:
    """Per-request token ids (B lists, or a [B, n] array padded with ids >= V, as vLLM pads the
    prompts) without the padding, as B int32 arrays; None: none."""
    if value is None:
        return [None] * batch
    if is_torch(value):
        value = value.detach().cpu().numpy()
    if not hasattr(value, "__len__") or len(value) != batch:
        raise error(name, f"has {len(value) if hasattr(value, '__len__') else 'no'} entries; "
                    f"expected one per request ({batch})")
    if isinstance(value, np.ndarray) and value.ndim == 2:
        lengths = np.full(batch, value.shape[1], np.int64)
        flat = value.reshape(-1)
    else:
        lengths = np.fromiter(map(len, value), np.int64, batch)
        pieces = [np.asarray(v).reshape(-1) for v in value]
        flat = np.concatenate([p for p in pieces if p.size] or [np.zeros(0, np.int64)])
    if flat.size and flat.dtype.kind not in "iu":
        raise error(name, f"holds {flat.dtype} ids; expected integers")
    flat = flat.astype(np.int64, copy=False)
    owner = np.repeat(np.arange(batch), lengths)
    negative = np.flatnonzero(flat < 0)
    if negative.size:
        raise error(f"{name}[{owner[negative[0]]}]", f"holds {int(flat[negative[0]])}; token ids "
                    "are >= 0")
    kept = flat < vocab
    cuts = np.cumsum(np.bincount(owner[kept], minlength=batch))[:-1]
    return np.split(flat[kept].astype(np.int32), cuts)


def _ids(value: Any, name: str) -> list:
    """A list of token ids (any iterable of integers)."""
    try:
        return [int(t) for t in value]
    except (TypeError, ValueError):
        raise error(name, f"holds {value!r}; expected a list of token ids") from None


def _requests_named(value: Any, name: str, batch: int) -> dict:
    if not isinstance(value, dict):
        raise error(name, f"is a {type(value).__name__}; expected a dict {{request: ...}}")
    for index in value:
        if not 0 <= int(index) < batch:
            raise error(name, f"names request {index} of {batch}")
    return {int(index): entry for index, entry in value.items()}


def _penalties(constraints: dict, batch: int) -> Optional[list]:
    """[repetition, frequency, presence], each float32 [B], or None when penalties are off."""
    if _PENALTIES[0] not in constraints:
        return None
    values = []
    for name in _PENALTIES:
        v = per_request(constraints[name], f"sampling_metadata.{name}", batch, kind="float",
                        default=0.0).astype(np.float32)
        bad = np.flatnonzero(~np.isfinite(v) | ((v <= 0) if name == _PENALTIES[0] else False))
        if bad.size:
            raise error(f"sampling_metadata.{name}[{bad[0]}]", f"{float(v[bad[0]])} is not "
                        + ("a repetition penalty (> 0)" if name == _PENALTIES[0] else "finite"))
        values.append(v)
    return values


# The constrained verifiers' argument names as SamplingMetadata's (and rejection_sample's).
_CONSTRAINT_NAMES = {"bitmask": "allowed_token_ids_mask", "bad_words": "bad_words_token_ids",
                     "stop_token_ids": "min_tokens", "min_tokens": "min_tokens",
                     "prompt_token_ids": "prompt_token_ids",
                     "output_token_ids": "output_token_ids"}


def _constraint_arguments(constraints: dict, counts: np.ndarray, vocab: int) -> dict:
    """SamplingMetadata's constraints as the constrained verifiers' keywords for the B requests
    of `counts`: the allowed-token mask packed into a bitmask row per target row, penalties,
    prompt and output ids per request (the penalties' counts, min_tokens' length, bad words'
    history), bad words and min_tokens with their stop ids per request."""
    batch = len(counts)
    args = {"prompt_token_ids": _request_tokens(constraints["prompt_token_ids"],
                                                "sampling_metadata.prompt_token_ids", batch,
                                                vocab),
            "output_token_ids": _request_tokens(constraints["output_token_ids"],
                                                "sampling_metadata.output_token_ids", batch,
                                                vocab)}
    penalties = _penalties(constraints, batch)
    if penalties is not None:
        args.update(zip(("repetition_penalty", "frequency_penalty", "presence_penalty"),
                        penalties))
    banned = constraints.get("allowed_token_ids_mask")
    if banned is not None:
        banned = np.asarray(banned.detach().cpu().numpy() if is_torch(banned) else banned)
        if banned.shape != (batch, vocab) or banned.dtype != bool:
            raise error("sampling_metadata.allowed_token_ids_mask",
                        f"is {banned.dtype} {tuple(banned.shape)}; expected bool ({batch}, "
                        f"{vocab}) (B, V; True: banned)")
        # xgrammar's layout: bit j of int32 word k allows token 32k + j; one row per target row.
        words = -(-vocab // 32)
        packed = np.zeros((batch, 4 * words), np.uint8)
        packed[:, :-(-vocab // 8)] = np.packbits(~banned, axis=1, bitorder="little")
        args["bitmask"] = np.repeat(packed.view("<i4"), counts + 1, axis=0)
    bad_words = _requests_named(constraints.get("bad_words_token_ids", {}),
                                "sampling_metadata.bad_words_token_ids", batch)
    if bad_words:
        args["bad_words"] = [None] * batch
        for b, words in bad_words.items():
            args["bad_words"][b] = [_ids(w, f"sampling_metadata.bad_words_token_ids[{b}]")
                                    for w in words]
    min_tokens = _requests_named(constraints.get("min_tokens", {}),
                                 "sampling_metadata.min_tokens", batch)
    if min_tokens:
        least, stops = np.zeros(batch, np.int32), [None] * batch
        for b, entry in min_tokens.items():
            name = f"sampling_metadata.min_tokens[{b}]"
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise error(name, f"is {entry!r}; expected (count, stop ids)")
            least[b], stops[b] = int(entry[0]), sorted(_ids(entry[1], name))
        args.update(min_tokens=least, stop_token_ids=stops)
    return args


def _verify_constrained(rows, tokens, counts, probs, greedy, warps, streams, constraints,
                        threads, block=False):
    """The chains of `rows` (request by request: its draft positions, then its bonus row; raw
    logits) verified by specdec's constrained verifiers under `constraints`: greedy requests by
    verify_chain_batch_greedy_logits_constrained (the draft rows unread, as vLLM's greedy), the
    others with draft rows by verify_chain_batch_draft_probs_constrained (`block`:
    verify_block_batch_draft_probs_constrained, each chain cut before its first token outside
    the vocabulary or of draft probability 0, whose row then draws the token), without them by
    the target-only form, chains cut before a token outside the vocabulary. Returns tokens
    [B, max(counts) + 1] int32 padded with -1."""
    batch, vocab = len(counts), rows.shape[1]
    out = np.full((batch, int(counts.max()) + 1 if batch else 1), -1, np.int32)
    args = _constraint_arguments(constraints, counts, vocab)
    with_rows = ~greedy if probs is not None else np.zeros(batch, bool)
    for members, kind in ((np.flatnonzero(greedy), "greedy"),
                          (np.flatnonzero(~greedy & with_rows), "block" if block else "probs"),
                          (np.flatnonzero(~greedy & ~with_rows), "target_only")):
        if members.size == 0:
            continue
        sub_rows, sub_tokens, sub_counts, sub_probs = _subset(
            members, counts, rows, tokens, probs if kind in ("probs", "block") else None)
        sub_args = _constraint_subset(args, members, counts)
        usable = (sub_tokens >= 0) & (sub_tokens < vocab)
        if kind == "block":
            at = np.flatnonzero(usable)
            usable[at] = sub_probs[at, sub_tokens[at]] > 0
        if kind != "probs" and not usable.all():  # (standard rejects such tokens itself)
            sub_rows, sub_tokens, sub_counts, sub_probs, keep_row = _cut_chains(
                sub_rows, sub_tokens, sub_counts, sub_probs, usable)
            if "bitmask" in sub_args:
                sub_args["bitmask"] = sub_args["bitmask"][keep_row]
        offsets = np.zeros(len(members) + 1, np.int32)
        np.cumsum(sub_counts, out=offsets[1:])
        call_args = dict(target_logits=np.ascontiguousarray(sub_rows, np.float32),
                         draft_tokens=np.ascontiguousarray(sub_tokens, np.int32),
                         draft_offsets=offsets, threads=threads, **sub_args)
        if kind != "greedy":
            call_args.update(warps=[warps[b] for b in members],
                             streams=streams[members])
        if kind in ("probs", "block"):
            call_args["draft_probs"] = np.ascontiguousarray(sub_probs, np.float32)
        call = {"greedy": _specdec.verify_chain_batch_greedy_logits_constrained,
                "probs": _specdec.verify_chain_batch_draft_probs_constrained,
                "block": _specdec.verify_block_batch_draft_probs_constrained,
                "target_only": _specdec.verify_chain_batch_target_only_logits_constrained}[kind]
        try:
            flat, accepted = call(**call_args)
        except _specdec.Error as refused:
            raise _constraint_error(refused, members) from None
        flat, slot = np.asarray(flat), np.arange(out.shape[1])
        take = np.minimum((offsets[:-1] + np.arange(len(members)))[:, None] + slot,
                          max(flat.shape[0] - 1, 0))
        emitted = np.asarray(accepted)[:, None] + 1
        out[members] = np.where(slot < emitted, flat[take] if flat.size else -1, -1)
    return out


def _constraint_subset(args: dict, members: np.ndarray, counts: np.ndarray) -> dict:
    """The constrained verifiers' keywords `args` of the requests `members` (ascending)."""
    if len(members) == len(counts):
        return dict(args)
    chosen = np.zeros(len(counts), bool)
    chosen[members] = True
    out = {}
    for name, value in args.items():
        if name == "bitmask":
            out[name] = value[np.repeat(chosen, counts + 1)]
        elif isinstance(value, np.ndarray):
            out[name] = value[members]
        else:
            out[name] = [value[b] for b in members]
    return out


def _cut_chains(rows, tokens, counts, probs, usable):
    """Each chain cut before its first token not `usable`: the rows, tokens, counts and draft
    rows that remain, and which rows were kept."""
    batch = len(counts)
    starts = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(batch), counts)
    cut = counts.copy()
    bad = np.flatnonzero(~usable)
    np.minimum.at(cut, owner[bad], bad - starts[owner[bad]])
    keep_token = np.arange(len(tokens)) - starts[owner] < cut[owner]
    row_owner = np.repeat(np.arange(batch), counts + 1)
    keep_row = np.arange(len(rows)) - (starts + np.arange(batch))[row_owner] <= cut[row_owner]
    return (rows[keep_row], tokens[keep_token], cut,
            None if probs is None else probs[keep_token], keep_row)


def _constraint_error(refused: Any, members: np.ndarray) -> Any:
    """A constrained verifier's error on the requests `members`, named as the caller's."""
    base, _, rest = refused.argument.partition("[")
    index = rest.split("]")[0]
    if index.isdigit():  # the verifiers number the requests of the call
        index = str(int(members[int(index)]))
    if base in _CONSTRAINT_NAMES:
        return error(f"sampling_metadata.{_CONSTRAINT_NAMES[base]}"
                     + (f"[{index}]" if index and base != "bitmask" else ""), refused.problem)
    name = {"target_logits": "logits", "draft_tokens": "draft_token_ids"}.get(base, base)
    return error(name, refused.problem)
