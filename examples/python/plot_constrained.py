"""Tokens per target call under a grammar, the draft masked by it or not: runs
examples/kjv_constrained (the trained pair decoding verse references) at a few temperatures and
draws, per method, the tokens each target call emits with the draft's rows masked by the grammar
and with them raw, into a PNG; prints the numbers as a Markdown table.

    python3 examples/python/plot_constrained.py --program build/examples/kjv_constrained \\
        --output docs/images/constrained.png
"""

import argparse
import subprocess

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

METHODS = ["sd", "sequoia", "eagle"]
LABELS = {"sd": "SD (L=4)", "sequoia": "Sequoia (16 nodes)", "eagle": "EAGLE-2 (12 nodes)"}


def tokens_per_call(program, temperature, repeats, seed):
    """{(method, draft): tokens per target call} from one run of the program."""
    done = subprocess.run([program, "--temperature", str(temperature), "--repeats", str(repeats),
                           "--seed", str(seed)], capture_output=True, text=True, check=True)
    table = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        if fields and fields[0] in METHODS and fields[-5] in ("masked", "unmasked"):
            table[(fields[0], fields[-5])] = float(fields[-4])
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="build/examples/kjv_constrained")
    parser.add_argument("--output", default="constrained.png")
    parser.add_argument("--temperatures", default="0,0.7,1")
    parser.add_argument("--repeats", type=int, default=32)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    temperatures = [float(t) for t in args.temperatures.split(",")]
    results = {t: tokens_per_call(args.program, t, args.repeats, args.seed) for t in temperatures}

    print("| method | temperature | draft masked | draft unmasked |")
    print("|---|---|---|---|")
    for method in METHODS:
        for t in temperatures:
            r = results[t]
            print(f"| {LABELS[method]} | {t:g} | {r[(method, 'masked')]:.2f} | "
                  f"{r[(method, 'unmasked')]:.2f} |")

    figure, axes = plt.subplots(1, len(temperatures), figsize=(4 * len(temperatures), 3.6),
                                sharey=True)
    if len(temperatures) == 1:
        axes = [axes]
    width = 0.38
    for ax, t in zip(axes, temperatures):
        r = results[t]
        x = range(len(METHODS))
        masked = [r[(m, "masked")] for m in METHODS]
        raw = [r[(m, "unmasked")] for m in METHODS]
        ax.bar([i - width / 2 for i in x], masked, width, label="draft masked", color="#3b75af")
        ax.bar([i + width / 2 for i in x], raw, width, label="draft unmasked", color="#f0a04b")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="plain decoding")
        ax.set_xticks(list(x))
        ax.set_xticklabels([LABELS[m].replace(" (", "\n(") for m in METHODS], fontsize=8)
        ax.set_title(f"temperature {t:g}")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("tokens per target call")
    axes[0].legend(fontsize=8, loc="upper left")
    figure.suptitle(f"Verse-reference grammar on the trained pair ({args.repeats} sequences each)",
                    fontsize=10)
    figure.tight_layout()
    figure.savefig(args.output, dpi=120)


if __name__ == "__main__":
    main()
