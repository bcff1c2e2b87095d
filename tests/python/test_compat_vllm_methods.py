"""specdec.compat.vllm as vLLM builds and drives it: RejectionSampler(sampler, spec_config,
device) reading the method and its fields, bonus tokens from the engine's sampler, logprobs when
asked, the lossy "synthetic" and "fly" methods against what they claim, and the greedy rule next
to vLLM's reference formula at vLLM's sizes (batch 1000, vocabulary 128256)."""

import math

import numpy as np
import pytest

import specdec
from specdec.compat import vllm
from specdec.compat.vllm import (LogprobsTensors, RejectionSampler, SamplingMetadata,
                                 SpecDecodeMetadata, SpeculativeConfig)

from conftest import chi_square_p_value, requires_torch, torch


def batch(requests, k, vocab, seed, draft_probs=False):
    """`requests` chains of k drafts with random logits; tokens drawn uniformly."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, size=(requests, k))
    metadata = SpecDecodeMetadata.make_dummy(tokens.tolist())
    logits = rng.normal(0, 2, size=(requests * (k + 1), vocab)).astype(np.float32)
    probs = None
    if draft_probs:
        probs = rng.dirichlet(np.ones(vocab), requests * k).astype(np.float32)
    return metadata, logits, probs


def sampling(requests, temperature=1.0, **fields):
    return SamplingMetadata(temperature=np.full(requests, temperature, np.float32),
                            all_greedy=temperature == 0, all_random=temperature != 0, **fields)


def run(spec_config, metadata, logits, probs, meta, sampler=None):
    out = RejectionSampler(sampler, spec_config, "cpu").forward(metadata, probs, logits, meta)
    return np.asarray(out.sampled_token_ids)


# --- construction -------------------------------------------------------------------------

@pytest.mark.parametrize("config, argument", [
    (SpeculativeConfig(rejection_sample_method="typical"), "spec_config.rejection_sample_method"),
    (SpeculativeConfig(rejection_sample_method="synthetic"),
     "spec_config.synthetic_acceptance_rates"),
    (SpeculativeConfig(rejection_sample_method="synthetic", synthetic_acceptance_rates=[0.5, 1.2]),
     "spec_config.synthetic_acceptance_rates[1]"),
    (SpeculativeConfig(rejection_sample_method="fly", fly_entropy_threshold=1.0),
     "spec_config.fly_window_size"),
    (SpeculativeConfig(rejection_sample_method="fly", fly_window_size=-1,
                       fly_entropy_threshold=1.0), "spec_config.fly_window_size"),
    (SpeculativeConfig(rejection_sample_method="fly", fly_window_size=1,
                       fly_entropy_threshold=float("nan")), "spec_config.fly_entropy_threshold"),
])
def test_bad_spec_config_is_refused_at_construction(config, argument):
    with pytest.raises(specdec.Error) as raised:
        RejectionSampler(None, config, "cpu")
    assert raised.value.argument == argument


def test_spec_config_block_runs_block_verification():
    metadata, logits, probs = batch(64, 3, 12, seed=1, draft_probs=True)
    seeded = sampling(64, generators={b: np.random.default_rng(b) for b in range(64)})
    got = run(SpeculativeConfig(rejection_sample_method="block"), metadata, logits, probs, seeded)
    seeded = sampling(64, generators={b: np.random.default_rng(b) for b in range(64)})
    block = RejectionSampler(rejection_sample_method="block").forward(
        metadata, probs, logits, seeded).sampled_token_ids
    assert np.array_equal(got, np.asarray(block))
    seeded = sampling(64, generators={b: np.random.default_rng(b) for b in range(64)})
    standard = run(SpeculativeConfig(), metadata, logits, probs, seeded)
    assert not np.array_equal(got, standard)  # the method was read, not defaulted


# --- bonus tokens from the engine's sampler ---------------------------------------------------

class RecordingSampler:
    """A stand-in for vLLM's Sampler: records the rows it is given and returns V - 1 - argmax."""

    def __init__(self):
        self.rows = None

    def __call__(self, logits, sampling_metadata, predict_bonus_token=False):
        assert predict_bonus_token
        self.rows = np.asarray(logits).copy()
        ids = self.rows.shape[1] - 1 - self.rows.argmax(axis=1)
        return vllm.SamplerOutput(sampled_token_ids=ids.reshape(-1, 1).astype(np.int32))


