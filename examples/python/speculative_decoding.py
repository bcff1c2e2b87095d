"""Speculative decoding of a PyTorch model pair with specdec: the loop an engine copies.

The models are stand-ins: small GPT-style decoders with seeded random weights (model.py, beside
this script), so that it runs anywhere with nothing to download. Everything specdec needs from a
model is in `ModelProvider` (same file), a `specdec.LogitsProvider` subclass:

    evaluate(batch, logits)   score a draft tree in ONE forward pass: the tree's tokens, their
                              position ids (batch.positions) and an attention mask over [cached
                              context + tree] built from batch.dense_mask(); write row 0 (after
                              the context) and row i + 1 (after node i) into `logits`
    commit(batch, kept, next) append the accepted path and the next token; keep the accepted
                              nodes' keys and values, moved into place with specdec.kv_compaction

A real model plugs in where ModelProvider calls `self.model.forward(tokens, positions, mask,
cache)`: any decoder that takes explicit position ids and an attention mask (a Hugging Face model's
`position_ids` and a 4-D `attention_mask`, or a paged-attention kernel with a custom mask) and keeps
a KV cache it can compact. The draft must share the target's vocabulary.

    python3 examples/python/speculative_decoding.py --method rsd_s --depth 4 --width 2
"""

import argparse
import time

import torch

import specdec

from model import GPT, Config, ModelProvider  # beside this script; the tests use it too


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="sd",
                        help="sd, sd_block, specinfer, spectr, rsd_c, rsd_s, mtad, cascade, lossy")
    parser.add_argument("--depth", type=int, default=4, help="draft tokens per path (L)")
    parser.add_argument("--width", type=int, default=2, help="paths or beams (K or W)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens to generate per sequence")
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a few short sequences")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.sequences = 16, 2
    torch.set_num_threads(1)  # the stand-in's matrices are tiny

    # 1. The models: a 4-layer target and a draft made of its first layer.
    target_model = GPT(Config(layers=4, seed=args.seed))
    draft_model = target_model.early_exit(1)

    # 2. specdec's view of them. One provider per sequence in flight (each owns a KV cache).
    target = ModelProvider(target_model)
    draft = ModelProvider(draft_model)

    # 3. The method and its shape; the same warp maps every draft and target row.
    method = getattr(specdec.Method, args.method.upper())
    options = specdec.DecodeOptions(method=method, depth=args.depth, width=args.width,
                                    warp=specdec.Warp(temperature=args.temperature),
                                    max_new_tokens=args.tokens, seed=args.seed)
    reference = specdec.DecodeOptions(method=specdec.Method.AUTOREGRESSIVE,
                                      warp=options.warp, max_new_tokens=args.tokens,
                                      seed=args.seed)

    prompt = [1, 42, 7, 99]

    # An engine that owns its loop steps a Decoder: each step drafts, scores the tree with one
    # target pass, verifies and commits, and returns the tokens to stream out.
    decoder = specdec.Decoder(target, draft, options)
    decoder.reset(prompt, 0)
    steps = []
    while not decoder.finished():
        steps.append([int(t) for t in decoder.step()])
    print(f"{args.method}: sequence 0 in {len(steps)} steps: {steps[:6]} ...")

    for name, opts in (("autoregressive", reference), (args.method, options)):
        tokens = calls = 0
        start = time.perf_counter()
        for sequence in range(args.sequences):
            # 4. Or decode whole sequences: each step drafts a tree with the draft model, scores
            # it with ONE target forward pass, verifies it and commits the accepted path plus one
            # token.
            result = specdec.decode(target, draft, prompt, opts, sequence)
            tokens += result.metrics.tokens_generated
            calls += result.metrics.target_calls
        seconds = time.perf_counter() - start
        print(f"{name}: {tokens / calls:.2f} tokens per target call (block efficiency), "
              f"{tokens / seconds:.0f} tokens/s over {args.sequences} sequences")


if __name__ == "__main__":
    main()
