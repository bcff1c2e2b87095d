"""The cost of the engine adapters (specdec.compat) per call, beyond the specdec calls they wrap.

For each adapter, times one call with the engine's tensors and the bare specdec call(s) on the
same work with arrays already in specdec's layout, at B = 8 requests of k = 4 drafts and
V = 32000 (a Llama 2 vocabulary):

- vLLM: RejectionSampler.forward (draft_probs=None, temperature 0.8) against warp_logits +
  verify_chain_batch_target_only, and its "fly" method against warp_logits +
  verify_chain_batch_fly (both sides on one thread);
- FlashInfer: chain_speculative_sampling against verify_chain_batch;
- SGLang: tree_speculative_sampling_target_only (a chain of k drafts as a tree of k + 1 slots,
  specdec's streams) against verify_tree_batch_target_only.

Every draft is accepted (one-hot target rows on the drafts), so each call does the same work.
With --torch the inputs are CPU torch tensors, which take the adapters' torch path (the one CUDA
tensors take). The "own" column is the adapter's time with the compiled calls it makes replaced
by stubs that return their saved outputs: its own work, which the load of a shared machine moves
less than the end-to-end figures.

Run with the built package on the path:
    PYTHONPATH=build/python python3 bench/python/bench_compat_overhead.py [--torch] [--repeats N]
"""

import argparse
import timeit

import numpy as np

import specdec
from specdec.compat import flashinfer, sglang, vllm


def per_call(function, repeats):
    """Best of five means over `repeats` calls, in seconds."""
    return min(timeit.repeat(function, number=repeats, repeat=5)) / repeats


def one_hot_rows(tokens, vocab, extra):
    """Rows [B, k + 1, V]: position i certain of draft i, the last row `extra`."""
    batch, k = tokens.shape
    rows = np.zeros((batch, k + 1, vocab), np.float32)
    for b in range(batch):
        rows[b, np.arange(k), tokens[b]] = 1.0
        rows[b, k] = extra
    return rows


