"""The decoding loop from Python: providers written in Python give the same tokens as the toy
providers run in C++, exceptions and bad rows surface as they should, Decoder steps equal decode,
and ReDrafter decodes from hidden states."""

import threading

import numpy as np
import pytest

import specdec
from conftest import requires_torch, torch

VOCAB = 7
Method = specdec.Method


def markov_tables(seed=3):
    rng = np.random.default_rng(seed)
    target = rng.dirichlet(np.full(VOCAB, 0.7), size=VOCAB).astype(np.float32)
    draft = (0.6 * target + 0.4 * rng.dirichlet(np.ones(VOCAB), size=VOCAB)).astype(np.float32)
    draft /= draft.sum(axis=1, keepdims=True)
    return target, draft


TARGET, DRAFT = markov_tables()


class Delegating(specdec.LogitsProvider):
    """A Python provider that forwards every call to a C++ toy provider: decode through the Python
    adapter must give exactly the tokens decode gives with the toy provider itself."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def vocab_size(self):
        return self.inner.vocab_size()

    def hidden_size(self):
        return self.inner.hidden_size()

    def context(self):
        return self.inner.context()

    def committed_length(self):
        return self.inner.committed_length()

    def reset(self, prompt):
        self.calls.append("reset")
        self.inner.reset(prompt)

    def evaluate(self, batch, logits):
        self.calls.append("evaluate")
        assert logits.dtype == np.float32 and logits.shape == (batch.rows(), VOCAB)
        assert logits.flags.writeable and not logits.flags.owndata  # a view, not a copy
        self.inner.evaluate(batch, logits)

    def evaluate_with_hidden(self, batch, logits, hidden):
        self.inner.evaluate_with_hidden(batch, logits, hidden)

    def commit(self, batch, kept_nodes, next):
        self.calls.append("commit")
        assert kept_nodes.dtype == np.int32
        self.inner.commit(batch, kept_nodes, next)


class NumpyMarkov(specdec.LogitsProvider):
    """An order-1 Markov model written with NumPy alone: row i + 1 depends on node i's token."""

    def __init__(self, table):
        self.log_table = np.log(table)

    def vocab_size(self):
        return self.log_table.shape[0]

    def evaluate(self, batch, logits):
        last = np.concatenate([[self._context[-1]], batch.tokens])
        logits[:] = self.log_table[last]


def options(method, **extra):
    fields = dict(method=method, depth=3, width=3, branching=[2, 2, 1], max_new_tokens=24,
                  seed=11, warp=specdec.Warp(temperature=0.9))
    fields.update(extra)
    return specdec.DecodeOptions(**fields)


def toy_pair():
    return (specdec.MarkovProvider(specdec.MarkovModel(TARGET)),
            specdec.MarkovProvider(specdec.MarkovModel(DRAFT)))


ALL_METHODS = [Method.AUTOREGRESSIVE, Method.SD, Method.SD_BLOCK, Method.SPECINFER, Method.SPECTR,
               Method.RSD_C, Method.RSD_S, Method.MTAD, Method.CASCADE, Method.LOSSY]


@pytest.mark.parametrize("method", ALL_METHODS, ids=lambda m: specdec.method_name(m))
def test_python_providers_give_the_toy_providers_tokens(method):
    target, draft = toy_pair()
    expected = specdec.decode(target, draft, [1, 4], options(method), sequence=2)
    assert len(expected.tokens) == 24 and expected.tokens.dtype == np.int32
    wrapped_target, wrapped_draft = Delegating(toy_pair()[0]), Delegating(toy_pair()[1])
    got = specdec.decode(wrapped_target, wrapped_draft, [1, 4], options(method), sequence=2)
    np.testing.assert_array_equal(got.tokens, expected.tokens)
    assert got.metrics.target_calls == expected.metrics.target_calls
    assert wrapped_target.calls[0] == "reset" and "evaluate" in wrapped_target.calls
    assert ("evaluate" in wrapped_draft.calls) == (method != Method.AUTOREGRESSIVE)
    # A model written with NumPy alone computes the same rows (to float rounding): a different
    # token would need a uniform within ~1e-7 of a CDF boundary.
    numpy_run = specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [1, 4], options(method),
                               sequence=2)
    np.testing.assert_array_equal(numpy_run.tokens, expected.tokens)


