"""Batch calls' status words (check=False), check_status, stream tensors, the torch.library
operators and CUDA graph capture (skipped without a GPU)."""

import numpy as np
import pytest

import specdec

V = 8


def streams(batch):
    return [specdec.RandomStream(seed=17, sequence=b) for b in range(batch)]


def chain_inputs():
    """Three sequences of two drafts: the first verifies, the second has a token outside the
    vocabulary, the third a first token of draft probability 0."""
    target = np.full((3, 3, V), 1.0 / V, dtype=np.float32)
    draft = np.full((3, 2, V), 1.0 / (V - 1), dtype=np.float32)
    draft[:, :, 0] = 0.0
    tokens = np.array([[1, 2], [3, V], [0, 1]], dtype=np.int32)
    return dict(target_rows=target, draft_rows=draft, draft_tokens=tokens, streams=streams(3))


def test_check_true_raises_naming_the_sequence():
    with pytest.raises(specdec.Error, match=r"draft_tokens\[1\]\[1\]"):
        specdec.verify_chain_batch(**chain_inputs())


def test_check_false_returns_each_sequences_status():
    emitted, accepted, status = specdec.verify_chain_batch(**chain_inputs(), check=False)
    S = specdec.SequenceStatus
    want = [S.OK, S.TOKEN_OUTSIDE_VOCAB, S.ZERO_DRAFT_PROBABILITY]
    assert status.tolist() == [int(code) for code in want] + [2]
    assert S(int(status[1])) == S.TOKEN_OUTSIDE_VOCAB
    assert accepted[0] >= 0 and accepted[1:].tolist() == [-1, -1]
    assert (emitted[1:] == -1).all()
    # The good sequence is what a batch of it alone gives.
    alone = {k: v[:1] for k, v in chain_inputs().items()}
    good_emitted, good_accepted = specdec.verify_chain_batch(**alone)
    assert emitted[0].tolist() == good_emitted[0].tolist()
    assert accepted[0] == good_accepted[0]


def test_check_status_names_the_first_failed_sequence():
    *_, status = specdec.verify_chain_batch(**chain_inputs(), check=False)
    with pytest.raises(specdec.Error, match=r"status\[1\].*outside the vocabulary"):
        specdec.check_status(status)
    assert specdec.check_status(np.zeros(4, dtype=np.int32)) is None


def test_a_bad_warp_fails_its_sequence_only():
    logits = np.zeros((2, 2, V), dtype=np.float32)
    draft = np.zeros((2, 1, V), dtype=np.float32)
    warps = [specdec.Warp(), specdec.Warp(top_p=0.0)]
    emitted, accepted, status = specdec.verify_chain_batch_logits(
        target_logits=logits, draft_logits=draft, warps=warps,
        draft_tokens=np.array([[1], [2]], dtype=np.int32), streams=streams(2), check=False)
    assert status.tolist() == [0, int(specdec.SequenceStatus.BAD_WARP), 1]
    assert accepted[1] == -1 and accepted[0] >= 0


def test_tree_batch_reports_a_malformed_tree():
    # Two trees of two root children; tree 1 repeats a token (RRS children are distinct).
    rows = np.full((6, V), 1.0 / V, dtype=np.float32)
    outputs = specdec.verify_tree_batch(
        specdec.Recursive(), node_offsets=np.array([0, 2, 4], dtype=np.int32),
        tokens=np.array([1, 2, 3, 3], dtype=np.int32),
        parents=np.array([-1, -1, -1, -1], dtype=np.int32), target_rows=rows, draft_rows=rows,
        streams=streams(2), check=False)
    assert len(outputs) == 5
    assert outputs[-1].tolist() == [0, int(specdec.SequenceStatus.BAD_TREE), 1]
    assert outputs[1][1] == -1 and outputs[2][1] == -1


def test_a_stream_tensor_gives_the_streams_tokens():
    inputs = chain_inputs()
    inputs["draft_tokens"] = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int32)
    want = specdec.verify_chain_batch(**inputs)
    table = specdec.stream_tensor(inputs["streams"])
    assert table.shape == (3, 6) and table.dtype == np.int32
    assert table[:, 2].tolist() == [0, 1, 2]  # the sequence column
    got = specdec.verify_chain_batch(**dict(inputs, streams=table))
    assert [a.tolist() for a in got] == [a.tolist() for a in want]
    with pytest.raises(specdec.Error, match="streams"):
        specdec.verify_chain_batch(**dict(inputs, streams=table[:, :4].copy()))


torch = pytest.importorskip("torch")


def torch_chain_inputs():
    inputs = chain_inputs()
    return dict(target_rows=torch.from_numpy(inputs["target_rows"]),
                draft_rows=torch.from_numpy(inputs["draft_rows"]),
                draft_tokens=torch.from_numpy(inputs["draft_tokens"]),
                streams=torch.from_numpy(specdec.stream_tensor(inputs["streams"])))


