"""A small GPT-style decoder in PyTorch, the stand-in model of the Python tests and examples.

It is written the way an inference engine runs a model, so that it exercises what specdec hands
an engine: a forward pass takes new tokens, their position ids, and an attention mask over
[cached context + new tokens], and appends the new tokens' keys and values to a KV cache. A draft
tree is scored in ONE such pass with specdec's tree mask and positions; after verification the
cache is compacted with specdec's `kv_compaction` indices.

The weights are random (seeded) unless loaded: examples/models/ holds a pair trained on English
text by examples/python/train_pair.py (`GPT.load`). A real model plugs in where `GPT.forward` is
called; what it must offer is the same three inputs (tokens, positions, mask).

    target = GPT(Config(layers=4))      # the model whose distribution decoding must keep
    draft = target.early_exit(1)        # a smaller draft: its first layer, sharing embeddings
    cache = KVCache(target.config, capacity=64)
    logits = target.forward(tokens, positions, causal_mask(cache.length, len(tokens)), cache)

`ModelProvider` (at the end) is specdec's view of such a model, a `specdec.LogitsProvider` that
`specdec.decode` drives: it is the part an engine writes around its own model.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

import specdec


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int = 320
    width: int = 64  # model dimension
    heads: int = 4
    layers: int = 4
    max_positions: int = 512
    seed: int = 0
    # The spread of the output logits: random weights give a flat distribution otherwise.
    logit_scale: float = 3.0
    # How much each block adds to the residual stream: small, so that a model's first layers
    # predict much like the whole model (the draft is an early exit of the target).
    residual_scale: float = 0.3

    @property
    def head_width(self) -> int:
        return self.width // self.heads


class KVCache:
    """Keys and values of every layer, [heads, capacity, head_width] each; slots [0, length) hold
    the tokens seen so far, in the order they were fed."""

    def __init__(self, config: Config, capacity: int):
        shape = (config.layers, config.heads, capacity, config.head_width)
        self.keys = torch.zeros(shape)
        self.values = torch.zeros(shape)
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor, start: int) -> None:
        """Writes the new tokens' keys and values at slots [start, start + n)."""
        n = keys.shape[1]
        if start + n > self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} slots; {start + n} needed")
        self.keys[layer, :, start:start + n] = keys
        self.values[layer, :, start:start + n] = values

    def move(self, source, destination) -> None:
        """Copies slot source[t] to slot destination[t], in order (specdec's kv_compaction
        guarantees destination <= source, so no slot is overwritten before it is read)."""
        for s, d in zip(source, destination):
            if s != d:
                self.keys[:, :, d] = self.keys[:, :, s]
                self.values[:, :, d] = self.values[:, :, s]


def causal_mask(cached: int, new: int) -> torch.Tensor:
    """The mask of plain left-to-right decoding: new token i sees the cache and new tokens <= i.
    Shape [new, cached + new], True where attention is allowed."""
    mask = torch.ones(new, cached + new, dtype=torch.bool)
    mask[:, cached:] = torch.tril(mask[:, cached:])
    return mask


