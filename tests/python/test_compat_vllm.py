"""specdec.compat.vllm: vLLM v1's published greedy vectors, the distribution of random requests
with and without draft probabilities, the vocabulary boundary, and bad input."""

import numpy as np
import pytest

import specdec
from specdec.compat import vllm
from specdec.compat.vllm import PLACEHOLDER_TOKEN_ID, RejectionSampler, SamplingMetadata, SpecDecodeMetadata

from conftest import chi_square_p_value, requires_torch, run_example_here, torch

V = 100  # vLLM's test vocabulary


def one_hot_logits(token_ids):
    """Logits +100 at each id and -100 elsewhere, as vLLM's tests build them."""
    logits = np.full((len(token_ids), V), -100.0, np.float32)
    logits[np.arange(len(token_ids)), token_ids] = 100.0
    return logits


def greedy(spec_tokens, output_tokens):
    """vLLM's greedy case: request b drafts spec_tokens[b]; the target picks output_tokens[b]
    at each draft position and, last, the bonus token."""
    metadata = SpecDecodeMetadata.make_dummy(spec_tokens)
    rows = one_hot_logits([t for request in output_tokens for t in request])
    sampled = RejectionSampler().forward(metadata, None, rows, SamplingMetadata()).sampled_token_ids
    return np.asarray(sampled).tolist()


@pytest.mark.parametrize("spec, target, expected", [
    ([[1, 2, 3]], [[1, 2, 3, 4]], [[1, 2, 3, 4]]),                          # perfect match
    ([[1, 2, 3]], [[1, 5, 3, 4]], [[1, 5, -1, -1]]),                        # early mismatch
    ([[1, 2], [3]], [[1, 2, 5], [3, 4]], [[1, 2, 5], [3, 4, -1]]),          # multiple sequences
    ([[1]], [[1, 2]], [[1, 2]]),                                            # single token
    ([[]], [[5]], [[5]]),                                                   # empty sequence
    ([[1, 2, 3], [4, 5, 6]], [[1, 2, 7, 6], [4, 8, 6, 9]],
     [[1, 2, 7, -1], [4, 8, -1, -1]]),                                      # multiple mismatches
    ([[1, 2], [3, 4]], [[1, 5, 6], [3, 4, 7]], [[1, 5, -1], [3, 4, 7]]),    # parametrised cases
    ([[1, 2, 3]], [[1, 2, 3, 4]], [[1, 2, 3, 4]]),
    ([[1]], [[2, 3]], [[2, -1]]),
])
def test_published_greedy_vectors(spec, target, expected):
    assert greedy(spec, target) == expected


def test_greedy_ignores_draft_probabilities():
    metadata = SpecDecodeMetadata.make_dummy([[1, 2, 3]])
    probs = np.full((3, V), 1.0 / V, np.float32)
    out = RejectionSampler().forward(metadata, probs, one_hot_logits([1, 5, 3, 4]),
                                     SamplingMetadata())
    assert np.asarray(out.sampled_token_ids).tolist() == [[1, 5, -1, -1]]


def test_mixed_batch_keeps_each_request_in_place():
    # Greedy and random requests, with draft probabilities, split into two verifier calls and
    # come back in their rows: the greedy ones give vLLM's greedy vectors, the random one (whose
    # target is one-hot on its drafts, so every draft passes) its drafts and bonus.
    metadata = SpecDecodeMetadata.make_dummy([[1, 2, 3], [7, 8], [4]])
    logits = one_hot_logits([1, 5, 3, 4, 7, 8, 9, 4, 6])
    probs = np.full((6, V), 1.0 / V, np.float32)
    sampling = SamplingMetadata(temperature=np.array([0.0, 1.0, 0.0]), all_greedy=False,
                                top_k=np.array([0, 5, 0]), top_p=np.array([1.0, 0.5, 1.0]))
    out = RejectionSampler().forward(metadata, probs, logits, sampling).sampled_token_ids
    assert np.asarray(out).tolist() == [[1, 5, -1, -1], [7, 8, 9, -1], [4, 6, -1, -1]]


@requires_torch
def test_torch_in_torch_out():
    metadata = SpecDecodeMetadata.make_dummy([[1, 2], [3]])
    logits = torch.from_numpy(one_hot_logits([1, 2, 5, 3, 4])).to(torch.bfloat16)
    out = RejectionSampler().forward(metadata, None, logits, SamplingMetadata())
    assert isinstance(out.sampled_token_ids, torch.Tensor)
    assert out.sampled_token_ids.dtype == torch.int32
    assert out.sampled_token_ids.tolist() == [[1, 2, 5], [3, 4, -1]]