def test_method_names_and_option_checks():
    for method in ALL_METHODS:
        assert specdec.parse_method(specdec.method_name(method)) == method
    with pytest.raises(specdec.Error) as caught:
        specdec.parse_method("medusa")
    assert caught.value.argument == "method"
    with pytest.raises(specdec.Error) as caught:
        options(Method.MTAD, tau=1.5).validate(VOCAB)
    assert caught.value.argument == "tau"
    with pytest.raises(specdec.Error) as caught:
        options(Method.RSD_C, branching=[2, VOCAB + 1]).validate(VOCAB)
    assert caught.value.argument == "branching[1]"
    redrafter = specdec.ReDrafterOptions(width=0)
    with pytest.raises(specdec.Error) as caught:
        redrafter.validate(VOCAB)
    assert caught.value.argument == "width"
    assert "method=Method.SD_BLOCK," in repr(options(Method.SD_BLOCK))


def test_seed_and_sequence_select_the_stream():
    target, draft = toy_pair()
    a = specdec.decode(target, draft, [1], options(Method.RSD_S), sequence=0).tokens
    b = specdec.decode(target, draft, [1], options(Method.RSD_S), sequence=0).tokens
    c = specdec.decode(target, draft, [1], options(Method.RSD_S), sequence=1).tokens
    d = specdec.decode(target, draft, [1], options(Method.RSD_S, seed=12), sequence=0).tokens
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, d)


def test_decoder_steps_equal_decode():
    opts = options(Method.SPECTR)
    expected = specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [2, 3], opts, sequence=5)
    decoder = specdec.Decoder(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), opts)
    decoder.reset([2, 3], sequence=5)
    pieces = []
    while not decoder.finished():
        pieces.append(decoder.step())
    assert all(1 <= len(p) <= opts.depth + 1 for p in pieces)
    np.testing.assert_array_equal(np.concatenate(pieces), expected.tokens)
    np.testing.assert_array_equal(decoder.generated(), expected.tokens)
    assert decoder.metrics().target_calls == len(pieces) == expected.metrics.target_calls
    assert len(decoder.step()) == 0
    decoder.reset([2, 3], sequence=5)
    np.testing.assert_array_equal(decoder.run().tokens, expected.tokens)


def test_end_token_and_max_new_tokens():
    target, draft = toy_pair()
    full = specdec.decode(target, draft, [1], options(Method.SD, max_new_tokens=40)).tokens
    end = int(full[5])
    cut = specdec.decode(target, draft, [1], options(Method.SD, max_new_tokens=40, end_token=end))
    first = int(np.flatnonzero(full == end)[0])
    np.testing.assert_array_equal(cut.tokens, full[:first + 1])
    assert len(specdec.decode(target, draft, [1], options(Method.SD, max_new_tokens=0)).tokens) == 0


def test_metrics_are_the_counters_of_the_run():
    target, draft = toy_pair()
    result = specdec.decode(target, draft, [1], options(Method.SD, max_new_tokens=60))
    metrics = result.metrics
    assert metrics.sequences == 1 and metrics.tokens_generated == 60
    assert metrics.block_efficiency() == pytest.approx(60 / metrics.target_calls)
    assert metrics.levels() == 3 and metrics.draft_calls == 3 * metrics.target_calls
    rates = metrics.acceptance_rates()
    np.testing.assert_allclose(rates, metrics.accepted_per_level / metrics.attempted_per_level)
    assert metrics.mbsu(3, 0.0) == pytest.approx(metrics.block_efficiency())
    assert "sd" in specdec.format_metrics_row("sd", metrics, 3, 0.1)
    assert "eta" in specdec.format_metrics_header()
    assert metrics.mean_target_budget() == pytest.approx(
        metrics.target_tree_tokens / metrics.target_calls)
    assert metrics.mean_draft_calls() == pytest.approx(3.0)
    assert metrics.acceptance_rate(1) == rates[0] and metrics.wall_seconds >= 0
    assert isinstance(result, specdec.DecodeResult)
    merged = specdec.DecodeMetrics()
    merged.merge(metrics)
    merged.merge(metrics)
    assert merged.tokens_generated == 120 and merged.sequences == 2


class NanRows(NumpyMarkov):
    def evaluate(self, batch, logits):
        super().evaluate(batch, logits)
        logits[-1, 2] = np.nan


