"""The LogitsProvider base class: what `specdec.decode` calls on a model written in Python."""

from __future__ import annotations

from typing import Sequence

import numpy as np


class LogitsProvider:
    """A model behind the decoding loop (the target, or a draft model) holding a committed context.

    Subclass it and implement the methods below; `decode` (and `Decoder`) call them with the
    global interpreter lock held, from the thread that called `decode`. Any object with these
    methods works: the base class only documents them (and keeps a committed context for
    subclasses that call its `reset` / `commit`). A subclass need not call ``__init__``.

    Row layout: a `TreeBatch` of N nodes is answered with N + 1 rows. Row 0 is the next-token
    logits after the committed context (the root, which is the last committed token); row i + 1 the
    logits after the committed context followed by the root-to-node path of node i. Rows are raw
    logits (any additive shift; log-probabilities qualify), ``-inf`` for impossible tokens, never
    NaN or ``+inf``: the decoder checks them and raises `specdec.Error` naming ``target.logits``
    or ``draft.logits`` otherwise. Exceptions raised here leave `decode` unchanged.

    Where a real model plugs in: `evaluate` runs one forward pass over the tree, using
    ``batch.positions`` as position ids and ``batch.dense_mask()`` (or `build_packed_mask`) as the
    attention mask over the tree part of the keys; `commit` keeps the KV-cache entries of
    ``kept_nodes`` (see `kv_compaction`) and appends ``next``.
    """

    _context: list

    def vocab_size(self) -> int:
        """V, the number of logits per row."""
        raise NotImplementedError

    def context(self) -> Sequence[int]:
        """The committed tokens."""
        return list(self._context)

    def committed_length(self) -> int:
        """The number of committed tokens (the decoder checks it every step)."""
        return len(self._context)

    def reset(self, prompt: np.ndarray) -> None:
        """The committed context becomes `prompt` (int32, non-empty)."""
        self._context = [int(t) for t in prompt]

    def evaluate(self, batch, logits: np.ndarray) -> None:
        """Fills `logits` (a writable float32 [batch.rows(), V] view of the decoder's buffer, valid
        during this call only) in place for `batch` appended to the committed context; does not
        change the committed context."""
        raise NotImplementedError

    def commit(self, batch, kept_nodes: np.ndarray, next: int) -> None:
        """Appends the tokens of `kept_nodes` (a root-to-node path of `batch`, int32, maybe empty)
        and then `next` to the committed context, keeping whatever cache belongs to them."""
        self._context.extend(int(t) for t in batch.tokens[kept_nodes])
        self._context.append(int(next))

    # Optional, for drafters that read the target's hidden states (ReDrafter):
    #   hidden_size() -> int
    #   evaluate_with_hidden(batch, logits, hidden): as evaluate, and fills `hidden`
    #   (float32 [batch.rows(), hidden_size()], laid out like the logits).
