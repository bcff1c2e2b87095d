# Node rules, node / chain / block / tree verification, MTAD, exact distributions and the
# batched entry points (src/bind_verify.cpp, src/bind_logits.cpp).

class Deferral(enum.IntEnum):
    CHOW = 0
    DIFF = 1
    OPT = 2
    DIFF_LOG = 3
    OPT_LOG = 4
    BILD = 5
    TOKEN_V1 = 6
    TOKEN_V2 = 7
    TOKEN_V3 = 8

class Rejection:
    def __init__(self) -> None: ...
    def is_lossless(self) -> bool: ...

class MultiRound:
    def __init__(self) -> None: ...
    def is_lossless(self) -> bool: ...

class Recursive:
    def __init__(self) -> None: ...
    def is_lossless(self) -> bool: ...

class SpecTr:
    gamma: float
    def __init__(self, *, gamma: float = 0.0) -> None: ...
    def is_lossless(self) -> bool: ...

class Lossy:
    alpha: float
    beta: float
    tune_beta: bool
    greedy: bool
    def __init__(self, *, alpha: float = 0.0, beta: float = 1.0, tune_beta: bool = False,
                 greedy: bool = False) -> None: ...
    def is_lossless(self) -> bool: ...

class Cascade:
    deferral: Deferral
    alpha: float
    def __init__(self, *, deferral: Deferral = Deferral.CHOW, alpha: float = 0.0) -> None: ...
    def is_lossless(self) -> bool: ...

class Typical:
    epsilon: float
    delta: float
    def __init__(self, *, epsilon: float = 0.3, delta: float = 0.09) -> None: ...
    def is_lossless(self) -> bool: ...

class Greedy:
    def __init__(self) -> None: ...
    def is_lossless(self) -> bool: ...

Rule = Union[Rejection, MultiRound, Recursive, SpecTr, Lossy, Cascade, Typical, Greedy]

class NodeVerdict:
    accepted: Final[int]
    token: Final[int]
    def __init__(self, accepted: int, token: int) -> None: ...

class ChainVerdict:
    accepted: Final[int]
    emitted: Final[int]
    def __init__(self, accepted: int, emitted: int) -> None: ...

class TreeVerdict:
    accepted: Final[int]
    token: Final[int]
    bonus: Final[bool]
    def __init__(self, accepted: int, token: int, bonus: bool) -> None: ...

class MtadVerdict:
    accepted: Final[int]
    token: Final[int]
    def __init__(self, accepted: int, token: int) -> None: ...

def is_lossless(rule: Rule) -> bool: ...
def draws_without_replacement(rule: Rule) -> bool: ...
def max_candidates(rule: Rule, vocab: int) -> int: ...
def deferral_name(deferral: Deferral) -> str: ...
def check_deferral(deferral: Deferral, alpha: float) -> None: ...
def check_typical_parameters(epsilon: float, delta: float) -> None: ...

def verify_node(rule: Rule, target: ArrayLike, draft: ArrayLike, candidates: ArrayLike,
                stream: RandomStream, raw_target: ArrayLike | None = None,
                raw_draft: ArrayLike | None = None) -> NodeVerdict: ...
def verify_rejection(target: ArrayLike, draft: ArrayLike, candidate: int,
                     stream: RandomStream) -> NodeVerdict: ...
def verify_multi_round(target: ArrayLike, draft: ArrayLike, candidates: ArrayLike,
                       stream: RandomStream) -> NodeVerdict: ...
def verify_recursive(target: ArrayLike, draft: ArrayLike, candidates: ArrayLike,
                     stream: RandomStream) -> NodeVerdict: ...
def verify_spectr(target: ArrayLike, draft: ArrayLike, candidates: ArrayLike, gamma: float,
                  stream: RandomStream) -> NodeVerdict: ...
def verify_lossy(target: ArrayLike, draft: ArrayLike, candidate: int, alpha: float, beta: float,
                 stream: RandomStream) -> NodeVerdict: ...
def verify_lossy_greedy(target: ArrayLike, candidate: int, alpha: float) -> NodeVerdict: ...
def verify_cascade(raw_target: ArrayLike, raw_draft: ArrayLike, target: ArrayLike,
                   draft: ArrayLike, candidate: int, rule: Deferral, alpha: float,
                   stream: RandomStream) -> NodeVerdict: ...