def test_parse_output_drops_placeholders_and_out_of_vocabulary_ids():
    output = np.array([[1, 2, -1], [3, 150, 4], [5, 6, 7]], np.int32)
    lists, cu = RejectionSampler.parse_output(output, V, discard_req_indices=[2],
                                              return_cu_num_tokens=True)
    assert lists == [[1, 2], [3, 4], []] and cu == [0, 2, 4, 4]
    assert RejectionSampler.parse_output(output, V)[1] is None


def softmax(logits, temperature):
    z = np.exp((logits - logits.max()) / temperature)
    return z / z.sum()


@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_first_token_follows_the_warped_target(with_draft_probs):
    # 20,000 requests of one draft at V = 8: the first emitted token must follow the target
    # warped by temperature 0.7 and top-k 6 (two tokens masked). Chi-square at p < 1e-6: a
    # correct sampler fails once in a million runs; seeds are fixed, so a run repeats exactly.
    vocab, batch = 8, 20000
    rng = np.random.default_rng(11)
    target_logits = rng.normal(size=vocab).astype(np.float32)
    draft = rng.dirichlet(np.ones(vocab)).astype(np.float32)
    drafts = rng.choice(vocab, size=batch, p=draft / draft.sum())
    metadata = SpecDecodeMetadata.make_dummy([[int(t)] for t in drafts])
    logits = np.tile(target_logits, (2 * batch, 1))
    probs = np.tile(draft, (batch, 1)) if with_draft_probs else None
    first = np.asarray(vllm.rejection_sample(
        metadata.draft_token_ids, metadata.num_draft_tokens, metadata.cu_num_draft_tokens, probs,
        logits, metadata.target_logits_indices, metadata.bonus_logits_indices,
        temperature=np.full(batch, 0.7, np.float32), top_k=np.full(batch, 6),
        seeds=np.arange(batch)))[:, 0]
    expected = softmax(target_logits, 0.7)
    expected[np.argsort(target_logits)[:2]] = 0
    expected /= expected.sum()
    counts = np.bincount(first, minlength=vocab).astype(np.float64)
    assert chi_square_p_value(counts, expected * batch) > 1e-6


def test_seeded_requests_repeat():
    metadata = SpecDecodeMetadata.make_dummy([[1, 2, 3], [4, 5]])
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(7, V)).astype(np.float32)
    sampling = lambda: SamplingMetadata(  # noqa: E731
        temperature=np.array([1.0, 0.8]), all_greedy=False,
        generators={0: np.random.default_rng(5), 1: np.random.default_rng(6)})
    first = RejectionSampler().forward(metadata, None, logits, sampling()).sampled_token_ids
    second = RejectionSampler().forward(metadata, None, logits, sampling()).sampled_token_ids
    assert np.array_equal(first, second)


@pytest.mark.parametrize("vocab", [100, 8193])
@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_ids_stay_in_the_vocabulary_and_placeholders_are_rejected(vocab, with_draft_probs):
    # Draft ids -1 (the placeholder), V and V + 7 are rejected without being read: the token at
    # their position is drawn from the target row, and every id emitted lies in [0, V).
    drafts = [[-1, 2], [vocab, 1], [3, vocab + 7], [vocab - 1]]
    metadata = SpecDecodeMetadata.make_dummy(drafts)
    rng = np.random.default_rng(4)
    logits = rng.normal(size=(sum(len(d) + 1 for d in drafts), vocab)).astype(np.float32)
    logits[:, vocab - 1] += 3.0  # the last id is likely
    probs = None
    if with_draft_probs:
        probs = rng.dirichlet(np.ones(vocab), size=7).astype(np.float32)
    out = np.asarray(vllm.rejection_sample(
        metadata.draft_token_ids, metadata.num_draft_tokens, metadata.cu_num_draft_tokens, probs,
        logits, metadata.target_logits_indices, metadata.bonus_logits_indices,
        temperature=np.ones(4), seeds=[1, 2, 3, 4]))
    assert out.shape == (4, 3)
    assert ((out >= 0) & (out < vocab) | (out == PLACEHOLDER_TOKEN_ID)).all()
    assert (out[0, 1:] == -1).all() and (out[1, 1:] == -1).all()  # rejected at position 0
    assert out[2, 2] == -1  # rejected at position 1 at the latest
    assert (out[:, 0] >= 0).all()


