"""The cost of calling batched verification from Python, beyond the C++ work.

For each shape, times `specdec.verify_chain_batch(...)` called from Python (reading the arrays,
converting the streams, allocating the outputs, releasing the GIL) and the same C++
verify_chain_batch on the same arguments timed inside the extension
(`specdec._specdec._time_verify_chain_batch`); the difference is the Python call's overhead.
A tiny vocabulary keeps the C++ work small, so the overhead is not lost in its noise; a real one
shows it next to the work it wraps.

Run with the built package on the path:
    PYTHONPATH=build/python python3 bench/python/bench_call_overhead.py [--torch] [--repeats N]
"""

import argparse
import timeit

import numpy as np

import specdec
from specdec import _specdec


def arguments(batch, gamma, vocab, use_torch):
    rng = np.random.default_rng(0)
    target = rng.gamma(1.0, size=(batch, gamma + 1, vocab)).astype(np.float32)
    target /= target.sum(axis=2, keepdims=True)
    draft = target[:, :gamma].copy()  # equal rows: every draft token is accepted
    tokens = np.argmax(draft, axis=2).astype(np.int32)
    streams = [specdec.RandomStream(seed=1, sequence=b) for b in range(batch)]
    if use_torch:
        import torch
        target, draft, tokens = (torch.from_numpy(a) for a in (target, draft, tokens))
    return dict(target_rows=target, draft_rows=draft, draft_tokens=tokens, streams=streams,
                threads=1)


def per_call(function, repeats):
    """Best of five means over `repeats` calls, in seconds."""
    return min(timeit.repeat(function, number=repeats, repeat=5)) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", action="store_true", help="pass torch tensors, not NumPy")
    parser.add_argument("--repeats", type=int, default=2000)
    options = parser.parse_args()

    print(f"{'B':>4} {'gamma':>5} {'V':>6} {'python us':>10} {'C++ us':>8} {'overhead us':>12}")
    for batch, gamma, vocab in [(1, 4, 8), (8, 4, 8), (64, 4, 8), (8, 4, 32000), (64, 4, 32000)]:
        kwargs = arguments(batch, gamma, vocab, options.torch)
        repeats = options.repeats if vocab < 1000 else max(options.repeats // 20, 10)
        python = per_call(lambda: specdec.verify_chain_batch(**kwargs), repeats)
        cpp = min(_specdec._time_verify_chain_batch(repeats, **kwargs) for _ in range(5))
        print(f"{batch:>4} {gamma:>5} {vocab:>6} {python * 1e6:>10.2f} {cpp * 1e6:>8.2f} "
              f"{(python - cpp) * 1e6:>12.2f}")


if __name__ == "__main__":
    main()
