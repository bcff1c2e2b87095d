"""The request bookkeeping the engine-adapter examples share (engine_vllm_adapter.py,
engine_sglang_adapter.py): each request's context and token budget, one batched target pass per
step, and at the end the summary line and, at temperature 0, the check that every request is the
target's own greedy decoding. Nothing here calls specdec: the adapters show those calls.
"""

import argparse

import torch

from model import GPT  # beside this script

PROMPT = [1, 42, 7]  # request r's prompt is PROMPT + [99 + r]


def parse_arguments(parser: argparse.ArgumentParser, quick_tokens: int) -> argparse.Namespace:
    """Parses the adapter's own options in `parser` and those every adapter has (requests,
    tokens, temperature, seed, --quick: two requests of `quick_tokens` tokens); seeds torch (the
    generator unseeded requests draw from) and keeps it on one thread."""
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32, help="tokens to generate per request")
    parser.add_argument("--temperature", type=float, default=0.8, help="0: greedy requests")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="two short requests")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.tokens = 2, quick_tokens
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    return args


class Requests:
    def __init__(self, count: int, tokens: int):
        self.contexts = [PROMPT + [99 + r] for r in range(count)]
        self.generated = [0] * count
        self.tokens = tokens  # the budget of each request
        self.steps = self.passes = 0

    def active(self) -> list[int]:
        """The requests still generating (empty when every budget is spent)."""
        return [r for r, n in enumerate(self.generated) if n < self.tokens]

    def append(self, active: list[int], new_tokens) -> list[list[int]]:
        """Appends each active request's new tokens, cut at its budget, and counts the step (one
        target pass for the batch); returns what was kept."""
        kept = []
        for r, tokens in zip(active, new_tokens):
            tokens = list(tokens)[:self.tokens - self.generated[r]]
            self.contexts[r] += tokens
            self.generated[r] += len(tokens)
            kept.append(tokens)
        self.steps += 1
        self.passes += len(active)
        return kept

    def finish(self, target: GPT, setting: str, temperature: float) -> None:
        """Prints the summary; every token must be in the vocabulary and, at temperature 0, each
        request must equal the target's greedy decoding of its prompt."""
        total = sum(self.generated)
        print(f"{len(self.contexts)} requests, {total} tokens in {self.steps} batched target "
              f"passes: {total / self.passes:.2f} tokens per request and pass ({setting}, "
              f"temperature {temperature})")
        assert all(0 <= t < target.config.vocab for c in self.contexts for t in c)
        if temperature == 0:
            for r, context in enumerate(self.contexts):
                plain = context[:len(PROMPT) + 1]
                with torch.no_grad():
                    while len(plain) < len(context):
                        plain.append(int(torch.argmax(target.logits_after([plain])[0])))
                assert plain == context, f"request {r} differs from greedy decoding"
            print("every request matches the target's greedy decoding")
