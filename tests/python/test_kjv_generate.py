"""examples/kjv_generate (the C++ engine loop on the trained pair) against the PyTorch model of
examples/python/model.py: the same logits, through a plain forward pass and through the KV cache
with a tree mask after a compaction; greedy text equal to the target's for every lossless
method; bad input as one line on stderr and exit status 2. The large pair (examples/models/
kjv_large, `--pair large`): the same logits, and the target's greedy text from two methods.

The program is found through SPECDEC_KJV_GENERATE (set by ctest), else build/examples/."""

import codecs
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from conftest import requires_torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"
LARGE = MODELS / "kjv_large"
PROGRAM = pathlib.Path(os.environ.get("SPECDEC_KJV_GENERATE",
                                      ROOT / "build" / "examples" / "kjv_generate"))
PROMPT = "And Moses said unto the"
# Both read the float16 weights as float32 and sum in different orders: the logits (up to ~26 in
# size) agree to float32 rounding, 2e-5 at most on these prompts, five times inside the tolerance.
TOLERANCE = 1e-4
# The large pair's target (6 layers of width 96, logits up to ~18) sums longer rows: 2.7e-5 at
# most on this prompt, near four times inside the same tolerance.
LARGE_TOLERANCE = 1e-4

pytestmark = [requires_torch,
              pytest.mark.skipif(not PROGRAM.is_file(), reason=f"{PROGRAM} is not built")]


