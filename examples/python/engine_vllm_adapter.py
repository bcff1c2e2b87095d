"""An engine-style batch loop with vLLM's rejection-sampler interface, served by specdec.

Each step, for every request in the batch: the draft model proposes k tokens, the target scores
[context + drafts] in one pass, and the tensors go to the sampler in vLLM v1's layout (flattened
drafts, logits [num_tokens + B, V] with target and bonus row indices, per-request temperature
and seeds). The only line that names specdec is the import of RejectionSampler: an engine built
on vLLM's sampler swaps it there. Greedy drafts go in without probabilities (draft_probs=None,
as vLLM passes n-gram and EAGLE drafts); --draft-probs samples the drafts and passes their rows.

    python3 examples/python/engine_vllm_adapter.py --requests 4 --k 3 --tokens 32
"""

import argparse

import numpy as np
import torch

from engine_requests import Requests, parse_arguments  # beside this script
from model import GPT, Config, causal_mask
from specdec.compat.vllm import RejectionSampler, SamplingMetadata, SpecDecodeMetadata


def all_logits(model, tokens):
    """Logits after every prefix of `tokens` in one pass, [len(tokens), V]."""
    with torch.no_grad():
        return model.forward(tokens, list(range(len(tokens))), causal_mask(0, len(tokens)),
                             model.new_cache(len(tokens)))


def draft(model, context, k, temperature, sample, generator):
    """k draft tokens (argmax, or sampled at `temperature`) and their probability rows."""
    tokens, rows = [], []
    for _ in range(k):
        logits = all_logits(model, context + tokens)[-1].float()
        probs = torch.softmax(logits / temperature, dim=-1)
        token = (int(torch.multinomial(probs, 1, generator=generator)) if sample
                 else int(torch.argmax(logits)))
        tokens.append(token)
        rows.append(probs)
    return tokens, torch.stack(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=3, help="draft tokens per request and step")
    parser.add_argument("--draft-probs", action="store_true", help="sample drafts, pass their rows")
    args = parse_arguments(parser, quick_tokens=12)

    target_model = GPT(Config(layers=4, seed=args.seed))
    draft_model = target_model.early_exit(1)
    sampler = RejectionSampler(None)  # vLLM: RejectionSampler(sampler)
    requests = Requests(args.requests, args.tokens)
    contexts = requests.contexts
    generators = {0: torch.Generator().manual_seed(args.seed)}  # request 0 is seeded
    while active := requests.active():
        drafts, draft_rows, rows = [], [], []
        for r in active:
            tokens, probs = draft(draft_model, contexts[r], args.k, max(args.temperature, 1e-3),
                                  args.draft_probs, generators.get(0))
            drafts.append(tokens)
            draft_rows.append(probs)
            scored = all_logits(target_model, contexts[r] + tokens)
            rows.append(scored[len(contexts[r]) - 1:])  # k draft positions, then the bonus row
        metadata = SpecDecodeMetadata.make_dummy(drafts)  # rows laid out request by request
        logits = torch.cat(rows)
        batch = len(active)
        sampling = SamplingMetadata(
            temperature=torch.full((batch,), args.temperature), all_greedy=args.temperature == 0,
            all_random=args.temperature > 0,
            generators={i: generators[0] for i, r in enumerate(active) if r == 0})
        output = sampler.forward(metadata, torch.cat(draft_rows) if args.draft_probs else None,
                                 logits, sampling)
        new_tokens, _ = RejectionSampler.parse_output(output.sampled_token_ids,
                                                      target_model.config.vocab)
        requests.append(active, new_tokens)
        if requests.steps <= 3:
            print(f"step {requests.steps}: drafts {drafts} -> {new_tokens}")
    requests.finish(target_model, f"k = {args.k}", args.temperature)


if __name__ == "__main__":
    main()