def test_bonus_tokens_come_from_the_sampler_on_the_bonus_rows():
    # Greedy target rows equal to the drafts: every draft accepted, so every bonus slot is used.
    requests, k, vocab = 6, 3, 20
    tokens = np.arange(requests * k).reshape(requests, k) % vocab
    metadata = SpecDecodeMetadata.make_dummy(tokens.tolist())
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(requests * (k + 1), vocab)).astype(np.float32)
    logits[np.asarray(metadata.target_logits_indices), tokens.reshape(-1)] = 50.0
    sampler = RecordingSampler()
    out = run(SpeculativeConfig(), metadata, logits, None, SamplingMetadata(), sampler)
    bonus_rows = logits[np.asarray(metadata.bonus_logits_indices)]
    assert np.array_equal(sampler.rows, bonus_rows)
    assert np.array_equal(out[:, :k], tokens)
    assert np.array_equal(out[:, k], vocab - 1 - bonus_rows.argmax(axis=1))


def test_sampler_bonus_needs_no_bonus_rows_in_logits():
    # vLLM's own tests hand logits of the draft positions only, with the sampler mocked.
    metadata = SpecDecodeMetadata.make_dummy([[1, 2]])
    metadata.bonus_logits_indices = np.zeros(0, np.int64)
    logits = np.full((2, 10), -100.0, np.float32)
    logits[[0, 1], [1, 2]] = 100.0

    def sampler(logits, sampling_metadata, predict_bonus_token=False):
        return vllm.SamplerOutput(sampled_token_ids=np.array([[7]], np.int32))

    out = run(SpeculativeConfig(), metadata, logits, None, SamplingMetadata(), sampler)
    assert out.tolist() == [[1, 2, 7]]


# --- logprobs -----------------------------------------------------------------------------

def test_logprobs_follow_the_scoring_rows_when_asked():
    requests, k, vocab, top = 5, 3, 40, 4
    metadata, logits, _ = batch(requests, k, vocab, seed=9)
    meta = sampling(requests, temperature=0.9, max_num_logprobs=top)
    output = RejectionSampler().forward(metadata, None, logits, meta)
    assert isinstance(output.logprobs_tensors, LogprobsTensors)
    sampled = np.asarray(output.sampled_token_ids)
    ids, values, ranks = (np.asarray(a) for a in (output.logprobs_tensors.logprob_token_ids,
                                                  output.logprobs_tensors.logprobs,
                                                  output.logprobs_tensors.selected_token_ranks))
    assert ids.shape == (requests * (k + 1), top + 1) and ranks.shape == (requests * (k + 1),)
    target = np.asarray(metadata.target_logits_indices).reshape(requests, k)
    bonus = np.asarray(metadata.bonus_logits_indices)
    for b in range(requests):
        for j in range(k + 1):
            slot = b * (k + 1) + j
            if sampled[b, j] < 0:
                assert ids[slot, 0] == -1 and ranks[slot] == -1 and np.isneginf(values[slot, 0])
                continue
            row = logits[target[b, j] if j < k else bonus[b]].astype(np.float64)
            logp = row - row.max() - np.log(np.exp(row - row.max()).sum())
            assert ids[slot, 0] == sampled[b, j]
            assert values[slot, 0] == pytest.approx(logp[sampled[b, j]], abs=1e-4)
            assert ranks[slot] == 1 + np.sum(logp > logp[sampled[b, j]])
            assert ids[slot, 1:].tolist() == np.argsort(-logp)[:top].tolist()
            assert np.allclose(values[slot, 1:], np.sort(logp)[::-1][:top], atol=1e-4)
    assert RejectionSampler().forward(metadata, None, logits,
                                      sampling(requests)).logprobs_tensors is None


# --- synthetic ----------------------------------------------------------------------------

def test_synthetic_accepted_length_follows_the_rates():
    # P(N = n) = r_0 ... r_(n-1) (1 - r_n), whatever the rows say: here the target forbids every
    # draft (one-hot rows elsewhere). 4 cells, 3 degrees of freedom; false failure 1e-6.
    rates = [0.9, 0.6, 0.3]
    requests, k, vocab = 4000, 3, 16
    tokens = np.zeros((requests, k), np.int64)
    metadata = SpecDecodeMetadata.make_dummy(tokens.tolist())
    logits = np.full((requests * (k + 1), vocab), -1e4, np.float32)
    logits[:, 5] = 0.0
    config = SpeculativeConfig(rejection_sample_method="synthetic", synthetic_acceptance_rates=rates)
    out = run(config, metadata, logits, None, sampling(requests))
    accepted = (out[:, :k] == 0).cumprod(axis=1).sum(axis=1)
    counts = np.bincount(accepted, minlength=k + 1)
    law = [(1 - rates[n]) * math.prod(rates[:n]) for n in range(k)] + [math.prod(rates)]
    expected = np.asarray(law) * requests
    assert chi_square_p_value(counts, expected) > 1e-6, (counts, expected)
    # A rejected position takes the target's only token.
    rejected = accepted < k
    assert np.all(out[rejected, accepted[rejected]] == 5)


