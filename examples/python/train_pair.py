"""Trains a target / draft pair of examples/models/ on the King James Bible, byte level.

The text comes from Debian's bible-kjv package (`apt-get install bible-kjv`), dumped with its
`bible` program, one verse a line without the references. Runs of 100 verses are dealt to three
splits: 18 of every 20 to training, one to calibration (acceptance measured before decoding, as
Sequoia does) and one held out. The models are examples/python/model.py's GPT: a 4-layer target
and a 1-layer draft (width 32, so that minutes of one core see millions of bytes) with their own
embeddings, over the 128 ASCII bytes, trained on windows of 128 bytes. Training is seeded,
single-threaded and uses torch's deterministic algorithms, so that a rerun on the same machine
repeats it. It takes about ten minutes of one core (half an hour on a busy shared machine):

    nice -n 19 python3 examples/python/train_pair.py --output examples/models

It writes kjv_target.safetensors and kjv_draft.safetensors (float16, through specdec's
safetensors writer), kjv_pair.json (the configs, the training settings, held-out perplexities and
a checksum per tensor) and a few KB of held-out and calibration text for the tests and the
shape table (examples/python/shape_table.py).

`--pair large` trains the larger pair of examples/models/kjv_large/ instead (same files there,
without the text): a 6-layer target of width 96 over 256 positions, trained on windows of 256
bytes, and a 1-layer draft of width 32 with its own embeddings, a pair where the draft costs a
small fraction of a target pass. It takes about half an hour of one core with OpenBLAS as the
system BLAS (`apt-get install libopenblas0-pthread`; the reference BLAS is ten times slower):

    OPENBLAS_NUM_THREADS=1 nice -n 19 python3 examples/python/train_pair.py --pair large \
        --output examples/models/kjv_large
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import re
import subprocess
import time

import numpy as np
import torch

import specdec

from model import GPT, Config  # beside this script

VOCAB = 128  # ASCII bytes; the text has no others
LENGTH = 128  # the small pair's training window and positions; perplexities are compared on it
TARGET = Config(vocab=VOCAB, width=32, heads=2, layers=4, max_positions=LENGTH, seed=1,
                logit_scale=0.5, residual_scale=0.5)
DRAFT = Config(vocab=VOCAB, width=32, heads=2, layers=1, max_positions=LENGTH, seed=2,
               logit_scale=0.5, residual_scale=0.5)
LARGE = 256  # the large pair's training window and positions
LARGE_TARGET = Config(vocab=VOCAB, width=96, heads=3, layers=6, max_positions=LARGE, seed=3,
                      logit_scale=0.5, residual_scale=0.5)
LARGE_DRAFT = Config(vocab=VOCAB, width=32, heads=2, layers=1, max_positions=LARGE, seed=4,
                     logit_scale=0.5, residual_scale=0.5)


@dataclasses.dataclass(frozen=True)
class Pair:
    """What one pair trains: configs, window, batch, default steps and learning rates."""
    target: Config
    draft: Config
    window: int
    batch: int
    target_steps: int
    draft_steps: int
    target_rate: float
    draft_rate: float
    snippets: bool  # writes the held-out and calibration text (the small pair's directory)


PAIRS = {"small": Pair(TARGET, DRAFT, window=LENGTH, batch=32, target_steps=1000,
                       draft_steps=600, target_rate=6e-3, draft_rate=1e-2, snippets=True),
         "large": Pair(LARGE_TARGET, LARGE_DRAFT, window=LARGE, batch=16, target_steps=1200,
                       draft_steps=1000, target_rate=1.5e-3, draft_rate=1e-2, snippets=False)}
RUN = 100  # verses per run dealt to one split
SNIPPET_BYTES = 6000  # held-out and calibration text checked in beside the weights


def bible_verses() -> list[str]:
    """Every verse of the King James Bible, Genesis to Revelation, without its reference."""
    dump = subprocess.run(["bible", "-f", "-m", "8000", "Gen1:1-Rev22:21"], check=True,
                          capture_output=True, text=True).stdout
    verses = [re.sub(r"^\S+\d+:\d+ ", "", line) for line in dump.splitlines() if line.strip()]
    if len(verses) != 31102 or any(ord(c) >= VOCAB for verse in verses for c in verse):
        raise SystemExit("the bible program did not print the 31102 ASCII verses expected")
    return verses


def split(verses: list[str]) -> dict[str, str]:
    """Runs of RUN verses: 18 of 20 to training, then one to calibration, one held out."""
    parts = {"train": [], "calibration": [], "heldout": []}
    for start in range(0, len(verses), RUN):
        slot = (start // RUN) % 20
        name = "heldout" if slot == 19 else "calibration" if slot == 18 else "train"
        parts[name] += verses[start:start + RUN]
    return {name: "\n".join(lines) + "\n" for name, lines in parts.items()}


def encode(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8).astype(np.int64)


def snippet(text: str, size: int) -> str:
    """The first whole lines of `text` within `size` bytes."""
    return text[:text.rindex("\n", 0, size) + 1]


@torch.no_grad()
def perplexity(model: GPT, data: np.ndarray, length: int = LENGTH) -> float:
    """Per-byte perplexity over `data`, cut into windows of `length` (each from position 0)."""
    windows = torch.from_numpy(data[:len(data) // length * length].reshape(-1, length))
    total, count = 0.0, 0
    for batch in windows.split(32):
        logits = model.sequence_logits(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                 batch[:, 1:].reshape(-1), reduction="sum")
        total, count = total + float(loss), count + batch[:, 1:].numel()
    return math.exp(total / count)


def train(config: Config, data: np.ndarray, steps: int, batch: int, learning_rate: float,
          seed: int, length: int = LENGTH) -> GPT:
    """AdamW on random windows of `data`, a short warm-up then cosine decay to a tenth."""
    model = GPT(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) *
        (0.1 + 0.45 * (1 + math.cos(math.pi * min(step, steps) / steps))))
    windows = np.random.default_rng(seed)
    started = time.perf_counter()
    for step in range(steps):
        starts = windows.integers(0, len(data) - length - 1, size=batch)
        chunk = torch.from_numpy(np.stack([data[s:s + length + 1] for s in starts]))
        logits = model.sequence_logits(chunk[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                 chunk[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"  {config.layers}-layer step {step:5d}: loss {float(loss):.3f} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    model.eval()
    return model


def checksums(path: pathlib.Path) -> dict[str, float]:
    """The sum of each tensor as stored (read back through specdec): what the C++ test checks."""
    return {name: float(np.sum(value, dtype=np.float64))
            for name, value in sorted(specdec.read_safetensors(path).items())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", choices=sorted(PAIRS), default="small")
    parser.add_argument("--output", default=None,
                        help="examples/models (small) or examples/models/kjv_large (large)")
    parser.add_argument("--target-steps", type=int, default=None)
    parser.add_argument("--draft-steps", type=int, default=None)
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    pair = PAIRS[args.pair]
    args.output = args.output or ("examples/models" if args.pair == "small"
                                  else "examples/models/kjv_large")
    args.target_steps = args.target_steps or pair.target_steps
    args.draft_steps = args.draft_steps or pair.draft_steps
    args.batch = args.batch or pair.batch
    torch.set_num_threads(1)  # deterministic, and the machine is shared
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)

    texts = split(bible_verses())
    data = {name: encode(text) for name, text in texts.items()}
    print(", ".join(f"{name} {len(d)} bytes" for name, d in data.items()))
    for name in ("heldout", "calibration") if pair.snippets else ():
        (output / f"kjv_{name}.txt").write_text(snippet(texts[name], SNIPPET_BYTES))

    report = {"text": "King James Bible (Debian bible-kjv), verses one a line, bytes as tokens",
              "split": f"runs of {RUN} verses: 18 of 20 train, 1 calibration, 1 held out",
              "training": {"window": pair.window, "batch": args.batch, "seed": args.seed,
                           "optimizer": "AdamW, betas 0.9 0.95, weight decay 0.01, clip 1.0"},
              "models": {}}
    heldout = data["heldout"]
    if args.pair != "small":
        report["training"]["threads"] = "one (OpenBLAS as the system BLAS)"
    for name, config, steps, rate in (("target", pair.target, args.target_steps, pair.target_rate),
                                      ("draft", pair.draft, args.draft_steps, pair.draft_rate)):
        torch.manual_seed(args.seed)
        started = time.perf_counter()
        model = train(config, data["train"], steps, args.batch, rate, args.seed, pair.window)
        seconds = time.perf_counter() - started
        path = output / f"kjv_{name}.safetensors"
        model.save(path)
        reloaded = GPT.load(config, path)  # the float16 weights are what the numbers describe
        report["models"][name] = {
            "file": path.name, "config": dataclasses.asdict(config), "steps": steps,
            "learning_rate": rate,
            "heldout_perplexity": round(perplexity(reloaded, heldout), 4),
            "checksums": checksums(path)}
        if pair.window != LENGTH:  # also over the pair's own window (more context per byte)
            report["models"][name][f"heldout_perplexity_{pair.window}"] = round(
                perplexity(reloaded, heldout, pair.window), 4)
            report["models"][name]["training_seconds"] = round(seconds)
        print(f"{name}: held-out perplexity {report['models'][name]['heldout_perplexity']:.3f} "
              f"per byte (uniform: {VOCAB})", flush=True)
    (output / "kjv_pair.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
