"""specdec.compat.vllm under vLLM's request constraints: the sampler with penalties, an
allowed-token mask, bad words and min_tokens in the SamplingMetadata emits, for the same seeds,
exactly the tokens it emits without them on logits transformed beforehand by a NumPy reference
of vLLM's rules; a constrained token is never emitted; the first token follows the constrained
target (chi-square); bad fields are named."""

import numpy as np
import pytest

import specdec
from specdec.compat.vllm import (RejectionSampler, SamplingMetadata, SpecDecodeMetadata,
                                 SpeculativeConfig)

from conftest import chi_square_p_value, requires_torch, torch

V = 12


def reference(logits, drafts, meta):
    """vLLM's transform, row by row: row j of request b sees b's output plus drafts[b][:j];
    penalties, then allowed mask, bad words and min_tokens as -inf."""
    out = np.array(logits, np.float32, copy=True)
    row = 0
    for b, chain in enumerate(drafts):
        for j in range(len(chain) + 1):
            history = [int(t) for t in meta.output_token_ids[b]] + [int(t) for t in chain[:j]]
            x = out[row]
            if not meta.no_penalties:
                prompt = [int(t) for t in meta.prompt_token_ids[b] if t < V]
                for t in range(V):
                    count = history.count(t)
                    if count or t in prompt:
                        r = np.float32(meta.repetition_penalties[b])
                        x[t] = x[t] / r if x[t] > 0 else x[t] * r
                    x[t] -= np.float32(meta.frequency_penalties[b]) * np.float32(count)
                    x[t] -= np.float32(meta.presence_penalties[b]) * np.float32(count > 0)
            if meta.allowed_token_ids_mask is not None:
                x[np.asarray(meta.allowed_token_ids_mask)[b]] = -np.inf
            for word in meta.bad_words_token_ids.get(b, []):
                head = list(word[:-1])
                if not head or history[-len(head):] == head:
                    x[word[-1]] = -np.inf
            if b in meta.min_tokens:
                least, stops = meta.min_tokens[b]
                if len(history) < least:
                    x[sorted(stops)] = -np.inf
            row += 1
    return out


def batch(seed, probs=False):
    rng = np.random.default_rng(seed)
    drafts = [rng.integers(0, V, size=n).tolist() for n in (3, 0, 4, 2)]
    logits = rng.normal(0, 1.5, size=(sum(len(d) + 1 for d in drafts), V)).astype(np.float32)
    q = None
    if probs:
        q = rng.dirichlet(np.ones(V), sum(len(d) for d in drafts)).astype(np.float32)
    return drafts, logits, q


def constrained(temperature, **overrides):
    """Every constraint on a batch of four requests (request 3 greedy when temperature > 0)."""
    mask = np.zeros((4, V), bool)
    mask[0, [1, 2]] = True
    mask[2, 5] = True
    temps = np.full(4, temperature, np.float32)
    temps[3] = 0.0
    fields = dict(
        temperature=temps, all_greedy=temperature == 0, all_random=False,
        top_k=np.array([0, 0, 6, 0]), top_p=np.array([1.0, 0.9, 1.0, 1.0], np.float32),
        no_penalties=False, prompt_token_ids=np.array([[3, 4, V], [0, V, V], [7, 8, 9], [V, V, V]]),
        repetition_penalties=np.array([1.5, 1.0, 0.8, 2.0], np.float32),
        frequency_penalties=np.array([0.3, 0.0, 0.5, -0.2], np.float32),
        presence_penalties=np.array([0.1, 0.7, 0.0, 0.4], np.float32),
        output_token_ids=[[3, 3], [], [6, 7, 8], [11]], allowed_token_ids_mask=mask,
        bad_words_token_ids={0: [[4]], 2: [[8, 9], [9, 10, 11]], 3: [[11, 0]]},
        min_tokens={1: (3, {10, 11}), 2: (5, {0})})
    fields.update(overrides)
    return SamplingMetadata(**fields)


def plain(meta):
    """The same requests with the constraints off."""
    return SamplingMetadata(temperature=meta.temperature, all_greedy=meta.all_greedy,
                            all_random=meta.all_random, top_k=meta.top_k, top_p=meta.top_p,
                            generators=meta.generators)