# --- fly ----------------------------------------------------------------------------------

@pytest.mark.parametrize("draft_probs", [False, True])
def test_fly_at_an_infinite_threshold_is_standard_token_for_token(draft_probs):
    metadata, logits, probs = batch(200, 4, 8, seed=4, draft_probs=draft_probs)
    fly = SpeculativeConfig(rejection_sample_method="fly", fly_window_size=1,
                            fly_entropy_threshold=float("inf"))
    seeded = lambda: sampling(200, generators={b: np.random.default_rng(b) for b in range(200)})
    assert np.array_equal(run(fly, metadata, logits, probs, seeded()),
                          run(SpeculativeConfig(), metadata, logits, probs, seeded()))


def test_fly_accepts_more_and_never_a_forbidden_token():
    requests, k, vocab = 500, 4, 8
    metadata, logits, _ = batch(requests, k, vocab, seed=6)
    meta = lambda: sampling(requests, top_k=np.full(requests, 3), generators={
        b: np.random.default_rng(b) for b in range(requests)})
    fly = SpeculativeConfig(rejection_sample_method="fly", fly_window_size=1,
                            fly_entropy_threshold=0.2)
    loose = run(fly, metadata, logits, None, meta())
    strict = run(SpeculativeConfig(), metadata, logits, None, meta())
    assert (loose >= 0).sum() > (strict >= 0).sum()
    # Every token emitted at a draft position is in its row's top 3 (the warp allows only those).
    target = np.asarray(metadata.target_logits_indices).reshape(requests, k)
    top3 = np.argsort(-logits, axis=1)[:, :3]
    for b in range(requests):
        for j in range(k):
            if loose[b, j] >= 0:
                assert loose[b, j] in top3[target[b, j]]


def test_fly_leaves_greedy_requests_greedy():
    metadata, logits, _ = batch(100, 4, 8, seed=8)
    fly = SpeculativeConfig(rejection_sample_method="fly", fly_window_size=0,
                            fly_entropy_threshold=0.0)
    assert np.array_equal(run(fly, metadata, logits, None, SamplingMetadata()),
                          run(SpeculativeConfig(), metadata, logits, None, SamplingMetadata()))


# --- vLLM's reference formula at vLLM's sizes ---------------------------------------------

def greedy_reference(tokens, argmax):
    """vLLM's greedy rule: accept while the draft equals the target's argmax; the first mismatch
    emits the argmax and stops; all accepted: the bonus argmax."""
    out = np.full((tokens.shape[0], tokens.shape[1] + 1), -1, np.int64)
    for b in range(tokens.shape[0]):
        for j in range(tokens.shape[1] + 1):
            out[b, j] = argmax[b, j]
            if j == tokens.shape[1] or tokens[b, j] != argmax[b, j]:
                break
    return out


@pytest.mark.parametrize("requests, k, vocab", [(1000, 2, 64), (4, 3, 128256)])
def test_greedy_matches_vllms_formula_at_its_sizes(requests, k, vocab):
    rng = np.random.default_rng(requests)
    logits = rng.normal(size=(requests * (k + 1), vocab)).astype(np.float32)
    argmax = logits.argmax(axis=1).reshape(requests, k + 1)
    # Half the drafts copy the target's argmax, so chains run to different lengths.
    tokens = np.where(rng.random((requests, k)) < 0.7, argmax[:, :k],
                      rng.integers(0, vocab, (requests, k)))
    metadata = SpecDecodeMetadata.make_dummy(tokens.tolist())
    out = run(SpeculativeConfig(), metadata, logits, None, SamplingMetadata())
    assert np.array_equal(out, greedy_reference(tokens, argmax))


@requires_torch
def test_torch_tensors_in_torch_tensors_out_with_sampler_and_logprobs():
    metadata, logits, _ = batch(3, 2, 10, seed=2)
    out = RejectionSampler(RecordingSampler(), SpeculativeConfig(), "cpu").forward(
        metadata, None, torch.from_numpy(logits), sampling(3, max_num_logprobs=2))
    assert isinstance(out.sampled_token_ids, torch.Tensor)
    assert isinstance(out.logprobs_tensors.logprobs, torch.Tensor)