def test_the_custom_operator_matches_the_binding():
    import specdec.ops  # noqa: F401  (registers torch.ops.specdec)
    inputs = torch_chain_inputs()
    got = torch.ops.specdec.verify_chain_batch(
        inputs["target_rows"], inputs["draft_rows"], inputs["draft_tokens"], inputs["streams"])
    want = specdec.verify_chain_batch(**inputs, check=False)
    assert [t.tolist() for t in got] == [t.tolist() for t in want]


def test_the_custom_operators_have_shapes_on_meta_tensors():
    import specdec.ops  # noqa: F401
    inputs = {k: v.to("meta") for k, v in torch_chain_inputs().items()}
    emitted, accepted, status = torch.ops.specdec.verify_chain_batch(
        inputs["target_rows"], inputs["draft_rows"], inputs["draft_tokens"], inputs["streams"])
    assert (emitted.shape, accepted.shape, status.shape) == ((3, 3), (3,), (4,))
    assert emitted.dtype == torch.int32 and emitted.device.type == "meta"
    offsets = torch.tensor([0, 3, 3, 6], dtype=torch.int32, device="meta")
    tree = torch.ops.specdec.verify_tree_batch(
        "recursive", offsets, torch.empty(6, dtype=torch.int32, device="meta"),
        torch.empty(6, dtype=torch.int32, device="meta"), torch.empty(9, V, device="meta"),
        torch.empty(9, V, device="meta"), inputs["streams"])
    assert [tuple(t.shape) for t in tree] == [(6,), (3,), (3,), (3,), (4,)]


def test_the_tree_operator_refuses_an_unknown_rule():
    import specdec.ops  # noqa: F401
    rows = torch.full((3, V), 1.0 / V)
    with pytest.raises(Exception, match="rule"):
        torch.ops.specdec.verify_tree_batch(
            "spectr", torch.tensor([0, 2], dtype=torch.int32), torch.tensor([1, 2]),
            torch.tensor([-1, -1]), rows, rows,
            torch.from_numpy(specdec.stream_tensor(streams(1))))


@pytest.mark.skipif(not hasattr(torch, "compile"),
                    reason=f"torch {torch.__version__} has no torch.compile (PyTorch >= 2.0)")
def test_torch_compile_calls_the_operator_without_a_graph_break():
    import specdec.ops  # noqa: F401
    inputs = torch_chain_inputs()

    @torch.compile(fullgraph=True)
    def step(target, draft, tokens, stream_table):
        emitted, accepted, status = torch.ops.specdec.verify_chain_batch(
            target, draft, tokens, stream_table)
        return emitted, accepted + 1, status

    emitted, accepted, status = step(inputs["target_rows"], inputs["draft_rows"],
                                     inputs["draft_tokens"], inputs["streams"])
    want = specdec.verify_chain_batch(**inputs, check=False)
    assert emitted.tolist() == want[0].tolist() and (accepted - 1).tolist() == want[1].tolist()


cuda = pytest.mark.skipif(not (torch.cuda.is_available() and specdec._specdec._with_cuda),
                          reason="needs a CUDA device and specdec built with CUDA")


@cuda
def test_device_status_matches_the_host_status():
    inputs = {k: v.cuda() for k, v in torch_chain_inputs().items()}
    emitted, accepted, status = specdec.verify_chain_batch(**inputs, check=False)
    assert status.is_cuda and emitted.is_cuda
    host = specdec.verify_chain_batch(**chain_inputs(), check=False)
    assert status.cpu().tolist() == host[2].tolist()
    with pytest.raises(specdec.Error, match=r"status\[1\]"):
        specdec.verify_chain_batch(**inputs)


@cuda
def test_a_step_is_captured_in_a_cuda_graph_and_replayed_on_new_inputs():
    inputs = {k: v.cuda() for k, v in torch_chain_inputs().items()}
    inputs["draft_tokens"].copy_(torch.tensor([[1, 2], [3, 4], [5, 6]]))
    offsets = torch.tensor([0, 2, 4, 6], dtype=torch.int32, device="cuda")
    flat = dict(target_rows=inputs["target_rows"].reshape(9, V),
                draft_rows=inputs["draft_rows"].reshape(6, V),
                draft_tokens=inputs["draft_tokens"].reshape(6), streams=inputs["streams"],
                draft_offsets=offsets)
    specdec.verify_chain_batch(**flat, check=False)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        emitted, accepted, status = specdec.verify_chain_batch(**flat, check=False)
    for position in (3, 9):
        flat["streams"][:, 3] = position  # new positions, in place
        flat["target_rows"].copy_(torch.rand(9, V, device="cuda").softmax(-1))
        graph.replay()
        want = specdec.verify_chain_batch(**flat, check=False)
        assert emitted.tolist() == want[0].tolist() and accepted.tolist() == want[1].tolist()
        assert status.tolist() == [0, 0, 0, 0]