def cases(batch, k, vocab, use_torch):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, size=(batch, k)).astype(np.int32)
    bonus = rng.dirichlet(np.ones(vocab)).astype(np.float32)
    rows = one_hot_rows(tokens, vocab, bonus)
    streams = [specdec.RandomStream(seed=1, sequence=b) for b in range(batch)]
    wrap = (lambda a: __import__("torch").from_numpy(a)) if use_torch else (lambda a: a)
    out = {}

    # vLLM: logits that warp (temperature 0.8) to rows certain of the drafts.
    logits = np.where(rows > 0, 60.0, 0.0).astype(np.float32).reshape(-1, vocab)
    metadata = vllm.SpecDecodeMetadata.make_dummy(tokens.tolist())
    sampling = vllm.SamplingMetadata(temperature=wrap(np.full(batch, 0.8, np.float32)),
                                     all_greedy=False)
    sampler = vllm.RejectionSampler(threads=1)  # the bare calls run on one thread too
    warp = specdec.Warp(temperature=0.8)
    offsets = np.arange(0, batch * k + 1, k, dtype=np.int32)
    flat_tokens = tokens.reshape(-1)
    logits_w = wrap(logits)

    def vllm_bare():
        warped = specdec.warp_logits(warp, logits)
        specdec.verify_chain_batch_target_only(target_rows=warped, draft_tokens=flat_tokens,
                                               draft_offsets=offsets, streams=streams, threads=1)

    out["vllm"] = (lambda: sampler.forward(metadata, None, logits_w, sampling), vllm_bare)

    # vLLM's "fly" method against warp_logits + verify_chain_batch_fly.
    fly_config = vllm.SpeculativeConfig(rejection_sample_method="fly", fly_window_size=1,
                                        fly_entropy_threshold=0.5)
    fly = vllm.RejectionSampler(None, fly_config, "cpu", threads=1)

    def fly_bare():
        warped = specdec.warp_logits(warp, logits)
        specdec.verify_chain_batch_fly(target_rows=warped, draft_tokens=flat_tokens,
                                       draft_offsets=offsets, streams=streams,
                                       fly_window_size=1, fly_entropy_threshold=0.5, threads=1)

    out["vllm fly"] = (lambda: fly.forward(metadata, None, logits_w, sampling), fly_bare)

    # FlashInfer: draft rows equal to the target rows.
    draft = np.ascontiguousarray(rows[:, :k])
    draft_w, tokens_w, rows_w = wrap(draft), wrap(tokens), wrap(rows)
    out["flashinfer"] = (  # both sides on the adapter's thread count (every thread)
        lambda: flashinfer.chain_speculative_sampling(draft_w, tokens_w, rows_w, seed=1),
        lambda: specdec.verify_chain_batch(target_rows=rows, draft_rows=draft,
                                           draft_tokens=tokens, streams=streams))

    # SGLang: a chain of k drafts as a tree of k + 1 slots; slot s's row is rows[:, s].
    slots = k + 1
    candidates = np.concatenate([np.zeros((batch, 1), np.int64), tokens], axis=1)
    index = np.arange(batch * slots, dtype=np.int64).reshape(batch, slots)
    next_token = np.tile(np.append(np.arange(1, slots), -1), (batch, 1)).astype(np.int64)
    next_sibling = np.full((batch, slots), -1, np.int64)
    predicts = wrap(np.full(batch * slots, -1, np.int32))
    accept_index = wrap(np.full((batch, slots), -1, np.int32))
    accept_num = wrap(np.zeros(batch, np.int32))
    sg = [wrap(a) for a in (candidates, index, next_token, next_sibling)]
    node_offsets = np.arange(0, batch * k + 1, k, dtype=np.int32)
    parents = np.tile(np.arange(-1, k - 1, dtype=np.int32), batch)
    out["sglang"] = (
        lambda: sglang.tree_speculative_sampling_target_only(
            predicts, accept_index, accept_num, *sg, target_probs=rows_w, seed=1),
        lambda: specdec.verify_tree_batch_target_only(
            node_offsets=node_offsets, tokens=flat_tokens, parents=parents,
            target_rows=rows.reshape(-1, vocab), streams=streams, threads=1))
    return out


_COMPILED = ("_warp_rows", "warp_logits", "verify_chain_batch", "verify_chain_batch_target_only",
             "verify_chain_batch_fly", "_fill_uniforms", "_sglang_verify_trees")


def own_work(adapter, repeats):
    """The adapter's time per call with its compiled calls stubbed (each returns its first
    output again)."""
    from specdec import _specdec
    real = {name: getattr(_specdec, name) for name in _COMPILED}
    saved = {}

    def stub(name):
        def call(*args, **kwargs):
            if name not in saved:
                saved[name] = real[name](*args, **kwargs)
            return saved[name]
        return call

    try:
        for name in _COMPILED:
            setattr(_specdec, name, stub(name))
        adapter()
        return per_call(adapter, repeats)
    finally:
        for name, function in real.items():
            setattr(_specdec, name, function)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", action="store_true", help="pass torch tensors, not NumPy")
    parser.add_argument("--repeats", type=int, default=200)
    options = parser.parse_args()
    batch, k, vocab = 8, 4, 32000
    print(f"B = {batch}, k = {k}, V = {vocab}, {'torch' if options.torch else 'NumPy'} inputs")
    print(f"{'adapter':>11} {'adapter us':>11} {'bare us':>9} {'overhead us':>12} {'ratio':>6} "
          f"{'own us':>7} {'own/bare':>8}")
    for name, (adapter, bare) in cases(batch, k, vocab, options.torch).items():
        a = per_call(adapter, options.repeats)
        b = per_call(bare, options.repeats)
        own = own_work(adapter, options.repeats)
        print(f"{name:>11} {a * 1e6:>11.1f} {b * 1e6:>9.1f} {(a - b) * 1e6:>12.1f} {a / b:>6.2f} "
              f"{own * 1e6:>7.1f} {own / b:>8.2f}")


if __name__ == "__main__":
    main()