def generators(seed):
    return {b: np.random.default_rng(seed * 7 + b) for b in range(4)}


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("probs", [False, True])
@pytest.mark.parametrize("as_torch", [False, True])
def test_constrained_equals_unconstrained_on_transformed_logits(temperature, probs, as_torch):
    if as_torch and torch is None:
        pytest.skip("torch is not installed")
    sampler = RejectionSampler()
    for seed in range(30):
        drafts, logits, q = batch(seed, probs)
        meta = constrained(temperature)
        expected_logits = reference(logits, drafts, meta)
        assert np.isneginf(expected_logits).any()
        metadata = SpecDecodeMetadata.make_dummy(drafts)
        convert = torch.from_numpy if as_torch else (lambda a: a)
        meta.generators = generators(seed)
        got = sampler(metadata, None if q is None else convert(q), convert(logits), meta)
        bare = plain(meta)
        bare.generators = generators(seed)
        want = sampler(metadata, None if q is None else convert(q), convert(expected_logits),
                       bare)
        assert np.array_equal(np.asarray(got.sampled_token_ids),
                              np.asarray(want.sampled_token_ids)), seed


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("probs", [False, True])
def test_block_under_constraints_equals_block_on_transformed_logits(temperature, probs):
    # "block" applies the constraints too (greedy requests by constrained greedy matching):
    # the same tokens as "block" without them on logits transformed by the reference, also with
    # placeholders and drafts of draft probability 0, each of which ends its chain.
    sampler = RejectionSampler(None, SpeculativeConfig(rejection_sample_method="block"))
    for seed in range(30):
        drafts, logits, q = batch(seed, probs)
        if seed % 3 == 1:
            drafts[2][1] = -1
        if probs and seed % 3 == 2:
            q[0, drafts[0][0]] = 0.0  # request 0's first draft
            q[0] /= q[0].sum()
        meta = constrained(temperature, generators=generators(seed))
        expected_logits = reference(logits, [[max(t, 0) for t in d] for d in drafts], meta)
        metadata = SpecDecodeMetadata.make_dummy(drafts)
        got = sampler(metadata, q, logits, meta).sampled_token_ids
        bare = plain(meta)
        bare.generators = generators(seed)
        want = sampler(metadata, q, expected_logits, bare).sampled_token_ids
        assert np.array_equal(np.asarray(got), np.asarray(want)), seed


@pytest.mark.parametrize("probs", [False, True])
def test_a_placeholder_ends_a_constrained_chain(probs):
    # Request 0's second draft and request 2's first are vLLM's placeholder -1: the chain stops
    # there. Without draft rows the tokens equal the plain path's on transformed logits (the row
    # there draws the token); with them the token there is never one the constraints ban.
    sampler = RejectionSampler()
    for seed in range(20):
        drafts, logits, q = batch(seed, probs)
        drafts[0][1], drafts[2][0] = -1, -1
        meta = constrained(0.7, generators=generators(seed))
        expected_logits = reference(logits, [[max(t, 0) for t in d] for d in drafts], meta)
        metadata = SpecDecodeMetadata.make_dummy(drafts)
        got = np.asarray(sampler(metadata, q, logits, meta).sampled_token_ids)
        assert (got[0, 2:] == -1).all() and (got[2, 1:] == -1).all()
        if probs:
            assert np.isfinite(expected_logits[1, got[0, 1]])
            assert np.isfinite(expected_logits[5, got[2, 0]])
            continue
        bare = plain(meta)
        bare.generators = generators(seed)
        want = sampler(metadata, q, expected_logits, bare).sampled_token_ids
        assert np.array_equal(got, np.asarray(want)), seed


def test_greedy_requests_ignore_the_draft_rows():
    # vLLM's greedy requests match the argmax whatever the draft rows say: drafts of draft
    # probability 0 are still accepted where they are the constrained argmax.
    sampler = RejectionSampler()
    for seed in range(10):
        drafts, logits, _ = batch(seed)
        q = np.zeros((sum(map(len, drafts)), V), np.float32)
        flat = [t for d in drafts for t in d]
        q[np.arange(len(flat)), (np.array(flat) + 1) % V] = 1.0  # never the drafted token
        meta = constrained(0.0)
        metadata = SpecDecodeMetadata.make_dummy(drafts)
        got = sampler(metadata, q, logits, meta).sampled_token_ids
        want = sampler(metadata, q, reference(logits, drafts, meta), plain(meta)).sampled_token_ids
        assert np.array_equal(np.asarray(got), np.asarray(want)), seed