def test_zero_draft_probability_is_a_rejection():
    # 200 requests drafting tokens 2 and 3, which the draft gives no probability: each is
    # rejected at position 0, and the token there comes from the residual max(p - q, 0), which
    # excludes token 1 (q's whole mass; p is uniform).
    batch = 200
    metadata = SpecDecodeMetadata.make_dummy([[2, 3]] * batch)
    probs = np.zeros((2 * batch, 4), np.float32)
    probs[:, 1] = 1.0
    out = np.asarray(vllm.rejection_sample(
        metadata.draft_token_ids, metadata.num_draft_tokens, metadata.cu_num_draft_tokens, probs,
        np.zeros((3 * batch, 4), np.float32), metadata.target_logits_indices,
        metadata.bonus_logits_indices, temperature=np.ones(batch), seeds=np.arange(batch)))
    assert set(out[:, 0].tolist()) == {0, 2, 3} and (out[:, 1:] == -1).all()


def call(**change):
    metadata = SpecDecodeMetadata.make_dummy([[1, 2], [3]])
    args = dict(draft_token_ids=metadata.draft_token_ids,
                num_draft_tokens=metadata.num_draft_tokens,
                cu_num_draft_tokens=metadata.cu_num_draft_tokens, draft_probs=None,
                logits=np.zeros((5, 8), np.float32),
                target_logits_indices=metadata.target_logits_indices,
                bonus_logits_indices=metadata.bonus_logits_indices,
                temperature=[1.0, 0.0], seeds=[1, 2])
    args.update(change)
    return vllm.rejection_sample(**args)


@pytest.mark.parametrize("change, argument", [
    (dict(logits=np.zeros((5, 8), np.int32)), "logits"),
    (dict(logits=np.zeros((5, 8, 1), np.float32)), "logits"),
    (dict(logits=np.full((5, 8), np.nan, np.float32)), "logits"),
    (dict(draft_token_ids=np.array([1, 2], np.int32)), "num_draft_tokens"),
    (dict(draft_token_ids=np.array([1.0, 2.0, 3.0])), "draft_token_ids"),
    (dict(num_draft_tokens=[4, -1]), "num_draft_tokens"),
    (dict(cu_num_draft_tokens=np.array([0, 2], np.int32)), "cu_num_draft_tokens"),
    (dict(target_logits_indices=np.array([0, 1, 5], np.int32)), "target_logits_indices[2]"),
    (dict(bonus_logits_indices=np.array([2], np.int32)), "bonus_logits_indices"),
    (dict(draft_probs=np.ones((3, 7), np.float32)), "draft_probs"),
    (dict(draft_probs=-np.ones((3, 8), np.float32)), "draft_probs"),
    (dict(temperature=[1.0]), "temperature"),
    (dict(temperature=[1.0, -2.0]), "temperature[1]"),
    (dict(top_p=[1.0, 0.0]), "top_p[1]"),
    (dict(seeds=[1, 2, 3]), "seeds"),
    (dict(max_spec_len=1), "max_spec_len"),
])
def test_bad_input_names_the_argument(change, argument):
    with pytest.raises(specdec.Error) as raised:
        call(**change)
    assert raised.value.argument == argument
    assert isinstance(raised.value, ValueError)


@requires_torch
def test_cuda_tensors_are_refused_by_name():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    with pytest.raises(specdec.Error) as raised:
        call(logits=torch.zeros((5, 8), device="cuda"))
    assert raised.value.argument == "logits"


def test_bad_generator_is_named():
    metadata = SpecDecodeMetadata.make_dummy([[1]])
    with pytest.raises(specdec.Error) as raised:
        RejectionSampler().forward(metadata, None, np.zeros((2, 8), np.float32),
                                   SamplingMetadata(temperature=[1.0], all_greedy=False,
                                                    generators={0: 5}))
    assert raised.value.argument == "sampling_metadata.generators[0]"


# ---- rejection_sample_method="block" ---------------------------------------------------------

BLOCK_V, BLOCK_K = 3, 3  # small enough to check the whole law of the emitted sequence


def block_batch(requests, seed):
    """`requests` chains of BLOCK_K drafts sampled from fixed draft rows q_i, the target rows p_i
    (the same at each position of every request, so the target's law is p_0 x p_1 x ...)."""
    rng = np.random.default_rng(seed)
    target = rng.dirichlet(np.full(BLOCK_V, 1.5), BLOCK_K + 1).astype(np.float32)
    draft = rng.dirichlet(np.full(BLOCK_V, 1.5), BLOCK_K).astype(np.float32)
    draft /= draft.sum(axis=1, keepdims=True)
    tokens = np.stack([rng.choice(BLOCK_V, size=requests, p=draft[i] / draft[i].sum())
                       for i in range(BLOCK_K)], axis=1).reshape(-1).astype(np.int32)
    counts = [BLOCK_K] * requests
    rows = BLOCK_K + 1
    args = dict(draft_token_ids=tokens, num_draft_tokens=counts,
                cu_num_draft_tokens=np.cumsum(counts).astype(np.int32),
                draft_probs=np.tile(draft, (requests, 1)),
                logits=np.tile(np.log(target), (requests, 1)),
                target_logits_indices=np.concatenate(
                    [np.arange(r * rows, r * rows + BLOCK_K) for r in range(requests)]),
                bonus_logits_indices=np.arange(requests) * rows + BLOCK_K,
                temperature=np.ones(requests, np.float32), seeds=np.arange(requests) + 7 * seed)
    return target, args


