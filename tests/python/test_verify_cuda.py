"""Batched verification on CUDA tensors: the CUDA backend on PyTorch's current stream, with the
CPU backend's results; a clear error where specdec was built without CUDA."""

import numpy as np
import pytest

import specdec
from conftest import requires_cuda, torch

VOCAB = 40

requires_cuda_build = pytest.mark.skipif(not specdec._specdec._with_cuda,
                                         reason="specdec was built without CUDA")


class FakeCudaArray:
    """An array that says it lives on CUDA device 0 (what __dlpack_device__ reports)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("a build without CUDA must refuse the array before reading it")


@pytest.mark.skipif(specdec._specdec._with_cuda, reason="specdec was built with CUDA")
def test_cuda_arrays_are_refused_without_a_cuda_build():
    rows = np.full((2, 3, VOCAB), 1.0 / VOCAB, np.float32)
    with pytest.raises(specdec.Error) as caught:
        specdec.verify_chain_batch(target_rows=rows, draft_rows=FakeCudaArray(),
                                   draft_tokens=[[1, 2], [3, 4]], streams=[specdec.RandomStream()] * 2)
    assert caught.value.argument == "draft_rows"
    assert caught.value.problem == "is a CUDA tensor, but specdec was built without CUDA"
    with pytest.raises(specdec.Error, match="tokens: is a CUDA tensor, but specdec was built"):
        specdec.verify_tree_batch(specdec.Recursive(), node_offsets=[0, 1], tokens=FakeCudaArray(),
                                  parents=[-1], target_rows=rows[0, :2], draft_rows=rows[0, :2],
                                  streams=[specdec.RandomStream()])
    with pytest.raises(specdec.Error, match="target_logits: is a CUDA tensor"):
        specdec.verify_chain_batch_logits(target_logits=FakeCudaArray(), draft_logits=rows,
                                          warps=specdec.Warp(), draft_tokens=[[1, 2]],
                                          streams=[specdec.RandomStream()])


def random_rows(generator, rows):
    values = torch.rand(rows, VOCAB, generator=generator) ** 3
    return values / values.sum(dim=1, keepdim=True)


def batch_inputs(seed=0, batch=5, gamma=3):
    generator = torch.Generator().manual_seed(seed)
    target = random_rows(generator, batch * (gamma + 1)).reshape(batch, gamma + 1, VOCAB)
    draft = 0.5 * target[:, :gamma] + 0.5 * random_rows(generator, batch * gamma).reshape(
        batch, gamma, VOCAB)
    tokens = torch.multinomial(draft.reshape(-1, VOCAB), 1, generator=generator).reshape(batch, gamma)
    streams = [specdec.RandomStream(seed=seed, sequence=b) for b in range(batch)]
    return target, draft, tokens, streams


@requires_cuda
@requires_cuda_build
def test_chain_batch_on_cuda_matches_the_cpu():
    target, draft, tokens, streams = batch_inputs()
    expected = specdec.verify_chain_batch(target_rows=target, draft_rows=draft,
                                          draft_tokens=tokens, streams=streams)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the call runs on PyTorch's current stream
        got = specdec.verify_chain_batch(target_rows=target.cuda(), draft_rows=draft.cuda(),
                                         draft_tokens=tokens.cuda(), streams=streams)
    side.synchronize()
    assert all(t.is_cuda and t.dtype == torch.int32 for t in got)
    assert torch.equal(got[0].cpu(), expected[0]) and torch.equal(got[1].cpu(), expected[1])
    # Ragged: the second sequence drafted nothing.
    offsets = np.array([0, 3, 3, 6], np.int32)
    rows = torch.cat([target[0], target[1, :1], target[2]])
    drafts = torch.cat([draft[0], draft[2]])
    flat = torch.cat([tokens[0], tokens[2]])
    expected = specdec.verify_chain_batch(target_rows=rows, draft_rows=drafts, draft_tokens=flat,
                                          streams=streams[:3], draft_offsets=offsets)
    got = specdec.verify_chain_batch(target_rows=rows.cuda(), draft_rows=drafts.cuda(),
                                     draft_tokens=flat.cuda(), streams=streams[:3],
                                     draft_offsets=offsets)
    assert torch.equal(got[0].cpu(), expected[0]) and torch.equal(got[1].cpu(), expected[1])


@requires_cuda
@requires_cuda_build
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_chain_batch_logits_on_cuda_matches_the_cpu(dtype):
    generator = torch.Generator().manual_seed(3)
    logits = (torch.randn(4, 4, VOCAB, generator=generator) * 2).to(getattr(torch, dtype))
    draft_logits = logits[:, :3].contiguous()
    tokens = torch.argmax(draft_logits.float(), dim=2)
    streams = [specdec.RandomStream(seed=9, sequence=b) for b in range(4)]
    warps = [specdec.Warp(temperature=0.8), specdec.Warp(top_k=8), specdec.Warp(top_p=0.9),
             specdec.Warp(min_p=0.02)]
    expected = specdec.verify_chain_batch_logits(target_logits=logits, draft_logits=draft_logits,
                                                 warps=warps, draft_tokens=tokens, streams=streams)
    got = specdec.verify_chain_batch_logits(target_logits=logits.cuda(),
                                            draft_logits=draft_logits.cuda(), warps=warps,
                                            draft_tokens=tokens.cuda(), streams=streams)
    torch.cuda.synchronize()
    assert torch.equal(got[0].cpu(), expected[0]) and torch.equal(got[1].cpu(), expected[1])


@requires_cuda
@requires_cuda_build
@pytest.mark.parametrize("rule", [specdec.Recursive(), specdec.MultiRound()], ids=repr)
def test_tree_batch_on_cuda_matches_the_cpu(rule):
    generator = torch.Generator().manual_seed(4)
    # Two trees: root -> {a, b}, a -> {c}; and an empty tree (only its root row).
    tokens = torch.tensor([3, 7, 11], dtype=torch.int32)
    parents = torch.tensor([-1, -1, 0], dtype=torch.int32)
    offsets = np.array([0, 3, 3], np.int32)
    rows = random_rows(generator, 3 + 2)
    draft = rows.clone()
    streams = [specdec.RandomStream(seed=s, sequence=1) for s in range(2)]
    kwargs = dict(node_offsets=offsets, streams=streams)
    expected = specdec.verify_tree_batch(rule, tokens=tokens, parents=parents, target_rows=rows,
                                         draft_rows=draft, **kwargs)
    got = specdec.verify_tree_batch(rule, tokens=tokens.cuda(), parents=parents.cuda(),
                                    target_rows=rows.cuda(), draft_rows=draft.cuda(), **kwargs)
    torch.cuda.synchronize()
    for g, e in zip(got, expected):
        assert g.is_cuda and torch.equal(g.cpu(), e)


@requires_cuda
@requires_cuda_build
def test_mixed_devices_are_refused_naming_the_argument():
    target, draft, tokens, streams = batch_inputs()
    with pytest.raises(specdec.Error) as caught:
        specdec.verify_chain_batch(target_rows=target.cuda(), draft_rows=draft,
                                   draft_tokens=tokens.cuda(), streams=streams)
    assert caught.value.argument == "draft_rows"
    with pytest.raises(specdec.Error, match="target_rows: is a CUDA tensor; this function runs"):
        specdec.verify_chain(specdec.Rejection(), target[0].cuda(), draft[0], tokens[0],
                             streams[0])