def run(*arguments, check=True):
    done = subprocess.run([str(PROGRAM), *arguments], capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def rows(text):
    return np.array([[float(v) for v in line.split()] for line in text.strip().splitlines()])


def load(models):
    import torch

    from shape_table import load_pair

    torch.set_num_threads(1)
    return load_pair(models)


@pytest.fixture(scope="module")
def pair():
    return load(MODELS)


@pytest.fixture(scope="module")
def large_pair():
    return load(LARGE)


def logits_after(model, sequences):
    return model.logits_after(sequences).numpy()


@pytest.mark.parametrize("name", ["target", "draft"])
def test_logits_after_every_prefix_equal_pytorch(pair, name):
    model = pair[0] if name == "target" else pair[1]
    tokens = list(PROMPT.encode("ascii"))
    got = rows(run("--dump-logits", name, "--prompt", PROMPT).stdout)
    expected = logits_after(model, [tokens[:i + 1] for i in range(len(tokens))])
    assert got.shape == expected.shape == (len(tokens), model.config.vocab)
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("name", ["target", "draft"])
def test_large_pair_logits_after_every_prefix_equal_pytorch(large_pair, name):
    model = large_pair[0] if name == "target" else large_pair[1]
    tokens = list(PROMPT.encode("ascii"))
    got = rows(run("--pair", "large", "--dump-logits", name, "--prompt", PROMPT).stdout)
    expected = logits_after(model, [tokens[:i + 1] for i in range(len(tokens))])
    assert got.shape == expected.shape == (len(tokens), model.config.vocab)
    np.testing.assert_allclose(got, expected, rtol=0, atol=LARGE_TOLERANCE)


def test_tree_through_the_cache_equals_full_forward_passes(pair):
    """A tree scored in two passes (half, then the rest against the cached half) with specdec's
    mask, a path committed and compacted, then the tree scored again: every row equals a plain
    forward pass over the context and the node's path."""
    target = pair[0]
    tokens = list(b" Lhtoeaf")
    parents = [-1, -1, 0, 0, 1, 2, 2, 5]
    kept, next_token = [0, 2, 5], ord("r")

    def path(node):
        out = []
        while node >= 0:
            out.append(tokens[node])
            node = parents[node]
        return out[::-1]

    spec = ";".join([",".join(map(str, tokens)), ",".join(map(str, parents)),
                     ",".join(map(str, kept)), str(next_token)])
    out = run("--dump-tree", spec, "--prompt", PROMPT).stdout
    tree_part, after_part = out.split("# after commit\n")
    assert tree_part.startswith("# tree\n")
    prompt = list(PROMPT.encode("ascii"))
    for context, text in ((prompt, tree_part.split("\n", 1)[1]),
                          (prompt + [tokens[k] for k in kept] + [next_token], after_part)):
        # Row 0 follows the context (path(-1) is empty), row i + 1 follows node i.
        expected = np.concatenate(
            [logits_after(target, [context + path(i)]) for i in range(-1, len(tokens))])
        np.testing.assert_allclose(rows(text), expected, rtol=0, atol=TOLERANCE)


def greedy(model, prompt, count):
    import torch

    tokens = list(prompt)
    for _ in range(count):
        tokens.append(int(torch.argmax(model.logits_after([tokens])[0])))
    return bytes(tokens[len(prompt):]).decode("ascii")


def texts_of(out):
    """{method: its sample text} from kjv_generate's table."""
    texts = {}
    method = None
    for line in out.splitlines():
        if line.startswith("  text: "):
            texts[method] = codecs.decode(line[len("  text: "):], "unicode_escape")
        elif line and not line.startswith(("method", "target", "draft", "prompt")):
            method = line.split()[0]
    return texts


def test_every_method_at_temperature_zero_gives_the_targets_greedy_text(pair):
    count = 48
    texts = texts_of(run("--temperature", "0", "--tokens", str(count), "--repeats", "1",
                         "--prompt", PROMPT).stdout)
    assert set(texts) == {"plain", "sd", "block_sd", "specinfer", "spectr", "rsd_c", "rsd_s",
                          "sequoia", "eagle", "ngram"}
    expected = greedy(pair[0], PROMPT.encode("ascii"), count)
    for method, text in texts.items():
        assert text == expected, method


def test_large_pair_at_temperature_zero_gives_the_targets_greedy_text(large_pair):
    count = 40
    texts = texts_of(run("--pair", "large", "--temperature", "0", "--tokens", str(count),
                         "--repeats", "1", "--methods", "sd,sequoia", "--prompt", PROMPT).stdout)
    assert set(texts) == {"plain", "sd", "sequoia"}
    expected = greedy(large_pair[0], PROMPT.encode("ascii"), count)
    for method, text in texts.items():
        assert text == expected, method


def broken_models(tmp_path, change):
    """A copy of examples/models with `change(directory)` applied."""
    directory = tmp_path / "models"
    shutil.copytree(MODELS, directory)
    change(directory)
    return str(directory)


def truncate(path):
    path.write_bytes(path.read_bytes()[:1000])


def widen_target(directory):
    text = (directory / "kjv_pair.json").read_text()
    (directory / "kjv_pair.json").write_text(text.replace('"width": 32', '"width": 48', 1))


BAD_INPUT = {
    "missing weights": lambda tmp: ["--models", broken_models(
        tmp, lambda d: (d / "kjv_target.safetensors").unlink())],
    "corrupt weights": lambda tmp: ["--models", broken_models(
        tmp, lambda d: truncate(d / "kjv_draft.safetensors"))],
    "weights of another shape": lambda tmp: ["--models", broken_models(tmp, widen_target)],
    "corrupt description": lambda tmp: ["--models", broken_models(
        tmp, lambda d: truncate(d / "kjv_pair.json"))],
    "missing directory": lambda tmp: ["--models", str(tmp / "nowhere")],
    "prompt longer than the context": lambda tmp: ["--prompt", "In the beginning " * 10],
    "prompt outside the vocabulary": lambda tmp: ["--prompt", "caf\u00e9"],
    "empty prompt": lambda tmp: ["--prompt", ""],
    "more tokens than the context holds": lambda tmp: ["--tokens", "500"],
    "unknown method": lambda tmp: ["--methods", "sd,beam"],
    "unknown pair": lambda tmp: ["--pair", "medium"],
    "large pair missing": lambda tmp: ["--models", broken_models(
        tmp, lambda d: shutil.rmtree(d / "kjv_large")), "--pair", "large"],
    "tokens not a number": lambda tmp: ["--tokens", "12x"],
    "negative temperature": lambda tmp: ["--temperature", "-1"],
    "seed not a number": lambda tmp: ["--seed", "seven"],
    "unknown option": lambda tmp: ["--speed", "9"],
    "option without its value": lambda tmp: ["--tokens"],
    "dump of an unknown model": lambda tmp: ["--dump-logits", "oracle"],
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line_on_stderr_and_exit_status_2(tmp_path, case):
    done = run(*BAD_INPUT[case](tmp_path), check=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kjv_generate: "), done.stderr