def verify_typical(target: ArrayLike, candidates: ArrayLike, epsilon: float, delta: float,
                   stream: RandomStream) -> NodeVerdict: ...
def verify_greedy(target: ArrayLike, candidates: ArrayLike) -> NodeVerdict: ...
def verify_target_only(target: ArrayLike, candidates: ArrayLike,
                       stream: RandomStream) -> NodeVerdict: ...

def verify_chain(rule: Rule, target_rows: ArrayLike, draft_rows: ArrayLike,
                 draft_tokens: ArrayLike, stream: RandomStream,
                 raw_target_rows: ArrayLike | None = None,
                 raw_draft_rows: ArrayLike | None = None) -> tuple[ChainVerdict, Array]: ...
def verify_block(target_rows: ArrayLike, draft_rows: ArrayLike, draft_tokens: ArrayLike,
                 stream: RandomStream) -> tuple[ChainVerdict, Array]: ...
def verify_tree(rule: Rule, tree: DraftTree, target_rows: ArrayLike, draft_rows: ArrayLike,
                stream: RandomStream, raw_target_rows: ArrayLike | None = None,
                raw_draft_rows: ArrayLike | None = None) -> tuple[TreeVerdict, Array]: ...
def verify_chain_target_only(target_rows: ArrayLike, draft_tokens: ArrayLike,
                             stream: RandomStream) -> tuple[ChainVerdict, Array]: ...
def verify_tree_target_only(tree: DraftTree, target_rows: ArrayLike,
                            stream: RandomStream) -> tuple[TreeVerdict, Array]: ...
def verify_tree_target_only_thresholded(
    tree: DraftTree, target_rows: ArrayLike, threshold_single: float = 1.0,
    threshold_acc: float = 1.0, stream: RandomStream | None = None, *,
    node_coins: ArrayLike | None = None,
    final_uniform: float = 0.5) -> tuple[TreeVerdict, Array]: ...
def verify_tree_target_only_typical(tree: DraftTree, target_rows: ArrayLike, rule: Typical,
                                    stream: RandomStream) -> tuple[TreeVerdict, Array]: ...
def verify_chain_batch_synthetic(*, target_rows: ArrayLike, draft_tokens: ArrayLike,
                                 draft_offsets: ArrayLike, streams: Streams,
                                 synthetic_acceptance_rates: ArrayLike,
                                 threads: int = 0) -> tuple[Array, Array]:
    """LOSSY: vLLM's "synthetic" method on a ragged batch (position i accepted with probability
    synthetic_acceptance_rates[i]); returns (emitted [G + B] padded with -1, accepted [B])."""
def verify_chain_batch_fly(*, target_rows: ArrayLike, draft_rows: ArrayLike | None = None,
                           draft_tokens: ArrayLike, draft_offsets: ArrayLike, streams: Streams,
                           fly_window_size: int = 1, fly_entropy_threshold: float = 0.0,
                           threads: int = 0) -> tuple[Array, Array]:
    """LOSSY: FLy (vLLM's "fly") on a ragged batch; returns (emitted [G + B] padded with -1,
    accepted [B])."""
def verify_chain_logits(warp: Warp, target_logits: ArrayLike, draft_logits: ArrayLike,
                        draft_tokens: ArrayLike,
                        stream: RandomStream) -> tuple[ChainVerdict, Array]:
    """verify_chain(Rejection(), ...) on the rows `warp` makes of the logits ([L + 1, V] and
    [L, V], one dtype), without writing them: the same tokens, draws and verdict."""
def verify_block_logits(warp: Warp, target_logits: ArrayLike, draft_logits: ArrayLike,
                        draft_tokens: ArrayLike,
                        stream: RandomStream) -> tuple[ChainVerdict, Array]:
    """verify_block on the rows `warp` makes of the logits: the same tokens, draws and verdict."""