def test_a_constrained_token_is_never_emitted():
    sampler = RejectionSampler()
    emitted_banned = checked = 0
    for seed in range(300):
        drafts, logits, q = batch(seed, probs=seed % 2 == 1)
        meta = constrained(1.0, generators=generators(seed))
        transformed = reference(logits, drafts, meta)
        out = np.asarray(sampler(SpecDecodeMetadata.make_dummy(drafts), q, logits,
                                 meta).sampled_token_ids)
        row = 0
        for b, chain in enumerate(drafts):
            for j, token in enumerate(out[b]):
                if token < 0:
                    break
                checked += 1
                emitted_banned += bool(np.isneginf(transformed[row + j, token]))
            row += len(chain) + 1
    assert checked > 1000 and emitted_banned == 0


def test_banned_drafts_are_rejected():
    # Every draft is request 0's banned token 1: it is never accepted, whatever the draft says.
    drafts = [[1, 1, 1]]
    logits = np.zeros((4, V), np.float32)
    logits[:, 1] = 5.0  # the raw target loves it
    mask = np.zeros((1, V), bool)
    mask[0, 1] = True
    for seed in range(50):
        meta = SamplingMetadata(temperature=np.ones(1, np.float32), all_greedy=False,
                                allowed_token_ids_mask=mask,
                                generators={0: np.random.default_rng(seed)})
        out = np.asarray(RejectionSampler()(SpecDecodeMetadata.make_dummy(drafts), None, logits,
                                            meta).sampled_token_ids)
        assert out[0, 0] != 1 and (out[0, 1:] == -1).all()


def test_no_constraints_is_the_plain_path():
    # no_penalties=True turns the penalty fields off, and empty dicts are no constraint.
    drafts, logits, q = batch(3, probs=True)
    metadata = SpecDecodeMetadata.make_dummy(drafts)
    off = constrained(1.0, allowed_token_ids_mask=None, bad_words_token_ids={}, min_tokens={},
                      no_penalties=True, generators=generators(3))
    bare = plain(off)
    bare.generators = generators(3)
    sampler = RejectionSampler()
    assert np.array_equal(sampler(metadata, q, logits, off).sampled_token_ids,
                          sampler(metadata, q, logits, bare).sampled_token_ids)


def error_of(meta, method="standard", logits=None):
    drafts, rows, _ = batch(0)
    sampler = RejectionSampler(None, SpeculativeConfig(rejection_sample_method=method)
                               if method != "synthetic" else
                               SpeculativeConfig(rejection_sample_method=method,
                                                 synthetic_acceptance_rates=[0.5] * 4))
    with pytest.raises(specdec.Error) as caught:
        sampler(SpecDecodeMetadata.make_dummy(drafts), None, rows if logits is None else logits,
                meta)
    return caught.value.argument


def test_bad_fields_are_named():
    off = dict(no_penalties=True, allowed_token_ids_mask=None, bad_words_token_ids={},
               min_tokens={})
    words = dict(off, bad_words_token_ids={1: [[2, 3]]})
    # Only "standard" and "block" apply constraints.
    assert error_of(constrained(1.0, **words), "synthetic") == \
        "sampling_metadata.bad_words_token_ids"
    assert error_of(constrained(1.0), "synthetic") == "sampling_metadata.repetition_penalties"
    assert error_of(constrained(1.0, repetition_penalties=np.array([1, 0, 1, 1], np.float32))) \
        == "sampling_metadata.repetition_penalties[1]"
    assert error_of(constrained(1.0, frequency_penalties=np.array([0, -np.inf, 0, 0],
                                                                  np.float32))) \
        == "sampling_metadata.frequency_penalties[1]"
    assert error_of(constrained(1.0, **dict(off, allowed_token_ids_mask=np.zeros((4, V + 1),
                                                                                 bool)))) \
        == "sampling_metadata.allowed_token_ids_mask"
    assert error_of(constrained(1.0, **dict(off, bad_words_token_ids={0: [[V]]}))) \
        == "sampling_metadata.bad_words_token_ids[0]"
    assert error_of(constrained(1.0, **dict(off, bad_words_token_ids={4: [[1]]}))) \
        == "sampling_metadata.bad_words_token_ids"
    assert error_of(constrained(1.0, **dict(off, min_tokens={0: (2, {V})}))) \
        == "sampling_metadata.min_tokens[0]"
    assert error_of(constrained(1.0, **dict(off, bad_words_token_ids={0: [None]}))) \
        == "sampling_metadata.bad_words_token_ids[0]"
    assert error_of(constrained(1.0, **dict(off, min_tokens={1: 3}))) \
        == "sampling_metadata.min_tokens[1]"
    assert error_of(constrained(1.0, **dict(off, min_tokens={1: (3, [None])}))) \
        == "sampling_metadata.min_tokens[1]"
    assert error_of(constrained(1.0, prompt_token_ids=7)) == "sampling_metadata.prompt_token_ids"
    assert error_of(constrained(1.0, output_token_ids=[[1], [2]])) \
        == "sampling_metadata.output_token_ids"
    assert error_of(constrained(1.0, output_token_ids=[[1], [-3], [], []])) \
        == "sampling_metadata.output_token_ids[1]"


