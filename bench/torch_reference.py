#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Vectorised PyTorch rejection sampler for batched chain verification: the comparison for
specdec_bench_cuda's chain cases (the approach of the mainstream Python serving engines), timed
the same way: B = 1, 16, 64, 256 sequences, gamma = 5, V = 32000 and 128256, fp32 and bf16 logits,
temperature 0.8 and top-p 0.9 warps included, every draft token accepted (draft logits equal the
target logits and token 0 leads every row by a wide margin), against a copy of the same logits to fp32 in the same
run.

This script is not part of the library and is not run by the test suite. It needs PyTorch and a
CUDA device:

    python3 bench/torch_reference.py [--device cuda] [--iterations 20]
"""

import argparse

import torch


def warp(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Temperature then top-p over the last dimension, as engines do it: a full sort per row."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p >= 1.0:
        return probs
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    # Keep the smallest prefix reaching top_p: an entry stays while the mass before it is < top_p.
    drop = (cumulative - sorted_probs) >= top_p
    sorted_probs = sorted_probs.masked_fill(drop, 0.0)
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return kept / kept.sum(dim=-1, keepdim=True)


def sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of a non-negative matrix (any scale), by the exponential race."""
    race = torch.empty_like(probs).exponential_(generator=generator)
    return torch.argmax(probs / race, dim=-1)


def verify_chain(target_logits, draft_logits, draft_tokens, temperature, top_p, generator):
    """Standard rejection sampling for B chains of gamma draft tokens.

    target_logits: [B, gamma + 1, V]; draft_logits: [B, gamma, V]; draft_tokens: [B, gamma].
    Returns (accepted [B], emitted [B, gamma + 1] padded with -1).
    """
    batch, gamma = draft_tokens.shape
    target = warp(target_logits, temperature, top_p)
    draft = warp(draft_logits, temperature, top_p)
    index = draft_tokens.unsqueeze(-1)
    target_x = target[:, :gamma].gather(-1, index).squeeze(-1)
    draft_x = draft.gather(-1, index).squeeze(-1)
    u = torch.rand(batch, gamma, device=target.device, generator=generator)
    accept = u * draft_x < target_x
    # Accepted count: the length of the leading run of acceptances.
    accepted = torch.cumprod(accept.int(), dim=1).sum(dim=1)
    # The row the last token comes from: the residual at the first rejection, else the bonus row.
    position = accepted.clamp(max=gamma - 1)
    rows = torch.arange(batch, device=target.device)
    residual = (target[rows, position] - draft[rows, position]).clamp_min(0.0)
    empty = residual.sum(dim=-1, keepdim=True) <= 1e-30
    residual = torch.where(empty, target[rows, position], residual)
    last_row = torch.where((accepted == gamma).unsqueeze(-1), target[:, gamma], residual)
    last = sample(last_row, generator)
    columns = torch.arange(gamma + 1, device=target.device).unsqueeze(0)
    padded = torch.cat([draft_tokens, draft_tokens[:, :1]], dim=1)
    emitted = torch.where(columns < accepted.unsqueeze(1), padded, torch.full_like(padded, -1))
    emitted.scatter_(1, accepted.unsqueeze(1), last.unsqueeze(1))
    return accepted, emitted


def time_ms(fn, iterations):
    for _ in range(3):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iterations


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark")
        return
    device = torch.device(args.device)
    generator = torch.Generator(device=device)
    generator.manual_seed(7)
    gamma, temperature, top_p = 5, 0.8, 0.9
    print(f"{'dtype':5} {'B':>5} {'V':>7} {'torch(us)':>12} {'copy(us)':>12} {'x copy':>10}")
    for vocab in (32000, 128256):
        for batch in (1, 16, 64, 256):
            for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
                target = 3.0 * torch.randn(batch, gamma + 1, vocab, device=device)
                # Token 0 leads every row by a margin no normal tail reaches, so it is always in
                # the nucleus (a fixed logit of 12 fell outside it in rows with several 4-sigma
                # entries, and the all-accepted check failed at B = 64).
                target[..., 0] = target.amax(dim=-1) + 10.0
                target = target.to(dtype)
                draft = target[:, :gamma].clone()
                tokens = torch.zeros(batch, gamma, dtype=torch.long, device=device)
                accepted, _ = verify_chain(target, draft, tokens, temperature, top_p, generator)
                assert int(accepted.min()) == gamma, "every draft token should be accepted"
                verify_ms = time_ms(
                    lambda: verify_chain(target, draft, tokens, temperature, top_p, generator),
                    args.iterations)
                copy_ms = time_ms(lambda: (target.float(), draft.float()), args.iterations)
                print(f"{name:5} {batch:5d} {vocab:7d} {verify_ms * 1e3:12.1f} "
                      f"{copy_ms * 1e3:12.1f} {verify_ms / copy_ms:10.2f}")


if __name__ == "__main__":
    main()