def verify_chain_target_only_logits(warp: Warp, target_logits: ArrayLike,
                                    draft_tokens: ArrayLike,
                                    stream: RandomStream) -> tuple[ChainVerdict, Array]:
    """verify_chain_target_only on the rows `warp` makes of the logits ([L + 1, V]): p(x) per
    position, one draw from the kept entries at a rejection, no row written."""
def verify_tree_logits(rule: Rule, warp: Warp, tree: DraftTree, target_logits: ArrayLike,
                       draft_logits: ArrayLike,
                       stream: RandomStream) -> tuple[TreeVerdict, Array]:
    """verify_tree with any rule on the rows `warp` makes of the logits ([N + 1, V] each): the
    same walk, draws and verdict."""
def verify_tree_target_only_logits(warp: Warp, tree: DraftTree, target_logits: ArrayLike,
                                   stream: RandomStream) -> tuple[TreeVerdict, Array]:
    """verify_tree_target_only on the rows `warp` makes of the logits ([N + 1, V]): the same
    walk, draws and verdict."""
def verify_mtad(draft_tokens: ArrayLike, draft_log_probs: ArrayLike, target_rows: ArrayLike,
                tau: float, stream: RandomStream) -> MtadVerdict: ...

def exact_node_distribution(rule: Rule, target: ArrayLike, draft: ArrayLike, count: int,
                            raw_target: ArrayLike | None = None,
                            raw_draft: ArrayLike | None = None) -> tuple[float, Array]: ...
def claimed_distribution(rule: Rule, target: ArrayLike, draft: ArrayLike, count: int,
                         raw_target: ArrayLike | None = None,
                         raw_draft: ArrayLike | None = None) -> Array | None: ...
def spectr_gamma(target: ArrayLike, draft: ArrayLike, count: int) -> float: ...
def lossy_tuned_beta(target: ArrayLike, draft: ArrayLike, alpha: float) -> float: ...
def cascade_target(raw_target: ArrayLike, raw_draft: ArrayLike, target: ArrayLike,
                   draft: ArrayLike, rule: Deferral, alpha: float) -> Array: ...
def tv_distance(a: ArrayLike, b: ArrayLike) -> float: ...
def entropy(probabilities: ArrayLike) -> float: ...

class SequenceStatus(enum.IntEnum):
    """Why a sequence of a batch call made with check=False failed (its status word)."""
    OK = 0
    TOKEN_OUTSIDE_VOCAB = 1
    ZERO_DRAFT_PROBABILITY = 2
    BAD_WARP = 3
    TOO_MANY_CHILDREN = 4
    BAD_ROW = 5
    BAD_TREE = 6
    RESIDUAL_OVERFLOW = 7
    CHAIN_TOO_LONG = 8

def check_status(status: ArrayLike) -> None:
    """Raises Error naming the first failed sequence of status words (int32 [B + 1])."""
def stream_tensor(streams: Sequence[RandomStream]) -> Array:
    """The streams as an int32 [B, 6] array of their bytes, for `streams=` of the batch calls."""

# With check=False the batch calls return their status words (int32 [B + 1]) last.
Streams = Union[Sequence[RandomStream], ArrayLike]
Warps = Union[Warp, Sequence[Warp]]  # one for every sequence, or one per sequence

def verify_chain_batch(*, target_rows: ArrayLike, draft_rows: ArrayLike, draft_tokens: ArrayLike,
                       streams: Streams, draft_offsets: ArrayLike | None = None,
                       threads: int = 0, check: bool = True) -> tuple[Array, ...]: ...
def verify_chain_batch_logits(*, target_logits: ArrayLike, draft_logits: ArrayLike, warps: Warps,
                              draft_tokens: ArrayLike, streams: Streams,
                              draft_offsets: ArrayLike | None = None,
                              threads: int = 0, check: bool = True) -> tuple[Array, ...]: ...
def verify_tree_batch(rule: Rule, *, node_offsets: ArrayLike, tokens: ArrayLike,
                      parents: ArrayLike, target_rows: ArrayLike, draft_rows: ArrayLike,
                      streams: Streams, threads: int = 0,
                      check: bool = True) -> tuple[Array, ...]: ...