def test_device_logits_with_constraints_are_refused(monkeypatch):
    # Logits the adapter takes for CUDA ones (no device needed): the constraint is named.
    import specdec.compat.vllm as adapter
    drafts, rows, _ = batch(0)
    monkeypatch.setattr(adapter, "is_cuda", lambda value: value is rows)
    meta = constrained(1.0, no_penalties=True, allowed_token_ids_mask=None, min_tokens={})
    assert error_of(meta, logits=rows) == "sampling_metadata.bad_words_token_ids"


@requires_torch
def test_cuda_logits_with_constraints_are_refused():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    drafts, rows, _ = batch(0)
    meta = constrained(1.0, no_penalties=True, allowed_token_ids_mask=None, min_tokens={})
    assert error_of(meta, logits=torch.from_numpy(rows).cuda()) == \
        "sampling_metadata.bad_words_token_ids"


@pytest.mark.parametrize("method", ["standard", "block"])
def test_first_token_follows_the_constrained_target(method):
    # 20,000 requests of two drafts from the draft row at V = 12: the first emitted token must
    # follow the target row after penalties, the mask, bad words and min_tokens, warped at
    # temperature 0.8 (both methods are lossless). Chi-square at p < 1e-6 with fixed seeds (a
    # correct sampler fails once in a million seeds).
    batch = 20000
    rng = np.random.default_rng(5)
    row = rng.normal(0, 1.5, size=V).astype(np.float32)
    draft = rng.dirichlet(np.ones(V)).astype(np.float32)
    drafts = rng.choice(V, size=(batch, 2), p=draft / draft.sum())
    metadata = SpecDecodeMetadata.make_dummy(drafts.tolist())
    mask = np.zeros((batch, V), bool)
    mask[:, 2] = True
    meta = SamplingMetadata(
        temperature=np.full(batch, 0.8, np.float32), all_greedy=False, all_random=True,
        no_penalties=False, prompt_token_ids=np.tile([3, 4], (batch, 1)),
        output_token_ids=[[5, 5, 6]] * batch,
        repetition_penalties=np.full(batch, 1.4, np.float32),
        frequency_penalties=np.full(batch, 0.3, np.float32),
        presence_penalties=np.full(batch, 1.0, np.float32), allowed_token_ids_mask=mask,
        bad_words_token_ids={b: [[7], [6, 8]] for b in range(batch)},
        min_tokens={b: (4, {0}) for b in range(batch)},
        generators={b: np.random.default_rng(b) for b in range(batch)})
    logits = np.tile(row, (3 * batch, 1))
    sampler = RejectionSampler(None, SpeculativeConfig(rejection_sample_method=method))
    first = np.asarray(sampler(metadata, np.tile(draft, (2 * batch, 1)), logits,
                               meta).sampled_token_ids)[:, 0]
    transformed = reference(row[None], [[]], SamplingMetadata(
        no_penalties=False, prompt_token_ids=[[3, 4]], output_token_ids=[[5, 5, 6]],
        repetition_penalties=[1.4], frequency_penalties=[0.3], presence_penalties=[1.0],
        allowed_token_ids_mask=mask[:1], bad_words_token_ids={0: [[7], [6, 8]]},
        min_tokens={0: (4, {0})}))[0]
    assert np.isneginf(transformed).sum() == 4  # 2 (mask), 7 and 8 (bad words), 0 (min_tokens)
    expected = np.exp((transformed - transformed.max()) / 0.8)
    expected /= expected.sum()
    counts = np.bincount(first, minlength=V).astype(np.float64)
    assert chi_square_p_value(counts, expected * batch) > 1e-6
