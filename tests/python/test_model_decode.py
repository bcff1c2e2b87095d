"""Speculative decoding of a PyTorch model pair through specdec.decode: the provider's rows are
the model's (its KV cache kept across commits), the lossless methods emit the target's law of the
first two tokens, and MTAD does what it claims at its two ends."""

import math

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch

if torch is not None:
    from model import GPT, Config, ModelProvider

pytestmark = requires_torch

PROMPT = [11, 200, 7, 64]
RUNS = 1000  # decoded sequences per method for the chi-square tests
FALSE_FAILURE = 1e-5  # per chi-square test; 8 tests: 8e-5 in all
MIN_EXPECTED = 5.0  # bins expecting fewer runs are pooled into one


@pytest.fixture(scope="module")
def models():
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    target = GPT(Config(layers=4, seed=3))
    return target, target.early_exit(1)


@pytest.fixture(scope="module")
def target_logits(models):
    """Raw target logits after the prompt (row 0) and after prompt + x (row 1 + x), all x."""
    target, _ = models
    vocab = target.config.vocab
    return target.logits_after([PROMPT] + [PROMPT + [x] for x in range(vocab)]).numpy()


def two_token_law(target_logits, warp):
    """P(x1) and P(x1, x2) of autoregressive sampling from the warped target."""
    rows = specdec.warp_logits(warp, target_logits).astype(np.float64)
    first = rows[0]
    return first, first[:, None] * rows[1:]