def test_nan_rows_raise_an_error_naming_the_provider():
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NanRows(TARGET), NumpyMarkov(DRAFT), [1], options(Method.SD))
    assert caught.value.argument.startswith("target.logits")
    assert "nan" in caught.value.problem
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), NanRows(DRAFT), [1], options(Method.SD))
    assert caught.value.argument.startswith("draft.logits")


class Raising(NumpyMarkov):
    def __init__(self, table, error, where):
        super().__init__(table)
        self.error, self.where = error, where

    def evaluate(self, batch, logits):
        if self.where == "evaluate":
            raise self.error
        super().evaluate(batch, logits)

    def commit(self, batch, kept_nodes, next):
        if self.where == "commit":
            raise self.error
        super().commit(batch, kept_nodes, next)


@pytest.mark.parametrize("where", ["evaluate", "commit"])
@pytest.mark.parametrize("side", ["target", "draft"])
def test_provider_exceptions_leave_decode_unchanged(side, where):
    error = KeyError("no such layer")
    raising = Raising(TARGET if side == "target" else DRAFT, error, where)
    providers = {"target": NumpyMarkov(TARGET), "draft": NumpyMarkov(DRAFT), side: raising}
    with pytest.raises(KeyError) as caught:
        specdec.decode(providers["target"], providers["draft"], [1], options(Method.RSD_S))
    assert caught.value is error
    decoder = specdec.Decoder(providers["target"], providers["draft"], options(Method.RSD_S))
    decoder.reset([1])
    with pytest.raises(KeyError) as caught:
        decoder.step()
    assert caught.value is error


def test_bad_providers_are_named():
    class WrongLength(NumpyMarkov):
        def committed_length(self):
            return 99

    class TextVocab(NumpyMarkov):
        def vocab_size(self):
            return "seven"

    with pytest.raises(specdec.Error) as caught:
        specdec.decode(WrongLength(TARGET), NumpyMarkov(DRAFT), [1], options(Method.SD))
    assert caught.value.argument == "target"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), TextVocab(DRAFT), [1], options(Method.SD))
    assert caught.value.argument == "draft.vocab_size()"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), None, [1], options(Method.SD))
    assert caught.value.argument == "draft"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), object(), [1], options(Method.SD))
    assert caught.value.argument == "draft"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [], options(Method.SD))
    assert caught.value.argument == "prompt"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [1], options(Method.SD, depth=0))
    assert caught.value.argument == "depth"
    small = np.full((3, 3), 1 / 3, np.float32)
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(small), [1], options(Method.SD))
    assert caught.value.argument == "draft"


def test_autoregressive_runs_without_a_draft():
    target, draft = toy_pair()
    opts = options(Method.AUTOREGRESSIVE)
    np.testing.assert_array_equal(specdec.decode(target, None, [3], opts).tokens,
                                  specdec.decode(target, draft, [3], opts).tokens)


def test_python_providers_work_from_other_threads():
    opts = options(Method.RSD_C)
    expected = [specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [1], opts,
                               sequence=s).tokens for s in range(4)]
    results = [None] * 4

    def run(s):
        results[s] = specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [1], opts,
                                    sequence=s).tokens

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


def test_decode_batch_equals_decode_per_sequence():
    opts = options(Method.RSD_S)
    prompts = [[1], [2, 3], [4, 4, 0], [6]]
    pairs = [toy_pair() for _ in prompts]
    pairs[1] = (Delegating(pairs[1][0]), NumpyMarkov(DRAFT))  # Python providers mix in
    results = specdec.decode_batch([p[0] for p in pairs], [p[1] for p in pairs], prompts, opts,
                                   threads=2)
    assert len(results) == 4
    for s, prompt in enumerate(prompts):
        expected = specdec.decode(*toy_pair(), prompt, opts, sequence=s)
        np.testing.assert_array_equal(results[s].tokens, expected.tokens)
    with pytest.raises(specdec.Error) as caught:
        specdec.decode_batch([p[0] for p in pairs], [p[1] for p in pairs], [[1], [2], [], [3]], opts)
    assert caught.value.argument == "prompts[2]"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode_batch([p[0] for p in pairs], [p[1] for p in pairs][:3], prompts, opts)
    assert caught.value.argument == "drafts"
    error = KeyError("gone")
    raising = [Raising(TARGET, error, "evaluate") for _ in prompts]
    with pytest.raises(KeyError) as caught:
        specdec.decode_batch(raising, [NumpyMarkov(DRAFT) for _ in prompts], prompts, opts)
    assert caught.value is error


