"""Lossless methods decoding over providers written in Python emit the warped target's law.

Each test draws many sequences (a fixed seed, sequence ids 0..N-1, so every run sees the same
draws) and compares the counts of the first token, or of the first two tokens, with the exact law
by Pearson's chi-square. The threshold is the chi-square quantile at 1 - 1e-6 (Wilson-Hilferty),
so a correct implementation fails a given test with probability about 1e-6 over seeds.
"""

import math

import numpy as np
import pytest

import specdec
from test_decode import DRAFT, TARGET, VOCAB, NumpyMarkov

Method = specdec.Method
TEMPERATURE = 0.9
PROMPT = [1, 4]
FALSE_FAILURE = 1e-6
Z_FALSE_FAILURE = 4.7534  # the standard normal quantile at 1 - 1e-6


def chi_square_threshold(dof):
    """The chi-square quantile at 1 - FALSE_FAILURE (Wilson-Hilferty; accurate to ~1% here)."""
    a = 2.0 / (9.0 * dof)
    return dof * (1.0 - a + Z_FALSE_FAILURE * math.sqrt(a)) ** 3


def chi_square(counts, law):
    """Pearson's statistic and its degrees of freedom; cells expecting < 5 are pooled."""
    expected = law * counts.sum()
    small = expected < 5
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    return float(((observed - expected) ** 2 / expected).sum()), len(expected) - 1


def warped(table):
    logits = np.log(table.astype(np.float64)) / TEMPERATURE
    law = np.exp(logits - logits.max(axis=1, keepdims=True))
    return law / law.sum(axis=1, keepdims=True)


def run(method, count, tokens, target_table=TARGET, **extra):
    fields = dict(method=method, depth=3, width=3, branching=[2, 2, 1], max_new_tokens=tokens,
                  seed=77, warp=specdec.Warp(temperature=TEMPERATURE))
    fields.update(extra)
    opts = specdec.DecodeOptions(**fields)
    target, draft = NumpyMarkov(target_table), NumpyMarkov(DRAFT)
    return np.array([specdec.decode(target, draft, PROMPT, opts, sequence=s).tokens
                     for s in range(count)])


@pytest.mark.parametrize("method", [Method.SD, Method.SD_BLOCK, Method.SPECTR, Method.RSD_C,
                                    Method.RSD_S], ids=lambda m: specdec.method_name(m))
def test_first_token_law_is_the_targets(method):
    samples = run(method, 5000, 1)
    counts = np.bincount(samples[:, 0], minlength=VOCAB)
    statistic, dof = chi_square(counts, warped(TARGET)[PROMPT[-1]])
    assert statistic < chi_square_threshold(dof), (statistic, dof, counts)


@pytest.mark.parametrize("method", [Method.SPECTR, Method.RSD_S],
                         ids=lambda m: specdec.method_name(m))
def test_joint_two_token_law_is_the_targets(method):
    samples = run(method, 12000, 2)
    counts = np.bincount(samples[:, 0] * VOCAB + samples[:, 1], minlength=VOCAB * VOCAB)
    law = warped(TARGET)
    joint = (law[PROMPT[-1]][:, None] * law).ravel()
    statistic, dof = chi_square(counts, joint)
    assert statistic < chi_square_threshold(dof), (statistic, dof)


def test_the_check_rejects_the_draft_law():
    # The same samples judged against the draft's law: the test has the power to fail.
    samples = run(Method.SD, 5000, 1)
    counts = np.bincount(samples[:, 0], minlength=VOCAB)
    statistic, dof = chi_square(counts, warped(DRAFT)[PROMPT[-1]])
    assert statistic > chi_square_threshold(dof)