def chi_square_p_value(counts, probabilities):
    """Pearson's test of counts against probabilities (bins expecting < MIN_EXPECTED pooled):
    the probability of a statistic at least as large under the null hypothesis."""
    counts = np.asarray(counts, np.float64).ravel()
    expected = np.asarray(probabilities, np.float64).ravel() * counts.sum()
    assert not np.any((expected == 0) & (counts > 0)), "a sample of probability zero"
    small = expected < MIN_EXPECTED
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    statistic = float(((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum())
    return upper_regularized_gamma((keep.sum() - 1) / 2.0, statistic / 2.0)


def upper_regularized_gamma(a, x):
    """Q(a, x) = Gamma(a, x) / Gamma(a): a series below a + 1, a continued fraction above."""
    if x <= 0.0:
        return 1.0
    log_prefactor = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:  # P(a, x) = x^a e^-x / Gamma(a + 1) * sum x^n / ((a + 1) ... (a + n))
        term = total = 1.0 / a
        n = 1
        while abs(term) > 1e-16 * abs(total):
            term *= x / (a + n)
            total += term
            n += 1
        return 1.0 - math.exp(log_prefactor) * total
    # Lentz's evaluation of the continued fraction for Gamma(a, x).
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return math.exp(log_prefactor) * h


def test_the_p_value_is_the_chi_square_tail():
    # Known quantiles: chi2(1) exceeds 3.841 with probability 0.05, chi2(10) exceeds 23.209
    # with probability 0.01, chi2(4) exceeds 2 with probability 3 e^-1.
    assert upper_regularized_gamma(0.5, 3.841459 / 2) == pytest.approx(0.05, rel=1e-5)
    assert upper_regularized_gamma(5.0, 23.209251 / 2) == pytest.approx(0.01, rel=1e-5)
    assert upper_regularized_gamma(2.0, 1.0) == pytest.approx(2.0 / math.e, rel=1e-12)


class CheckedProvider(ModelProvider):
    """A ModelProvider that recomputes every row from scratch (no cache) and records the largest
    difference: the cache it keeps across commits must not change a logit."""

    largest_difference = 0.0
    moved = 0  # accepted nodes whose keys had to move

    def evaluate(self, batch, logits):
        super().evaluate(batch, logits)
        tokens, parents = batch.tokens, batch.parents
        sequences = [list(self.tokens)]
        for node in range(batch.size()):
            path = []
            while node != -1:
                path.insert(0, int(tokens[node]))
                node = int(parents[node])
            sequences.append(list(self.tokens) + path)
        reference = self.model.logits_after(sequences).numpy()
        difference = float(np.abs(reference - logits).max())
        CheckedProvider.largest_difference = max(CheckedProvider.largest_difference, difference)

    def commit(self, batch, kept_nodes, next):
        # Node kept_nodes[t] moves from cache slot committed + node to committed + t.
        CheckedProvider.moved += sum(int(node) != t for t, node in enumerate(kept_nodes))
        super().commit(batch, kept_nodes, next)


@pytest.mark.parametrize("method", ["SD", "RSD_S"])
def test_the_kept_cache_gives_the_rows_of_recomputation(models, method):
    target, draft = models
    method = getattr(specdec.Method, method)
    CheckedProvider.largest_difference, CheckedProvider.moved = 0.0, 0
    target_provider, draft_provider = CheckedProvider(target), CheckedProvider(draft)
    options = specdec.DecodeOptions(method=method, depth=3, width=2, max_new_tokens=16, seed=4)
    emitted = 0
    for sequence in range(3):
        result = specdec.decode(target_provider, draft_provider, PROMPT, options, sequence)
        assert len(result.tokens) == 16
        expected = PROMPT + [int(t) for t in result.tokens]  # the last step may commit more
        assert list(target_provider.context())[:len(expected)] == expected
        emitted += len(result.tokens)
    assert target_provider.forward_passes < emitted  # drafts were accepted: fewer target calls
    assert CheckedProvider.largest_difference <= 1e-5
    assert CheckedProvider.moved > 0 or method == specdec.Method.SD  # a chain never moves keys


def decode_counts(models, options):
    """Counts of the first token and of the first two tokens over RUNS sequences."""
    target, draft = models
    target_provider, draft_provider = ModelProvider(target), ModelProvider(draft)
    vocab = target.config.vocab
    first, pairs = np.zeros(vocab, np.int64), np.zeros((vocab, vocab), np.int64)
    for sequence in range(RUNS):
        tokens = specdec.decode(target_provider, draft_provider, PROMPT, options, sequence).tokens
        first[tokens[0]] += 1
        pairs[tokens[0], tokens[1]] += 1
    return first, pairs


def block_efficiency(models, options, runs=4, tokens=32):
    """Tokens per target call over a few longer sequences."""
    target, draft = models
    target_provider, draft_provider = ModelProvider(target), ModelProvider(draft)
    options = specdec.DecodeOptions(method=options.method, warp=options.warp, depth=options.depth,
                                    width=options.width, tau=options.tau, max_new_tokens=tokens,
                                    seed=options.seed)
    generated = calls = 0
    for sequence in range(runs):
        metrics = specdec.decode(target_provider, draft_provider, PROMPT, options,
                                 sequence).metrics
        generated += metrics.tokens_generated
        calls += metrics.target_calls
    return generated / calls


LOSSLESS = [
    ("SD", specdec.Warp()),
    ("SPECTR", specdec.Warp(top_p=0.9)),
    ("RSD_S", specdec.Warp(temperature=0.8)),
]


@pytest.mark.parametrize("method, warp", LOSSLESS, ids=[name for name, _ in LOSSLESS])
def test_lossless_methods_sample_the_target(models, target_logits, method, warp):
    method = getattr(specdec.Method, method)
    # Depth 2: a step that keeps its first draft token decides the second one too.
    options = specdec.DecodeOptions(method=method, warp=warp, depth=2, width=2,
                                    max_new_tokens=2, seed=2024)
    first, pairs = decode_counts(models, options)
    first_law, pair_law = two_token_law(target_logits, warp)
    p_first = chi_square_p_value(first, first_law)
    p_pairs = chi_square_p_value(pairs, pair_law)
    print(f"{method.name}: first token p = {p_first:.3g}, two tokens p = {p_pairs:.3g}, "
          f"block efficiency {block_efficiency(models, options):.2f} tokens per target call")
    assert p_first > FALSE_FAILURE and p_pairs > FALSE_FAILURE


def test_a_wrong_law_is_detected(models, target_logits):
    # The test above can fail: the draft's own law is far from the target's.
    _, draft = models
    first, _ = two_token_law(target_logits, specdec.Warp())
    draft_first = specdec.warp_logits(specdec.Warp(), draft.logits_after([PROMPT]).numpy())[0]
    counts = np.random.default_rng(5).multinomial(RUNS, draft_first / draft_first.sum())
    assert chi_square_p_value(counts, first) < FALSE_FAILURE


def test_mtad_at_tau_one_samples_the_target(models, target_logits):
    # MTAD keeps a prefix whose joint ratio exceeds tau: tau = 1 keeps nothing drafted, so every
    # token is drawn from the target (its only lossless setting).
    options = specdec.DecodeOptions(method=specdec.Method.MTAD, depth=2, width=2, tau=1.0,
                                    max_new_tokens=2, seed=77)
    first, pairs = decode_counts(models, options)
    first_law, pair_law = two_token_law(target_logits, options.warp)
    assert chi_square_p_value(first, first_law) > FALSE_FAILURE
    assert chi_square_p_value(pairs, pair_law) > FALSE_FAILURE


def test_mtad_at_tau_zero_accepts_every_block(models):
    target, draft = models
    options = specdec.DecodeOptions(method=specdec.Method.MTAD, depth=3, width=2, tau=0.0,
                                    max_new_tokens=40, seed=5)
    result = specdec.decode(ModelProvider(target), ModelProvider(draft), PROMPT, options)
    assert result.metrics.target_calls == 10  # 10 steps of depth + 1 = 4 tokens
    assert list(result.metrics.accepted_per_level) == [10, 10, 10]
    mid = specdec.DecodeOptions(method=specdec.Method.MTAD, depth=3, width=2, tau=0.5,
                                max_new_tokens=40, seed=5)
    print(f"MTAD: block efficiency {block_efficiency(models, mid):.2f} at tau 0.5, "
          f"{block_efficiency(models, options):.2f} at tau 0")