def test_toy_providers_score_a_batch():
    tree = specdec.DraftTree([2, 5, 3], [-1, -1, 0])
    provider = specdec.MarkovProvider(specdec.MarkovModel(TARGET))
    provider.reset([4, 1])
    batch = specdec.TreeBatch.from_tree(tree, provider.committed_length())
    logits = np.zeros((batch.rows(), VOCAB), np.float32)
    provider.evaluate(batch, logits)
    np.testing.assert_allclose(np.exp(logits), TARGET[[1, 2, 5, 3]], rtol=1e-6)
    provider.commit(batch, [0, 2], 6)
    assert provider.context().tolist() == [4, 1, 2, 3, 6] and provider.calls() == 1
    assert provider.evaluated_tokens() == 3
    provider.reset_counters()
    assert provider.calls() == 0 and provider.evaluated_tokens() == 0
    with pytest.raises(specdec.Error) as caught:
        provider.evaluate(batch, np.zeros((2, VOCAB), np.float32))
    assert caught.value.argument == "logits"
    with pytest.raises(specdec.Error) as caught:
        provider.evaluate(batch, np.zeros((batch.rows(), VOCAB), np.float32)[:, ::-1])
    assert caught.value.argument == "logits"
    ngram = specdec.NGramModel(vocab=9, order=2, seed=4)
    row = ngram.next_probabilities([1, 2])
    assert row.shape == (9,) and abs(row.sum() - 1) < 1e-5
    draft = specdec.NGramModel.draft_of(ngram, 0.3)
    assert not np.allclose(draft.next_probabilities([1, 2]), row)
    result = specdec.decode(specdec.NGramProvider(ngram), specdec.NGramProvider(draft), [1, 2],
                            options(Method.RSD_S))
    assert len(result.tokens) == 24


@requires_torch
def test_a_provider_can_fill_the_rows_through_torch():
    class TorchMarkov(NumpyMarkov):
        def evaluate(self, batch, logits):
            rows = torch.from_numpy(logits)  # shares the decoder's buffer
            last = torch.from_numpy(np.concatenate([[self._context[-1]], batch.tokens]).astype(np.int64))
            rows.copy_(torch.from_numpy(self.log_table)[last])

    opts = options(Method.SPECINFER)
    np.testing.assert_array_equal(
        specdec.decode(TorchMarkov(TARGET), NumpyMarkov(DRAFT), [1], opts).tokens,
        specdec.decode(NumpyMarkov(TARGET), NumpyMarkov(DRAFT), [1], opts).tokens)
    provider = specdec.MarkovProvider(specdec.MarkovModel(TARGET))
    provider.reset([1])
    batch = specdec.TreeBatch.from_tree(specdec.DraftTree([3], [-1]), 1)
    logits = torch.zeros(2, VOCAB)
    provider.evaluate(batch, logits)
    np.testing.assert_allclose(logits.exp().numpy(), TARGET[[1, 3]], rtol=1e-6)


@pytest.mark.parametrize("verification", [specdec.ReDrafterVerification.EXACT,
                                          specdec.ReDrafterVerification.GREEDY,
                                          specdec.ReDrafterVerification.PARITY])
def test_redrafter_decodes_from_hidden_states(verification):
    hidden = VOCAB + 3
    head = specdec.markov_head(specdec.MarkovModel(DRAFT), hidden)
    assert head.config.vocab == VOCAB and head.config.hidden == hidden
    greedy_mode = verification == specdec.ReDrafterVerification.GREEDY
    # GREEDY verifies with a greedy target (temperature 0): its output is then greedy decoding.
    warp = specdec.Warp(temperature=0.0 if greedy_mode else 1.0)
    opts = specdec.ReDrafterOptions(verification=verification, warp=warp, width=3, depth=3,
                                    max_new_tokens=20, seed=2)

    def target():
        return specdec.MarkovProvider(specdec.MarkovModel(TARGET),
                                      specdec.ProviderOptions(hidden_size=hidden))

    expected = specdec.decode_redrafter(target(), head, [1, 2], opts)
    assert len(expected.tokens) == 20
    got = specdec.decode_redrafter(Delegating(target()), head, [1, 2], opts)
    np.testing.assert_array_equal(got.tokens, expected.tokens)
    if greedy_mode:
        greedy = [2]
        for _ in range(20):
            greedy.append(int(np.argmax(TARGET[greedy[-1]])))
        assert expected.tokens.tolist() == greedy[1:]
    with pytest.raises(specdec.Error) as caught:
        specdec.decode_redrafter(NumpyMarkov(TARGET), head, [1, 2], opts)
    assert caught.value.argument == "head"


