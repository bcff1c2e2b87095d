"""The engine adapters on torch tensors where they lie: no row, token or output crosses between
host and device. On the CPU each adapter runs with the host<->device moves torch offers patched
to raise, and must give the NumPy path's tokens bit for bit on the same inputs and seeds; where a
GPU is present the same calls run on CUDA tensors and must give the CPU's tokens."""

import contextlib

import numpy as np
import pytest

import specdec
from specdec.compat import flashinfer, sglang, vllm

from conftest import requires_cuda, requires_torch, torch


@contextlib.contextmanager
def no_host_device_moves(allow_numpy=False):
    """Within: Tensor.cpu / .cuda / .numpy, a device move by Tensor.to and torch.from_numpy
    raise (a dtype change by .to stays on the device and is allowed; `allow_numpy` keeps
    Tensor.numpy, a view sharing a CPU tensor's memory). The extension's own handle on
    torch.from_numpy (which shares host memory for CPU outputs) is taken before."""
    specdec.verify_chain_batch(target_rows=torch.full((1, 2), 0.5),
                               draft_rows=torch.full((0, 2), 0.5),
                               draft_tokens=torch.zeros(0, dtype=torch.int32),
                               draft_offsets=torch.tensor([0, 0], dtype=torch.int32),
                               streams=[specdec.RandomStream(seed=1)])
    to = torch.Tensor.to

    def refuse(name):
        def raising(*args, **kwargs):
            raise AssertionError(f"{name} called by an adapter")
        return raising

    def dtype_only(self, *args, **kwargs):
        targets = [kwargs.get("device")] + [a for a in args if isinstance(a, (str, torch.device))]
        if any(t is not None and torch.device(t) != self.device for t in targets):
            raise AssertionError("Tensor.to moved a tensor between devices")
        return to(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        for name in ("cpu", "cuda") + (() if allow_numpy else ("numpy",)):
            patch.setattr(torch.Tensor, name, refuse(f"Tensor.{name}"))
        patch.setattr(torch.Tensor, "to", dtype_only)
        patch.setattr(torch, "from_numpy", refuse("torch.from_numpy"))
        yield


def probability_rows(rng, *shape):
    rows = rng.random(shape).astype(np.float32) ** 4
    return rows / rows.sum(-1, keepdims=True)


def flashinfer_case(seed, batch=6, n=4, vocab=48, unusable=False):
    rng = np.random.default_rng(seed)
    draft = probability_rows(rng, batch, n, vocab)
    target = probability_rows(rng, batch, n + 1, vocab)
    tokens = rng.integers(0, vocab, (batch, n))
    target[:, np.arange(n)] = 0.5 * target[:, np.arange(n)]  # half the mass on the drafts: mixed
    target[np.arange(batch)[:, None], np.arange(n), tokens] += 0.5
    if unusable:  # a placeholder, an id past V and a draft token its row gives no probability
        tokens[1, 2], tokens[3, 0] = -1, vocab + 3
        draft[4, 1, tokens[4, 1]] = 0.0
        draft[4, 1] /= draft[4, 1].sum()
    return draft, tokens, target


@requires_torch
@pytest.mark.parametrize("unusable", [False, True])
def test_flashinfer_torch_path_gives_the_numpy_tokens_without_moves(unusable):
    for seed in range(4):
        draft, tokens, target = flashinfer_case(seed, unusable=unusable)
        expected = [np.array(x) for x in flashinfer.chain_speculative_sampling(
            draft, tokens, target, seed=seed + 11, offset=5)]
        accepted, emitted = torch.full((6,), 3, dtype=torch.int32), torch.zeros(6, dtype=torch.int32)
        inputs = [torch.as_tensor(x) for x in (draft, tokens, target)]
        with no_host_device_moves():
            got = flashinfer.chain_speculative_sampling(*inputs, accepted, emitted,
                                                        seed=seed + 11, offset=torch.tensor([5]))
        assert got[1] is accepted and got[2] is emitted
        assert got[0].tolist() == expected[0].tolist()
        assert (accepted - 3).tolist() == expected[1].tolist()
        assert emitted.tolist() == expected[2].tolist()


@requires_torch
def test_flashinfer_torch_path_rescales_narrow_rows_and_names_bad_ones():
    draft, tokens, target = flashinfer_case(5)
    halves = [torch.as_tensor(x).to(torch.bfloat16) for x in (draft, target)]
    expected = flashinfer.chain_speculative_sampling(
        np.array(halves[0].float().tolist(), np.float32), tokens,
        np.array(halves[1].float().tolist(), np.float32), seed=3)
    token_tensor = torch.as_tensor(tokens)
    with no_host_device_moves():
        got = flashinfer.chain_speculative_sampling(halves[0], token_tensor, halves[1], seed=3)
    assert got[0].tolist() == np.asarray(expected[0]).tolist()
    target[2, 1, 7] = -0.25
    inputs = [torch.as_tensor(x) for x in (draft, tokens, target)]
    with pytest.raises(specdec.Error) as raised, no_host_device_moves():
        flashinfer.chain_speculative_sampling(*inputs, seed=3)
    assert raised.value.argument == "target_probs"
    draft[0, 0] *= 1.005  # off by more than the verifier's tolerance, within renormalised's 1%
    target[2, 1, 7] = 0.0
    target[2, 1] /= target[2, 1].sum()
    expected = flashinfer.chain_speculative_sampling(draft, tokens, target, seed=3)
    inputs = [torch.as_tensor(x) for x in (draft, tokens, target)]
    with no_host_device_moves():
        got = flashinfer.chain_speculative_sampling(*inputs, seed=3)
    assert got[0].tolist() == np.asarray(expected[0]).tolist()


def vllm_case(seed, counts=(3, 0, 2, 4, 1), vocab=40):
    """A vLLM batch (metadata, logits, draft rows); seeds 0 mod 3 give every request 3 drafts
    (a uniform batch)."""
    if seed % 3 == 0:
        counts = (3,) * len(counts)
    rng = np.random.default_rng(seed)
    total, batch = sum(counts), len(counts)
    logits = rng.standard_normal((total + batch, vocab)).astype(np.float32) * 2
    tokens = rng.integers(0, vocab, total).astype(np.int32)
    tokens[2] = -1  # vLLM's placeholder
    starts = np.cumsum((0,) + tuple(counts[:-1]))
    metadata = vllm.SpecDecodeMetadata.make_dummy(
        [tokens[s:s + c].tolist() for s, c in zip(starts, counts)])
    probs = probability_rows(rng, total, vocab)
    return metadata, logits, probs


@requires_torch
@pytest.mark.parametrize("method", ["standard", "synthetic", "fly"])
@pytest.mark.parametrize("with_probs", [False, True])
@pytest.mark.parametrize("temperatures", [[0, 0, 0, 0, 0], [0.8] * 5, [0, 0.7, 1.0, 0, 1.3]])
@pytest.mark.parametrize("permuted", [False, True])
def test_vllm_torch_path_gives_the_numpy_tokens_without_moves(method, with_probs, temperatures,
                                                              permuted):
    metadata, logits, probs = vllm_case(len(temperatures) + int(with_probs))
    if permuted:  # rows not in vLLM's layout, plus one row no index names
        order = np.random.default_rng(1).permutation(logits.shape[0] + 1)
        where = np.argsort(order)  # where[r]: the new position of row r
        logits = np.concatenate([logits, logits[:1] * 0])[order]
        metadata.target_logits_indices = torch.as_tensor(
            where[metadata.target_logits_indices.numpy()].astype(np.int32))
        metadata.bonus_logits_indices = torch.as_tensor(
            where[metadata.bonus_logits_indices.numpy()].astype(np.int32))
    settings = dict(temperature=np.array(temperatures, np.float32),
                    top_k=np.array([0, 5, 0, 100, 3]), top_p=np.array([1, 0.9, 0.5, 1, 1], np.float32),
                    seeds=np.arange(5) * 17 + 3)
    common = dict(rejection_sample_method=method, synthetic_acceptance_rates=[0.5, 0.6, 0.7, 0.8],
                  fly_window_size=1, fly_entropy_threshold=0.3)
    fields = [metadata.draft_token_ids, metadata.cu_num_draft_tokens,
              metadata.target_logits_indices, metadata.bonus_logits_indices]
    host = [np.array(f.tolist(), np.int32) for f in fields]
    expected = vllm.rejection_sample(host[0], metadata.num_draft_tokens, host[1],
                                     probs if with_probs else None, logits, host[2], host[3],
                                     **settings, **common)
    tensors = {k: torch.as_tensor(v) for k, v in settings.items()}
    rows = torch.as_tensor(logits), torch.as_tensor(probs) if with_probs else None
    with no_host_device_moves():
        got = vllm.rejection_sample(fields[0], metadata.num_draft_tokens, fields[1], rows[1],
                                    rows[0], fields[2], fields[3], **tensors, **common)
    assert isinstance(got, torch.Tensor) and got.tolist() == np.asarray(expected).tolist()


@requires_torch
def test_vllm_sampler_logprobs_and_bonus_on_the_torch_path():
    metadata, logits, _ = vllm_case(9)

    def engine_sampler(logits, sampling_metadata, predict_bonus_token=True):
        return logits.argmax(1).to(torch.int32)[:, None]  # the engine's own draw: greedy here

    sampling = vllm.SamplingMetadata(temperature=torch.full((5,), 0.9), all_greedy=False,
                                     generators={1: torch.Generator().manual_seed(3)},
                                     max_num_logprobs=3)
    torch.manual_seed(0)
    rows = torch.as_tensor(logits)
    with no_host_device_moves():
        got = vllm.RejectionSampler(engine_sampler).forward(metadata, None, rows, sampling)
    host = vllm.SpecDecodeMetadata(*(np.array(f.tolist()) if hasattr(f, "tolist") else f
                                     for f in (metadata.draft_token_ids, metadata.num_draft_tokens,
                                               metadata.cu_num_draft_tokens,
                                               metadata.target_logits_indices,
                                               metadata.bonus_logits_indices)))
    torch.manual_seed(0)
    sampling.generators = {1: torch.Generator().manual_seed(3)}
    expected = vllm.RejectionSampler(lambda logits, sampling_metadata, predict_bonus_token=True:
                                     np.array(logits.argmax(1).tolist())[:, None]).forward(
        host, None, logits, sampling)
    assert got.sampled_token_ids.tolist() == np.asarray(expected.sampled_token_ids).tolist()
    mine, theirs = got.logprobs_tensors, expected.logprobs_tensors
    assert mine.logprob_token_ids[:, 0].tolist() == np.asarray(theirs.logprob_token_ids)[:, 0].tolist()
    assert mine.selected_token_ranks.tolist() == np.asarray(theirs.selected_token_ranks).tolist()
    np.testing.assert_allclose(np.array(mine.logprobs.tolist()), np.asarray(theirs.logprobs),
                               rtol=1e-5, atol=1e-5)


def sglang_chain(batch, k, vocab, seed):
    """A chain of k drafts as SGLang's tree of k + 1 slots, and its target rows."""
    rng = np.random.default_rng(seed)
    slots = k + 1
    candidates = np.concatenate([np.zeros((batch, 1), np.int64),
                                 rng.integers(0, vocab, (batch, k))], axis=1)
    index = np.arange(batch * slots, dtype=np.int64).reshape(batch, slots)
    next_token = np.tile(np.append(np.arange(1, slots), -1), (batch, 1)).astype(np.int64)
    next_sibling = np.full((batch, slots), -1, np.int64)
    target = probability_rows(rng, batch, slots, vocab)
    return candidates, index, next_token, next_sibling, target


@requires_torch
def test_sglang_writes_cpu_tensors_in_place_without_moves():
    # The walk runs on the host; CPU tensors are read and written where they are (their NumPy
    # views share memory, so Tensor.numpy is allowed here and nothing else).
    args = sglang_chain(4, 3, 30, seed=2)
    outputs = [np.full(16, -1, np.int32), np.full((4, 4), -1, np.int32), np.zeros(4, np.int32)]
    sglang.tree_speculative_sampling_target_only(*outputs, *args[:4], target_probs=args[4], seed=8)
    tensors = [torch.full((16,), -1, dtype=torch.int32), torch.full((4, 4), -1, dtype=torch.int32),
               torch.zeros(4, dtype=torch.int32)]
    pointers = [t.data_ptr() for t in tensors]
    inputs = [torch.as_tensor(a) for a in args]
    with no_host_device_moves(allow_numpy=True):
        sglang.tree_speculative_sampling_target_only(*tensors, *inputs[:4],
                                                     target_probs=inputs[4], seed=8)
    assert [t.data_ptr() for t in tensors] == pointers
    for tensor, array in zip(tensors, outputs):
        assert tensor.tolist() == array.tolist()


def test_warp_rows_is_warp_logits_row_by_row():
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((6, 50)).astype(np.float32)
    settings = [(0.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 5, 1.0), (1.2, 0, 0.6), (0.9, 49, 0.8),
                (1.0, 0, 1.0)]
    warps = np.zeros((6, 4), np.int32)
    warps[:, 0] = np.array([s[0] for s in settings], np.float32).view(np.int32)
    warps[:, 1] = [s[1] for s in settings]
    warps[:, 2] = np.array([s[2] for s in settings], np.float32).view(np.int32)
    for threads in (1, 0):
        got = np.asarray(specdec._specdec._warp_rows(logits, warps, threads))
        for r, (t, k, p) in enumerate(settings):
            expected = specdec.warp_logits(specdec.Warp(temperature=t, top_k=k, top_p=p), logits[r])
            assert np.array_equal(got[r], np.asarray(expected))
    with pytest.raises(specdec.Error) as raised:
        specdec._specdec._warp_rows(logits, warps[:5], 1)
    assert raised.value.argument == "warps"


def test_fill_uniforms_are_the_streams_uniforms():
    streams = [specdec.RandomStream(seed=9, sequence=b, position=3 * b) for b in range(5)]
    got = np.asarray(specdec._specdec._fill_uniforms(specdec.stream_tensor(streams), 7))
    for b, stream in enumerate(streams):
        assert np.array_equal(got[b], np.asarray(stream.uniforms(7)))


@requires_torch
def test_stream_words_are_stream_tensors():
    from specdec.compat._common import stream_words
    seeds = np.array([0, 1, 2**40 + 7, 2**63 - 1, -5], np.int64)
    positions = np.array([0, 3, 2**31 + 1, 2**32 - 1, 9], np.int64)
    expected = specdec.stream_tensor([specdec.RandomStream(seed=int(s) % 2**64, sequence=b,
                                                           position=int(p))
                                      for b, (s, p) in enumerate(zip(seeds, positions))])
    assert np.array_equal(stream_words(seeds, positions), expected)
    on_torch = stream_words(torch.as_tensor(seeds), torch.as_tensor(positions))
    assert on_torch.dtype == torch.int32 and on_torch.tolist() == expected.tolist()


# Where a GPU is present: the same calls on CUDA tensors give the CPU's tokens.

@requires_cuda
@pytest.mark.parametrize("unusable", [False, True])
def test_flashinfer_on_cuda_gives_the_cpu_tokens(unusable):
    draft, tokens, target = flashinfer_case(7, batch=64, n=5, vocab=4096, unusable=unusable)
    expected = flashinfer.chain_speculative_sampling(draft, tokens, target, seed=2, offset=9)
    got = flashinfer.chain_speculative_sampling(*(torch.as_tensor(x, device="cuda")
                                                  for x in (draft, tokens, target)),
                                                seed=2, offset=9)
    assert all(g.is_cuda for g in got)
    for g, e in zip(got, expected):
        assert g.tolist() == np.asarray(e).tolist()


@requires_cuda
@pytest.mark.parametrize("with_probs", [False, True])
def test_vllm_on_cuda_gives_the_cpu_tokens(with_probs):
    metadata, logits, probs = vllm_case(3, counts=(4, 4, 0, 3, 4, 2, 4, 1), vocab=2048)
    settings = dict(temperature=np.array([0, 0.8, 1, 0, 0.5, 1.2, 1, 0.9], np.float32),
                    top_k=np.array([0, 50, 0, 0, 7, 0, 0, 0]),
                    top_p=np.array([1, 1, 0.9, 1, 1, 0.7, 1, 1], np.float32),
                    seeds=np.arange(8) + 100)
    host = [np.array(f.tolist(), np.int32) for f in
            (metadata.draft_token_ids, metadata.cu_num_draft_tokens,
             metadata.target_logits_indices, metadata.bonus_logits_indices)]
    expected = vllm.rejection_sample(host[0], metadata.num_draft_tokens, host[1],
                                     probs if with_probs else None, logits, host[2], host[3],
                                     **settings)
    device = [torch.as_tensor(h, device="cuda") for h in host]
    got = vllm.rejection_sample(device[0], metadata.num_draft_tokens, device[1],
                                torch.as_tensor(probs, device="cuda") if with_probs else None,
                                torch.as_tensor(logits, device="cuda"), device[2], device[3],
                                **{k: torch.as_tensor(v, device="cuda")
                                   for k, v in settings.items()})
    assert got.is_cuda and got.tolist() == np.asarray(expected).tolist()


@requires_cuda
def test_sglang_refuses_cuda_tensors_by_name():
    args = sglang_chain(2, 2, 16, seed=1)
    outputs = [torch.full((6,), -1, dtype=torch.int32, device="cuda"),
               torch.full((2, 3), -1, dtype=torch.int32, device="cuda"),
               torch.zeros(2, dtype=torch.int32, device="cuda")]
    with pytest.raises(specdec.Error) as raised:
        sglang.tree_speculative_sampling_target_only(
            *outputs, *(torch.as_tensor(a, device="cuda") for a in args[:4]),
            target_probs=torch.as_tensor(args[4], device="cuda"), seed=8)
    assert raised.value.argument == "predicts"


@requires_cuda
def test_a_captured_vllm_step_replays_on_new_inputs():
    # The step vLLM's sampler makes of the bindings, with every input on the device (logits, a
    # warp tensor, draft tokens, offsets and a stream tensor): captured once, replayed on new
    # logits and streams, and equal to the same step run eagerly on those inputs.
    counts, vocab = [4, 2, 3, 4], 1024
    batch, total = len(counts), sum(counts)
    rng = np.random.default_rng(5)
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(counts)]), dtype=torch.int32, device="cuda")
    tokens = torch.as_tensor(rng.integers(0, vocab, total).astype(np.int32), device="cuda")
    warps = torch.zeros((total + batch, 4), dtype=torch.int32, device="cuda")
    warps[:, 0] = torch.full((total + batch,), 0.8).view(torch.int32).cuda()
    warps[:, 2] = torch.ones(total + batch).view(torch.int32).cuda()
    logits = torch.zeros((total + batch, vocab), device="cuda")
    streams = torch.zeros((batch, 6), dtype=torch.int32, device="cuda")

    def step():
        warped = specdec._specdec._warp_rows(logits, warps)
        return specdec.verify_chain_batch_target_only(target_rows=warped, draft_tokens=tokens,
                                                      draft_offsets=offsets, streams=streams,
                                                      check=False)

    def fill(seed):
        local = np.random.default_rng(seed)
        logits.copy_(torch.as_tensor(local.standard_normal((total + batch, vocab)).astype(np.float32) * 3))
        streams.copy_(torch.as_tensor(specdec.stream_tensor(
            [specdec.RandomStream(seed=seed, sequence=b) for b in range(batch)])))

    fill(1)
    step()  # warm-up outside the capture (allocator, first launches)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for seed in (2, 3, 4):
        fill(seed)
        graph.replay()
        replayed = [t.clone() for t in captured]
        eager = step()
        assert all(r.tolist() == e.tolist() for r, e in zip(replayed, eager))
        assert int(replayed[2][-1]) == 0  # no sequence failed