class Block(torch.nn.Module):
    """Pre-norm transformer block: multi-head self-attention over the cache, then an MLP."""

    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.attention_norm = torch.nn.LayerNorm(config.width)
        self.qkv = torch.nn.Linear(config.width, 3 * config.width)
        self.attention_out = torch.nn.Linear(config.width, config.width)
        self.mlp_norm = torch.nn.LayerNorm(config.width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(config.width, 4 * config.width),
                                       torch.nn.GELU(),
                                       torch.nn.Linear(4 * config.width, config.width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor, cache: KVCache, layer: int):
        n, heads, head_width = x.shape[0], self.config.heads, self.config.head_width
        q, k, v = self.qkv(self.attention_norm(x)).split(self.config.width, dim=-1)
        q, k, v = (t.view(n, heads, head_width).transpose(0, 1) for t in (q, k, v))
        cache.append(layer, k, v, start=cache.length)
        keys = cache.keys[layer, :, :cache.length + n]
        values = cache.values[layer, :, :cache.length + n]
        scores = q @ keys.transpose(1, 2) / math.sqrt(head_width)  # [heads, n, cached + n]
        scores = scores.masked_fill(~mask, float("-inf"))
        attended = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).reshape(n, -1)
        x = x + self.attention_out(attended)
        return x + self.mlp(self.mlp_norm(x))

    def forward_sequences(self, x: torch.Tensor) -> torch.Tensor:
        """The same block over a batch of whole sequences [batch, length, width], causally and
        without a cache: the training pass (gradients flow)."""
        batch, n = x.shape[0], x.shape[1]
        heads, head_width = self.config.heads, self.config.head_width
        q, k, v = self.qkv(self.attention_norm(x)).split(self.config.width, dim=-1)
        q, k, v = (t.view(batch, n, heads, head_width).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(2, 3) / math.sqrt(head_width)  # [batch, heads, n, n]
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        attended = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(batch, n, -1)
        x = x + self.attention_out(attended)
        return x + self.mlp(self.mlp_norm(x))


class GPT(torch.nn.Module):
    """Token and learned position embeddings, `layers` blocks, a final norm and an output head."""

    def __init__(self, config: Config, *, _shared: GPT | None = None, _layers: int = 0):
        super().__init__()
        if _shared is not None:  # early_exit: the first layers of another model
            self.config = dataclasses.replace(_shared.config, layers=_layers)
            self.token_embedding = _shared.token_embedding
            self.position_embedding = _shared.position_embedding
            self.blocks = torch.nn.ModuleList(list(_shared.blocks)[:_layers])
            self.norm, self.head = _shared.norm, _shared.head
            return
        self.config = config
        generator = torch.Generator().manual_seed(config.seed)
        self.token_embedding = torch.nn.Embedding(config.vocab, config.width)
        self.position_embedding = torch.nn.Embedding(config.max_positions, config.width)
        self.blocks = torch.nn.ModuleList(Block(config) for _ in range(config.layers))
        self.norm = torch.nn.LayerNorm(config.width)
        self.head = torch.nn.Linear(config.width, config.vocab, bias=False)
        with torch.no_grad():  # seeded weights, whatever torch's global random state
            for name, parameter in self.named_parameters():
                if "norm" in name:
                    continue  # LayerNorm keeps weight 1, bias 0
                std = 0.02 if name.endswith("bias") else 1.0 / math.sqrt(parameter.shape[-1])
                if "embedding" in name:
                    std = 0.3 if "position" in name else 1.0  # positions matter less than tokens
                if name.startswith("head"):
                    std = config.logit_scale / math.sqrt(config.width)
                elif name.endswith(("attention_out.weight", "mlp.2.weight")):
                    std *= config.residual_scale  # each layer refines the stream a little
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
        self.eval()

    def early_exit(self, layers: int) -> GPT:
        """A smaller model made of this one's first `layers` blocks (sharing the embeddings and
        the head): a draft that agrees with this model often, as a trained draft would."""
        if not 1 <= layers <= self.config.layers:
            raise ValueError(f"layers: {layers} must be in [1, {self.config.layers}]")
        return GPT(self.config, _shared=self, _layers=layers)

    @torch.no_grad()
    def forward(self, tokens, positions, mask, cache: KVCache) -> torch.Tensor:
        """Logits [n, vocab] of n new tokens at the given position ids; `mask` [n, cache.length +
        n] says which cached and new tokens each may attend to (True: allowed). Appends the new
        tokens' keys and values to the cache (slots cache.length .. cache.length + n - 1)."""
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        positions = torch.as_tensor(positions, dtype=torch.long)
        mask = torch.as_tensor(mask, dtype=torch.bool)
        n = tokens.shape[0]
        if positions.shape != (n,) or mask.shape != (n, cache.length + n):
            raise ValueError(f"positions {tuple(positions.shape)} and mask {tuple(mask.shape)} do "
                             f"not fit {n} new tokens after {cache.length} cached ones")
        if n and int(positions.max()) >= self.config.max_positions:
            raise ValueError(f"position {int(positions.max())} is past the model's "
                             f"{self.config.max_positions} positions")
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for layer, block in enumerate(self.blocks):
            x = block(x, mask, cache, layer)
        cache.length += n
        return self.head(self.norm(x))

    def sequence_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [batch, length, vocab] after every prefix of each sequence of `tokens` [batch,
        length], from position 0: the training and perplexity pass (gradients flow)."""
        positions = torch.arange(tokens.shape[1])
        x = self.token_embedding(tokens) + self.position_embedding(positions)
        for block in self.blocks:
            x = block.forward_sequences(x)
        return self.head(self.norm(x))

    def save(self, path, dtype=None) -> None:
        """Writes the weights as a safetensors file through specdec (stored as `dtype`, a
        specdec.TensorDType; float16 by default), tensor names as in `state_dict`."""
        tensors = {name: value.detach().float().contiguous().numpy()
                   for name, value in self.state_dict().items()}
        specdec.write_safetensors(path, tensors, dtype or specdec.TensorDType.F16)

    @classmethod
    def load(cls, config: Config, path) -> GPT:
        """A model of `config` with the weights of a safetensors file written by `save`, read
        through specdec's reader; every tensor must be there with its shape."""
        model = cls(config)
        tensors = specdec.read_safetensors(path)
        expected = model.state_dict()
        if set(tensors) != set(expected):
            raise ValueError(f"{path}: tensors {sorted(set(tensors) ^ set(expected))} are "
                             f"missing or unexpected")
        for name, value in expected.items():
            if tuple(tensors[name].shape) != tuple(value.shape):
                raise ValueError(f"{path}: {name} has shape {tuple(tensors[name].shape)}; the "
                                 f"config needs {tuple(value.shape)}")
        model.load_state_dict({name: torch.from_numpy(v) for name, v in tensors.items()})
        model.eval()
        return model

    def new_cache(self, capacity: int) -> KVCache:
        return KVCache(self.config, capacity)

    def logits_after(self, sequences) -> torch.Tensor:
        """The next-token logits after each sequence (a list of token lists of one length), from
        scratch with a causal mask: the reference the tests compare against. [len, vocab]."""
        rows = []
        for tokens in sequences:
            cache = self.new_cache(len(tokens))
            logits = self.forward(tokens, list(range(len(tokens))), causal_mask(0, len(tokens)),
                                  cache)
            rows.append(logits[-1])
        return torch.stack(rows)


class ModelProvider(specdec.LogitsProvider):
    """specdec's view of a model (its LogitsProvider): the committed context, and the logits of
    a draft tree appended to it, scored in one forward pass with the tree's mask and positions.

    The KV cache holds the keys of context[:cached]; the rest of the context (at least the root,
    the last committed token, whose output is row 0) is fed in front of the next tree. After a
    commit, the keys of the accepted tree nodes are kept (moved into place with `kv_compaction`),
    so only the correction or bonus token is recomputed."""

    def __init__(self, model: GPT, capacity: int | None = None):
        super().__init__()
        self.model = model
        self.cache = model.new_cache(capacity or model.config.max_positions)
        self.tokens: list[int] = []  # the committed context
        self.cached = 0  # context tokens whose keys sit in cache slots [0, cached)
        self.scored: specdec.DraftTree | None = None  # the tree whose keys follow the context
        self.forward_passes = 0

    def vocab_size(self) -> int:
        return self.model.config.vocab

    def context(self) -> list[int]:
        return self.tokens

    def committed_length(self) -> int:
        return len(self.tokens)

    def reset(self, prompt) -> None:
        self.tokens = [int(t) for t in prompt]
        self.cached = 0
        self.cache.length = 0
        self.scored = None

    def evaluate(self, batch: specdec.TreeBatch, logits) -> None:
        pending = self.tokens[self.cached:]
        n, committed = batch.size(), len(self.tokens)
        self.cache.length = self.cached  # forget a tree scored before
        # Pending tokens see the cache and each other causally; tree nodes see the whole context
        # and their own ancestors (specdec's dense mask).
        mask = causal_mask(self.cached, len(pending) + n)
        mask[len(pending):, committed:] = torch.from_numpy(batch.dense_mask()).bool()
        positions = list(range(self.cached, committed)) + [int(p) for p in batch.positions]
        out = self.model.forward(pending + [int(t) for t in batch.tokens], positions, mask,
                                 self.cache)
        self.forward_passes += 1
        # Row 0 follows the context (the last pending token's output); row i + 1 follows node i.
        logits[...] = out[len(pending) - 1:].numpy()
        self.cached = committed - 1  # the root stays pending: the next tree needs its row again
        self.scored = specdec.DraftTree(batch.tokens, batch.parents)

    def commit(self, batch: specdec.TreeBatch, kept_nodes, next: int) -> None:
        kept = [int(node) for node in kept_nodes]
        committed = len(self.tokens)
        kept_keys = 0  # accepted nodes whose keys the cache holds
        if self.scored is not None:  # the cache holds the context, then the scored tree
            # A draft model may have scored only the upper levels of `batch`: keep the keys of
            # the accepted nodes it did score (a prefix of the path), recompute the others.
            scored = len(self.scored)
            same = (np.array_equal(self.scored.tokens, batch.tokens[:scored])
                    and np.array_equal(self.scored.parents, batch.parents[:scored]))
            while same and kept_keys < len(kept) and kept[kept_keys] < scored:
                kept_keys += 1
            source, destination, _ = specdec.kv_compaction(self.scored, committed,
                                                          kept[:kept_keys])
            self.cache.move(source, destination)
            self.cached = committed + kept_keys
        self.cache.length = self.cached
        self.scored = None
        self.tokens += [int(batch.tokens[node]) for node in kept] + [int(next)]