def verify_chain_batch_target_only(*, target_rows: ArrayLike, draft_tokens: ArrayLike,
                                   streams: Streams,
                                   draft_offsets: ArrayLike | None = None,
                                   threads: int = 0, check: bool = True) -> tuple[Array, ...]: ...
def verify_tree_batch_target_only(*, node_offsets: ArrayLike, tokens: ArrayLike,
                                  parents: ArrayLike, target_rows: ArrayLike,
                                  streams: Streams, threads: int = 0,
                                  check: bool = True) -> tuple[Array, ...]: ...

# Constrained chain and tree batches from logits (CPU, ragged layout): a grammar bitmask over the
# target rows and vLLM's per-sequence sampling parameters, all optional keywords (_Constraints);
# each per-sequence list holds B entries.
from typing import TypedDict
from typing_extensions import Required, Unpack


class _Constraints(TypedDict, total=False):
    """Stub-only: the constraint keywords every constrained batch call takes."""
    bitmask: ArrayLike | None
    allowed_token_ids: Sequence[ArrayLike | None] | None
    bad_words: Sequence[Sequence[ArrayLike] | None] | None
    min_tokens: ArrayLike | None
    stop_token_ids: Sequence[ArrayLike | None] | None
    repetition_penalty: ArrayLike | None
    frequency_penalty: ArrayLike | None
    presence_penalty: ArrayLike | None
    prompt_token_ids: Sequence[ArrayLike | None] | None
    output_token_ids: Sequence[ArrayLike | None] | None

class _ConstrainedChain(_Constraints, total=False):
    """Stub-only: the keywords every constrained chain batch takes besides its draft side."""
    target_logits: Required[ArrayLike]
    warps: Required[Warps]
    draft_tokens: Required[ArrayLike]
    streams: Required[Streams]
    draft_offsets: Required[ArrayLike]
    threads: int
    check: bool

def verify_chain_batch_logits_constrained(
        *, draft_logits: ArrayLike,
        **keywords: Unpack[_ConstrainedChain]) -> tuple[Array, ...]: ...
def verify_chain_batch_draft_probs_constrained(
        *, draft_probs: ArrayLike, **keywords: Unpack[_ConstrainedChain]) -> tuple[Array, ...]: ...
def verify_chain_batch_target_only_logits_constrained(
        **keywords: Unpack[_ConstrainedChain]) -> tuple[Array, ...]: ...
def verify_block_batch_logits_constrained(
        *, draft_logits: ArrayLike, **keywords: Unpack[_ConstrainedChain]) -> tuple[Array, ...]:
    """Block verification of each sequence on its transformed rows (verify_block, bit for bit)."""
def verify_block_batch_draft_probs_constrained(
        *, draft_probs: ArrayLike, **keywords: Unpack[_ConstrainedChain]) -> tuple[Array, ...]:
    """verify_block_batch_logits_constrained with vLLM's draft probabilities, used as given."""
def verify_chain_batch_greedy_logits_constrained(
        *, target_logits: ArrayLike, draft_tokens: ArrayLike, draft_offsets: ArrayLike,
        threads: int = 0, check: bool = True,
        **constraints: Unpack[_Constraints]) -> tuple[Array, ...]:
    """Greedy matching against each sequence's transformed rows (no draws)."""
def verify_chain_batch_typical_logits_constrained(
        rule: Typical, **keywords: Unpack[_ConstrainedChain]) -> tuple[Array, ...]:
    """LOSSY: typical acceptance on each sequence's transformed, warped rows."""
def verify_tree_batch_logits_constrained(
        rule: Rule, *, node_offsets: ArrayLike, tokens: ArrayLike, parents: ArrayLike,
        target_logits: ArrayLike, draft_logits: ArrayLike, warps: Warps,
        streams: Streams, threads: int = 0, check: bool = True,
        **constraints: Unpack[_Constraints]) -> tuple[Array, ...]: ...
def verify_tree_batch_target_only_logits_constrained(
        *, node_offsets: ArrayLike, tokens: ArrayLike, parents: ArrayLike,
        target_logits: ArrayLike, warps: Warps, streams: Streams,
        threads: int = 0, check: bool = True,
        **constraints: Unpack[_Constraints]) -> tuple[Array, ...]: ...
