"""The trained pair of examples/models/ loads through specdec's safetensors reader, predicts the
held-out text better than its draft and than chance, and decodes speculatively."""

import json
import math
import pathlib

import numpy as np
import pytest

import specdec
from conftest import requires_torch

MODELS = pathlib.Path(__file__).resolve().parents[2] / "examples" / "models"

pytestmark = requires_torch


@pytest.fixture(scope="module")
def pair():
    import torch

    from shape_table import load_pair

    torch.set_num_threads(1)
    return load_pair(MODELS)


def heldout_perplexity(model, text: str, window: int = 128) -> float:
    import torch

    data = np.frombuffer(text.encode("ascii"), np.uint8).astype(np.int64)
    windows = torch.from_numpy(data[:len(data) // window * window].reshape(-1, window))
    with torch.no_grad():
        logits = model.sequence_logits(windows[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 windows[:, 1:].reshape(-1))
    return math.exp(float(loss))


def test_weights_read_back_with_their_recorded_checksums():
    info = json.loads((MODELS / "kjv_pair.json").read_text())
    for name in ("target", "draft"):
        recorded = info["models"][name]["checksums"]
        tensors = specdec.read_safetensors(MODELS / info["models"][name]["file"])
        assert sorted(tensors) == sorted(recorded)
        for tensor, value in tensors.items():
            assert value.dtype == np.float32 and np.isfinite(value).all()
            assert float(np.sum(value, dtype=np.float64)) == pytest.approx(recorded[tensor],
                                                                           rel=1e-9, abs=1e-9)


def test_heldout_perplexity_target_below_draft_below_uniform(pair):
    target, draft, info = pair
    text = (MODELS / "kjv_heldout.txt").read_text()
    target_ppl, draft_ppl = heldout_perplexity(target, text), heldout_perplexity(draft, text)
    assert target_ppl < draft_ppl < target.config.vocab
    assert target_ppl < 0.9 * draft_ppl  # four layers learn visibly more than one


def test_greedy_speculative_decode_writes_what_the_target_writes(pair):
    from model import ModelProvider

    target, draft, _ = pair
    prompt = list(b"And God said unto Moses, ")
    greedy = specdec.DecodeOptions(method=specdec.Method.AUTOREGRESSIVE, max_new_tokens=24,
                                   warp=specdec.Warp(temperature=0))
    reference = specdec.decode(ModelProvider(target), None, prompt, greedy).tokens
    options = specdec.DecodeOptions(method=specdec.Method.SD, depth=4, max_new_tokens=24,
                                    warp=specdec.Warp(temperature=0))
    result = specdec.decode(ModelProvider(target), ModelProvider(draft), prompt, options)
    assert list(result.tokens) == list(reference)
    assert bytes(int(t) for t in result.tokens).decode("ascii").isprintable()
    # A trained draft agrees with its target often: well over one token per target call.
    assert result.metrics.block_efficiency() > 1.5


def test_sampled_speculative_decode_runs_on_the_pair(pair):
    from model import ModelProvider

    target, draft, _ = pair
    options = specdec.DecodeOptions(method=specdec.Method.RSD_S, depth=3, width=2,
                                    max_new_tokens=16, warp=specdec.Warp(temperature=1), seed=3)
    result = specdec.decode(ModelProvider(target), ModelProvider(draft), list(b"In the "),
                            options)
    assert len(result.tokens) == 16 and max(int(t) for t in result.tokens) < 128
    assert result.metrics.block_efficiency() > 1.0


def test_write_safetensors_round_trips_through_the_reader(tmp_path):
    weights = {"a": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4),
               "b": np.array([1.0, 1.0 / 3.0], np.float32)}
    for dtype, tolerance in ((specdec.TensorDType.F32, 0.0), (specdec.TensorDType.F16, 1e-3)):
        path = tmp_path / f"weights_{dtype.name}.safetensors"
        specdec.write_safetensors(str(path), weights, dtype)
        back = specdec.read_safetensors(str(path))
        assert sorted(back) == ["a", "b"]
        for name, values in weights.items():
            assert back[name].shape == values.shape
            np.testing.assert_allclose(back[name], values, rtol=tolerance, atol=0)