@requires_torch
@pytest.mark.parametrize("change, argument", [
    ("temperature", "temperature[2]"), ("top_p", "top_p[1]"),
    ("cu_num_draft_tokens", "cu_num_draft_tokens"),
    ("target_logits_indices", "target_logits_indices[3]"), ("draft_probs", "draft_probs"),
    ("logits", "logits"),
])
def test_vllm_torch_path_names_bad_input_as_the_numpy_path(change, argument):
    metadata, logits, probs = vllm_case(2)
    fields = {name: np.array(getattr(metadata, name).tolist()) for name in
              ("draft_token_ids", "cu_num_draft_tokens", "target_logits_indices",
               "bonus_logits_indices")}
    settings = dict(temperature=np.full(5, 0.9, np.float32), top_p=np.ones(5, np.float32))
    if change == "temperature":
        settings["temperature"][2] = -0.5
    elif change == "top_p":
        settings["top_p"][1] = 0.0
    elif change == "cu_num_draft_tokens":
        fields[change][1] += 1
    elif change == "target_logits_indices":
        fields[change][3] = logits.shape[0] + 4
        logits = np.concatenate([logits, logits[:1]])  # not vLLM's layout: indices range-checked
    elif change == "draft_probs":
        probs[4, 7] = -0.5
    else:
        logits[6, 3] = np.nan
    for convert in (lambda x: x, torch.as_tensor):
        with pytest.raises(specdec.Error) as raised:
            vllm.rejection_sample(convert(fields["draft_token_ids"]), metadata.num_draft_tokens,
                                  convert(fields["cu_num_draft_tokens"]), convert(probs),
                                  convert(logits), convert(fields["target_logits_indices"]),
                                  convert(fields["bonus_logits_indices"]), seeds=np.arange(5),
                                  **{k: convert(v) for k, v in settings.items()})
        assert raised.value.argument == argument
