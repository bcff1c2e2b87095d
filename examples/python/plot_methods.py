"""The paper-style comparison of speculative decoding methods on a PyTorch model pair, drawn with
matplotlib into a PNG: block efficiency (tokens per target call) against the target budget (tree
tokens the target scores per call), and the acceptance rate at each draft position.

The models are the stand-ins of examples/python/model.py (random weights, a 4-layer target and its
first layer as the draft): the curves show how the methods trade budget for tokens, not what a
trained pair would reach. Swap in real providers to draw your own.

    python3 examples/python/plot_methods.py --output docs/images/python_methods.png
"""

import argparse

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

import specdec  # noqa: E402

from model import GPT, Config, ModelProvider  # beside this script; the tests use it too

# (method, [(depth, width), ...] from the smallest budget to the largest)
SWEEPS = [
    ("SD", [(1, 1), (2, 1), (3, 1), (4, 1), (6, 1), (8, 1)]),
    ("SPECTR", [(1, 2), (2, 2), (3, 2), (3, 3), (4, 3), (4, 4)]),
    ("RSD_S", [(1, 2), (2, 2), (3, 2), (3, 3), (4, 3), (4, 4)]),
    ("MTAD", [(1, 2), (2, 2), (3, 2), (4, 2), (6, 2), (8, 2)]),
]
ACCEPTANCE_SHAPE = (6, 2)  # (depth, width) of the acceptance-per-position panel


def run(target, draft, method, depth, width, sequences, tokens):
    """Sums the metrics of `sequences` decoded sequences."""
    options = specdec.DecodeOptions(method=getattr(specdec.Method, method), depth=depth,
                                    width=width, max_new_tokens=tokens, seed=1)
    totals = {"tokens": 0, "calls": 0, "budget": 0, "attempted": [0] * depth,
              "accepted": [0] * depth}
    for sequence in range(sequences):
        metrics = specdec.decode(target, draft, [3, 141, 59, 26], options, sequence).metrics
        totals["tokens"] += metrics.tokens_generated
        totals["calls"] += metrics.target_calls
        totals["budget"] += metrics.target_tree_tokens
        for level, (tried, kept) in enumerate(zip(metrics.attempted_per_level,
                                                  metrics.accepted_per_level)):
            totals["attempted"][level] += tried
            totals["accepted"][level] += kept
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="python_methods.png")
    parser.add_argument("--sequences", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--quick", action="store_true", help="two budgets, two short sequences")
    args = parser.parse_args()
    sweeps = SWEEPS
    if args.quick:
        args.sequences, args.tokens = 2, 12
        sweeps = [(method, shapes[:2]) for method, shapes in SWEEPS]
    torch.set_num_threads(1)
    target_model = GPT(Config(layers=4, seed=0))
    target = ModelProvider(target_model)
    draft = ModelProvider(target_model.early_exit(1))

    figure, (budget_axes, position_axes) = plt.subplots(1, 2, figsize=(11, 4.2))
    for method, shapes in sweeps:
        budgets, efficiencies = [], []
        for depth, width in shapes:
            totals = run(target, draft, method, depth, width, args.sequences, args.tokens)
            budgets.append(totals["budget"] / totals["calls"])
            efficiencies.append(totals["tokens"] / totals["calls"])
            print(f"{method:7s} depth {depth} width {width}: budget {budgets[-1]:5.2f}, "
                  f"block efficiency {efficiencies[-1]:.2f}")
        label = method.lower() + (" (lossy, tau 0.5)" if method == "MTAD" else "")
        budget_axes.plot(budgets, efficiencies, marker="o", label=label)

        depth, width = ACCEPTANCE_SHAPE if not args.quick else (2, 2)
        totals = run(target, draft, method, depth, width, args.sequences, args.tokens)
        rates = [kept / tried if tried else float("nan")
                 for kept, tried in zip(totals["accepted"], totals["attempted"])]
        position_axes.plot(range(1, len(rates) + 1), rates, marker="o", label=label)

    budget_axes.set(xlabel="target budget (tree tokens per target call)",
                    ylabel="block efficiency (tokens per target call)",
                    title="Tokens per target call against budget")
    position_axes.set(xlabel="draft position", ylabel="acceptance rate", ylim=(0, 1.05),
                      title=f"Acceptance per position (depth {depth}, width {width})")
    for axes in (budget_axes, position_axes):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle("specdec on a PyTorch stand-in pair (4-layer target, 1-layer draft, "
                    "random weights)", fontsize=10)
    figure.tight_layout()
    figure.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