def test_every_binding_of_this_area_is_exercised():
    """Each public name of the draft, tree and decode stubs (methods included) appears in these
    tests, so a new binding comes with a test."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    names = set()
    for part in ("draft", "tree", "decode"):
        for node in ast.parse((root / "python" / "stubs" / f"{part}.pyi").read_text()).body:
            named = isinstance(node, (ast.FunctionDef, ast.ClassDef))
            if named and not node.name.startswith("_"):  # not a stub-only helper class
                names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names.update(b.name for b in node.body
                             if isinstance(b, ast.FunctionDef) and not b.name.startswith("_"))
    text = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    missing = sorted(n for n in names if not re.search(rf"\b{re.escape(n)}\b", text))
    assert missing == []


@pytest.mark.parametrize("shape", ["fixed", "sequoia", "eagle2", "specexec", "opt_tree",
                                   "sequoia_planned"])
def test_topk_tree_drafter_runs_every_shape(shape):
    target, draft = toy_pair()
    result = specdec.decode(target, draft, [1, 4], specdec.DecodeOptions(
        width=2, depth=3, max_new_tokens=40, seed=5), drafter="topk_tree", shape=shape, budget=5,
        min_gain=0.1)
    assert len(result.tokens) == 40
    assert result.metrics.block_efficiency() >= 1.0
    assert result.metrics.draft_calls > 0
    # Python providers give the same tokens as the toy providers run in C++.
    again = specdec.decode(Delegating(specdec.MarkovProvider(specdec.MarkovModel(TARGET))),
                           Delegating(specdec.MarkovProvider(specdec.MarkovModel(DRAFT))), [1, 4],
                           specdec.DecodeOptions(width=2, depth=3, max_new_tokens=40, seed=5),
                           drafter="topk_tree", shape=shape, budget=5, min_gain=0.1)
    np.testing.assert_array_equal(again.tokens, result.tokens)


def test_ngram_drafter_copies_a_cycle_without_a_draft_model():
    cycle = np.roll(np.eye(4, dtype=np.float32), 1, axis=1)  # 0 -> 1 -> 2 -> 3 -> 0
    target = specdec.MarkovProvider(specdec.MarkovModel(cycle))
    result = specdec.decode(target, None, [0, 1, 2, 3, 0],
                            specdec.DecodeOptions(depth=4, max_new_tokens=10), drafter="ngram",
                            ngram=2)
    np.testing.assert_array_equal(result.tokens, [1, 2, 3, 0, 1, 2, 3, 0, 1, 2])
    assert result.metrics.target_calls == 2  # four copied tokens and the bonus, twice
    assert result.metrics.draft_calls == 0


@pytest.mark.parametrize("length", ["cumulative", "heuristic", "batch_average", "goodput"])
def test_length_controllers_set_the_sd_chain_length(length):
    target, draft = toy_pair()
    options = specdec.DecodeOptions(method=Method.SD, depth=6, max_new_tokens=60, seed=2)
    result = specdec.decode(target, draft, [1, 4], options, length=length, threshold=0.8,
                            draft_cost_ratio=0.1)
    assert len(result.tokens) == 60
    assert result.metrics.block_efficiency() >= 1.0
    assert result.metrics.levels() <= 6


def test_bad_drafter_options_name_the_argument():
    target, draft = toy_pair()
    options = specdec.DecodeOptions(width=2, depth=3)
    cases = [
        (dict(drafter="medusa"), "drafter"),
        (dict(drafter="topk_tree", shape="kary"), "shape"),
        (dict(drafter="topk_tree", shape="sequoia", budget=-1), "budget"),
        (dict(drafter="topk_tree", shape="opt_tree", min_gain=0.0), "min_gain"),
        (dict(drafter="ngram", ngram=0), "ngram"),
        (dict(length="adaptive"), "length"),
        (dict(drafter="ngram", length="goodput"), "length"),
        (dict(length="cumulative", threshold=1.5), "threshold"),
        (dict(drafter="topk_tree", shape="sequoia_planned", verify_cost=[1.0, -1.0]),
         "verify_cost[1]"),
        (dict(drafter="topk_tree", shape="sequoia", verify_cost=[1.0, 1.0]), "verify_cost"),
        (dict(drafter="topk_tree", shape="sequoia_planned", draft_cost_ratio=float("nan")),
         "draft_cost_ratio"),
        (dict(length="goodput", draft_cost_ratio=-1.0), "draft_cost_ratio"),
    ]
    for kwargs, argument in cases:
        with pytest.raises(specdec.Error) as caught:
            specdec.decode(target, draft, [1], options, **kwargs)
        assert caught.value.argument == argument, kwargs
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(target, draft, [1], specdec.DecodeOptions(width=9), drafter="topk_tree")
    assert caught.value.argument == "options.width"


def test_hardware_aware_sequoia_plans_no_tree_when_drafting_cannot_pay():
    target, draft = toy_pair()
    options = specdec.DecodeOptions(width=2, depth=3, max_new_tokens=20, seed=1)
    # Any node costs more than the tokens it can bring: every step is the target's alone.
    dear = specdec.decode(target, draft, [1, 4], options, drafter="topk_tree",
                          shape="sequoia_planned", verify_cost=[1.0, 5.0, 9.0])
    assert dear.metrics.target_calls == 20
    assert dear.metrics.draft_calls == 0
    cheap = specdec.decode(target, draft, [1, 4], options, drafter="topk_tree",
                           shape="sequoia_planned", verify_cost=[1.0] * 7, draft_cost_ratio=0.01)
    assert cheap.metrics.block_efficiency() > 1.0


DRAFTER_KEYWORDS = [
    dict(drafter="topk_tree", shape="sequoia_planned", verify_cost=[1.0, 1.0, 1.1, 1.2, 1.4],
         draft_cost_ratio=0.1),
    dict(drafter="topk_tree", shape="eagle2", budget=5),
    dict(drafter="ngram", ngram=2),
    dict(length="goodput", draft_cost_ratio=0.1),
]


@pytest.mark.parametrize("keywords", DRAFTER_KEYWORDS, ids=lambda k: k.get("shape", "") or
                         k.get("drafter", "") or k["length"])
def test_decoder_and_decode_batch_take_the_drafter_keywords(keywords):
    options = specdec.DecodeOptions(method=Method.SD, width=2, depth=3, max_new_tokens=24, seed=7)
    prompts = [[1, 4], [2], [0, 3, 1]]
    pairs = [toy_pair() for _ in prompts]
    batch = specdec.decode_batch([p[0] for p in pairs], [p[1] for p in pairs], prompts, options,
                                 threads=2, **keywords)
    for sequence, prompt in enumerate(prompts):
        target, draft = toy_pair()
        alone = specdec.decode(target, draft, prompt, options, sequence, **keywords)
        np.testing.assert_array_equal(batch[sequence].tokens, alone.tokens)
        target, draft = toy_pair()
        decoder = specdec.Decoder(target, draft, options, **keywords)
        decoder.reset(prompt, sequence)
        stepped = []
        while not decoder.finished():
            stepped.extend(decoder.step())
        np.testing.assert_array_equal(stepped, alone.tokens)
        assert decoder.metrics().target_calls == alone.metrics.target_calls


def test_decoder_and_decode_batch_name_bad_drafter_keywords_as_decode_does():
    target, draft = toy_pair()
    wide = specdec.DecodeOptions(width=9, depth=3)
    ok = specdec.DecodeOptions(width=2, depth=3)
    cases = [
        (ok, dict(drafter="medusa"), "drafter"),
        (wide, dict(drafter="topk_tree"), "options.width"),
        (ok, dict(drafter="topk_tree", shape="sequoia_planned", verify_cost=[-1.0]),
         "verify_cost[0]"),
        (ok, dict(drafter="topk_tree", shape="sequoia_planned", draft_cost_ratio=-1.0),
         "draft_cost_ratio"),
    ]
    for options, kwargs, argument in cases:
        with pytest.raises(specdec.Error) as caught:
            specdec.Decoder(target, draft, options, **kwargs)
        assert caught.value.argument == argument, kwargs
        with pytest.raises(specdec.Error) as caught:
            specdec.decode_batch([target], [draft], [[1]], options, **kwargs)
        assert caught.value.argument == argument, kwargs


STRATEGY_OBJECTS = [
    (specdec.TopKTreeOptions(shape=specdec.TreeShapePolicy.SEQUOIA_PLANNED, width=2, depth=3,
                             verify_cost=[1.0, 1.0, 1.1, 1.2, 1.4], draft_cost_per_level=0.1),
     DRAFTER_KEYWORDS[0]),
    (specdec.TopKTreeOptions(shape=specdec.parse_tree_shape_policy("eagle2"), width=2, depth=3,
                             budget=5), DRAFTER_KEYWORDS[1]),
    (specdec.NGramOptions(max_ngram=2, max_draft=3), DRAFTER_KEYWORDS[2]),
    (specdec.ChainLengthOptions(specdec.parse_length_policy("goodput"), 3, draft_cost=0.1),
     DRAFTER_KEYWORDS[3]),
]


@pytest.mark.parametrize("strategy,keywords", STRATEGY_OBJECTS,
                         ids=["sequoia_planned", "eagle2", "ngram", "goodput"])
def test_strategy_objects_decode_as_the_drafter_keywords(strategy, keywords):
    options = specdec.DecodeOptions(method=Method.SD, width=2, depth=3, max_new_tokens=24, seed=7)
    target, draft = toy_pair()
    by_keywords = specdec.decode(target, draft, [1, 4], options, 1, **keywords)
    target, draft = toy_pair()
    by_object = specdec.decode(target, draft, [1, 4], options, 1, strategy=strategy)
    np.testing.assert_array_equal(by_object.tokens, by_keywords.tokens)
    assert by_object.metrics.target_calls == by_keywords.metrics.target_calls
    pairs = [toy_pair() for _ in range(2)]
    batch = specdec.decode_batch([p[0] for p in pairs], [p[1] for p in pairs], [[1, 4], [1, 4]],
                                 options, strategy=strategy)
    np.testing.assert_array_equal(batch[1].tokens, by_keywords.tokens)
    target, draft = toy_pair()
    decoder = specdec.Decoder(target, draft, options, strategy=strategy)
    decoder.reset([1, 4], 1)
    np.testing.assert_array_equal(decoder.run().tokens, by_keywords.tokens)


def test_strategy_objects_carry_the_library_defaults():
    tree = specdec.TopKTreeOptions()
    assert (tree.shape, tree.width, tree.depth, tree.budget) == (
        specdec.TreeShapePolicy.FIXED, 2, 3, 8)
    assert tree.max_tree_size() == 2 + 4 + 8
    tree.validate(16)
    lookup = specdec.NGramOptions()
    assert (lookup.max_ngram, lookup.min_ngram, lookup.max_draft) == (3, 1, 4)
    lookup.validate()
    chain = specdec.ChainLengthOptions(specdec.LengthPolicy.HEURISTIC, 6)
    assert chain.policy == specdec.LengthPolicy.HEURISTIC
    assert chain.max_length() == 6
    # The heuristic controller's threshold and initial length are the library's (0.4, 5): the
    # object decodes as the keyword form without a threshold.
    target, draft = toy_pair()
    options = specdec.DecodeOptions(method=Method.SD, depth=6, max_new_tokens=30, seed=3)
    by_object = specdec.decode(target, draft, [1, 4], options, strategy=chain)
    target, draft = toy_pair()
    by_keywords = specdec.decode(target, draft, [1, 4], options, length="heuristic")
    np.testing.assert_array_equal(by_object.tokens, by_keywords.tokens)


def test_a_bad_strategy_argument_is_named():
    target, draft = toy_pair()
    options = specdec.DecodeOptions(width=2, depth=3)
    for kwargs in (dict(strategy=specdec.NGramOptions(), drafter="ngram"),
                   dict(strategy="topk_tree")):
        with pytest.raises(specdec.Error) as caught:
            specdec.decode(target, draft, [1], options, **kwargs)
        assert caught.value.argument == "strategy"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(target, draft, [1], options, strategy=specdec.TopKTreeOptions(width=9))
    assert caught.value.argument == "width"
    with pytest.raises(specdec.Error) as caught:
        specdec.decode(target, None, [1], options, strategy=specdec.TopKTreeOptions())
    assert caught.value.argument == "draft"
    # Prompt lookup needs no draft model.
    assert len(specdec.decode(target, None, [1, 2, 1], specdec.DecodeOptions(max_new_tokens=5),
                              strategy=specdec.NGramOptions()).tokens) == 5