def test_block_method_follows_the_target():
    # Lossless: each emitted sequence, completed to BLOCK_K + 1 tokens by draws from the target
    # rows, is distributed as p_0 x ... x p_K. Chi-square of its first three tokens (27 cells,
    # 26 degrees of freedom) at threshold 54.1: false failure 1e-3.
    requests = 6000
    target, args = block_batch(requests, seed=1)
    out = vllm.rejection_sample(**args, rejection_sample_method="block")
    rng = np.random.default_rng(2)
    counts = np.zeros(BLOCK_V ** 3)
    for row in np.asarray(out):
        emitted = [int(t) for t in row if t >= 0]
        assert 1 <= len(emitted) <= BLOCK_K + 1
        while len(emitted) < 3:
            row = target[len(emitted)]
            emitted.append(int(rng.choice(BLOCK_V, p=row / row.sum())))
        counts[emitted[0] * BLOCK_V ** 2 + emitted[1] * BLOCK_V + emitted[2]] += 1
    expected = np.einsum("a,b,c->abc", *target[:3]).reshape(-1) * requests
    assert ((counts - expected) ** 2 / expected).sum() < 54.1


def test_block_method_accepts_at_least_as_many_tokens_as_standard():
    # Block verification never accepts fewer tokens in expectation (Sun et al., Theorem 2); with
    # these rows it accepts clearly more. Fixed seeds: the comparison is deterministic.
    requests = 4000
    _, args = block_batch(requests, seed=3)
    emitted = {method: (np.asarray(vllm.rejection_sample(**args, rejection_sample_method=method))
                        >= 0).sum(axis=1).mean()
               for method in ("standard", "block")}
    assert emitted["block"] >= emitted["standard"]


def test_block_method_without_draft_probs_is_the_target_only_rule():
    # vLLM runs the token-level rule for drafts without probabilities under "block" as well.
    _, args = block_batch(50, seed=4)
    args["draft_probs"] = None
    standard = vllm.rejection_sample(**args)
    block = vllm.rejection_sample(**args, rejection_sample_method="block")
    assert np.array_equal(standard, block)


def test_block_method_keeps_greedy_requests_and_unusable_tokens():
    spec, target = [[1, 2, 3]], [[1, 5, 3, 4]]
    metadata = SpecDecodeMetadata.make_dummy(spec)
    rows = one_hot_logits([t for request in target for t in request])
    probs = np.full((3, V), 1.0 / V, np.float32)
    sampler = RejectionSampler(rejection_sample_method="block")
    greedy_out = sampler.forward(metadata, probs, rows, SamplingMetadata()).sampled_token_ids
    assert np.asarray(greedy_out).tolist() == [[1, 5, -1, -1]]
    # A placeholder draft token is rejected without being read, under "block" too.
    metadata = SpecDecodeMetadata.make_dummy([[1, PLACEHOLDER_TOKEN_ID, 3]])
    sampling = SamplingMetadata(temperature=np.ones(1, np.float32), all_greedy=False)
    out = np.asarray(sampler.forward(metadata, probs, rows, sampling).sampled_token_ids)
    assert out[0, 2:].tolist() == [-1, -1] and 0 <= out[0, 1] < V


@pytest.mark.parametrize("method", ["blockwise", "", 3])
def test_other_rejection_methods_are_refused_by_name(method):
    with pytest.raises(specdec.Error, match="standard") as raised:
        RejectionSampler(rejection_sample_method=method)
    assert raised.value.argument == "rejection_sample_method"
    _, args = block_batch(2, seed=5)
    with pytest.raises(specdec.Error) as raised:
        vllm.rejection_sample(**args, rejection_sample_method=method)
    assert raised.value.argument == "rejection_sample_method"


@requires_torch
@pytest.mark.parametrize("options, promise", [
    (["--temperature", "0"], "every request matches the target's greedy decoding"),
    (["--draft-probs"], "tokens per request and pass"),
])
def test_engine_loop_example_runs(options, promise, monkeypatch, capsys):
    out = run_example_here("engine_vllm_adapter.py", *options, monkeypatch=monkeypatch,
                           capsys=capsys)
    assert promise in out
