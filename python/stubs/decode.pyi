# The decoding loop: TreeBatch, options, results, decode / Decoder, ReDrafter decoding and the toy
# models and providers (src/bind_decode.cpp, bind_decode_options.cpp,
# bind_toys.cpp). specdec.LogitsProvider (python/specdec/providers.py)
# documents the methods a provider written in Python implements.

class TreeBatch:
    @staticmethod
    def from_tree(tree: DraftTree, committed_length: int) -> TreeBatch: ...
    tokens: Final[np.ndarray]
    parents: Final[np.ndarray]
    positions: Final[np.ndarray]
    committed_length: Final[int]
    def root_position(self) -> int: ...
    def rows(self) -> int: ...
    def size(self) -> int: ...
    def __len__(self) -> int: ...
    def depth(self, node: int) -> int: ...
    def tree(self) -> DraftTree: ...
    def dense_mask(self) -> np.ndarray: ...

Provider = Any  # MarkovProvider, NGramProvider, or any object with the LogitsProvider methods

class Method(enum.IntEnum):
    AUTOREGRESSIVE = 0
    SD = 1
    SD_BLOCK = 2
    SPECINFER = 3
    SPECTR = 4
    RSD_C = 5
    RSD_S = 6
    MTAD = 7
    CASCADE = 8
    LOSSY = 9

def method_name(method: Method) -> str: ...
def parse_method(name: str) -> Method: ...

class DecodeOptions:
    method: Method
    warp: Warp
    depth: int
    width: int
    branching: list[int]
    tau: float
    mtad_beam_search: bool
    spectr_gamma: float
    cascade: Any  # Cascade
    lossy: Any  # Lossy
    max_new_tokens: int
    end_token: int
    seed: int
    def __init__(self, *, method: Method = Method.SD, warp: Warp = ..., depth: int = 4,
                 width: int = 2, branching: Sequence[int] = ..., tau: float = 0.5,
                 mtad_beam_search: bool = False, spectr_gamma: float = 0.0,
                 cascade: Any = None, lossy: Any = None, max_new_tokens: int = 32,
                 end_token: int = -1, seed: int = 0) -> None: ...
    def validate(self, vocab: int) -> None: ...

class DecodeMetrics:
    def __init__(self) -> None: ...
    sequences: Final[int]
    tokens_generated: Final[int]
    target_calls: Final[int]
    draft_calls: Final[int]
    target_tree_tokens: Final[int]
    attempted_per_level: Final[np.ndarray]
    accepted_per_level: Final[np.ndarray]
    wall_seconds: Final[float]
    def block_efficiency(self) -> float: ...
    def mean_target_budget(self) -> float: ...
    def mean_draft_calls(self) -> float: ...
    def mbsu(self, depth: float, cost_ratio: float) -> float: ...
    def acceptance_rate(self, depth: int) -> float: ...
    def acceptance_rates(self) -> np.ndarray: ...
    def levels(self) -> int: ...
    def merge(self, other: DecodeMetrics) -> None: ...

def format_metrics_header() -> str: ...
def format_metrics_row(method: str, metrics: DecodeMetrics, depth: int, cost_ratio: float) -> str: ...

class DecodeResult:
    tokens: Final[np.ndarray]
    metrics: Final[DecodeMetrics]

class TreeShapePolicy(enum.IntEnum):
    FIXED = 0
    SEQUOIA = 1
    EAGLE2 = 2
    SPECEXEC = 3
    OPT_TREE = 4
    SEQUOIA_PLANNED = 5

def parse_tree_shape_policy(name: str) -> TreeShapePolicy: ...

class TopKTreeOptions:
    """The top-k tree drafter (C++ TopKTreeStrategy); defaults are the library's."""
    shape: TreeShapePolicy
    width: int
    depth: int
    budget: int
    min_gain: float
    verify_cost: list[float]
    draft_cost_per_level: float
    def __init__(self, *, shape: TreeShapePolicy = TreeShapePolicy.FIXED, width: int = ...,
                 depth: int = ..., budget: int = ..., min_gain: float = ...,
                 verify_cost: Sequence[float] = ..., draft_cost_per_level: float = ...) -> None: ...
    def validate(self, vocab: int) -> None: ...
    def max_tree_size(self) -> int: ...

class NGramOptions:
    """Prompt lookup (C++ NGramStrategy); defaults are the library's."""
    max_ngram: int
    min_ngram: int
    max_draft: int
    def __init__(self, *, max_ngram: int = ..., min_ngram: int = ...,
                 max_draft: int = ...) -> None: ...
    def validate(self) -> None: ...

class LengthPolicy(enum.IntEnum):
    CUMULATIVE = 0
    HEURISTIC = 1
    BATCH_AVERAGE = 2
    GOODPUT = 3

def parse_length_policy(name: str) -> LengthPolicy: ...

class ChainLengthOptions:
    """An SD chain whose length a controller sets (C++ ChainLengthStrategy), as
    ChainLengthOptions::up_to builds it; None takes the library's defaults."""
    policy: LengthPolicy
    draft_warp: Warp
    def __init__(self, policy: LengthPolicy, max_length: int, *, draft_cost: float | None = None,
                 threshold: float | None = None, draft_warp: Warp = ...) -> None: ...
    def max_length(self) -> int: ...

Strategy = Union[TopKTreeOptions, NGramOptions, ChainLengthOptions, DecodeOptions, None]

def decode(target: Provider, draft: Provider | None, prompt: ArrayLike, options: DecodeOptions,
           sequence: int = 0, *, strategy: Strategy = None, drafter: str | None = None,
           shape: str | None = None, budget: int | None = None, min_gain: float | None = None,
           verify_cost: Sequence[float] | None = None, ngram: int | None = None,
           length: str | None = None, threshold: float | None = None,
           draft_cost_ratio: float | None = None) -> DecodeResult:
    """Generates from `prompt` with options.method, or with `strategy` (TopKTreeOptions,
    NGramOptions, ChainLengthOptions), whose options, warp aside, replace DecodeOptions'. The
    drafter keywords (drafter="topk_tree" / "ngram", length=...) are the earlier spelling of the
    same strategies, built from options.width and options.depth; a keyword left None takes the
    library's default."""

def decode_batch(targets: Sequence[Provider], drafts: Sequence[Provider | None],
                 prompts: Sequence[ArrayLike], options: DecodeOptions, threads: int = 0, *,
                 strategy: Strategy = None, drafter: str | None = None, shape: str | None = None,
                 budget: int | None = None, min_gain: float | None = None,
                 verify_cost: Sequence[float] | None = None, ngram: int | None = None,
                 length: str | None = None, threshold: float | None = None,
                 draft_cost_ratio: float | None = None) -> list[DecodeResult]:
    """Result i equals decode(targets[i], drafts[i], prompts[i], options, sequence=i) with the
    same strategy or drafter keywords."""

class Decoder:
    def __init__(self, target: Provider, draft: Provider | None, options: DecodeOptions, *,
                 strategy: Strategy = None, drafter: str | None = None,
                 shape: str | None = None, budget: int | None = None,
                 min_gain: float | None = None, verify_cost: Sequence[float] | None = None,
                 ngram: int | None = None, length: str | None = None,
                 threshold: float | None = None, draft_cost_ratio: float | None = None) -> None:
        """A decoder of options.method, or of `strategy` or the drafter keywords (as
        decode's)."""
    def reset(self, prompt: ArrayLike, sequence: int = 0) -> None: ...
    def step(self) -> np.ndarray: ...
    def run(self) -> DecodeResult: ...
    def finished(self) -> bool: ...
    def generated(self) -> np.ndarray: ...
    def metrics(self) -> DecodeMetrics: ...
    def vocab_size(self) -> int: ...

class ReDrafterVerification(enum.IntEnum):
    EXACT = 0
    GREEDY = 1
    TYPICAL = 2
    PARITY = 3

class ReDrafterOptions:
    verification: ReDrafterVerification
    warp: Warp
    width: int
    depth: int
    typical: Any  # Typical
    max_new_tokens: int
    end_token: int
    seed: int
    def __init__(self, *, verification: ReDrafterVerification = ReDrafterVerification.EXACT,
                 warp: Warp = ..., width: int = 4, depth: int = 4, typical: Any = None,
                 max_new_tokens: int = 32, end_token: int = -1, seed: int = 0) -> None: ...
    def validate(self, vocab: int) -> None: ...

def decode_redrafter(target: Provider, head: ReDrafterHead, prompt: ArrayLike,
                     options: ReDrafterOptions, sequence: int = 0) -> DecodeResult: ...

class MarkovModel:
    def __init__(self, transition: ArrayLike) -> None: ...
    def vocab_size(self) -> int: ...
    def row(self, previous: int) -> np.ndarray: ...
    def next_probabilities(self, context: ArrayLike) -> np.ndarray: ...

class NGramModel:
    def __init__(self, *, vocab: int = 16, order: int = 2, concentration: float = 0.5,
                 seed: int = 1) -> None: ...
    @staticmethod
    def draft_of(target: NGramModel, noise: float, temperature: float = 1.0,
                 noise_seed: int = 0x5eed) -> NGramModel: ...
    def vocab_size(self) -> int: ...
    def order(self) -> int: ...
    def next_probabilities(self, context: ArrayLike) -> np.ndarray: ...

class ProviderOptions:
    hidden_size: int
    hidden_window: int
    hidden_seed: int
    hidden_probabilities: bool
    def __init__(self, *, hidden_size: int = 0, hidden_window: int = 4, hidden_seed: int = 0x41dde7,
                 hidden_probabilities: bool = False) -> None: ...

_Model = TypeVar("_Model", MarkovModel, NGramModel)

class _ToyProvider(Generic[_Model]):
    """Stub-only: what both toy providers bind (one C++ template in src/bind_toys.cpp)."""
    def __init__(self, model: _Model, options: ProviderOptions = ...) -> None: ...
    def vocab_size(self) -> int: ...
    def hidden_size(self) -> int: ...
    def context(self) -> np.ndarray: ...
    def committed_length(self) -> int: ...
    def calls(self) -> int: ...
    def evaluated_tokens(self) -> int: ...
    def reset_counters(self) -> None: ...
    model: Final[_Model]
    def reset(self, prompt: ArrayLike) -> None: ...
    def evaluate(self, batch: TreeBatch, logits: Array) -> None: ...
    def evaluate_with_hidden(self, batch: TreeBatch, logits: Array, hidden: Array) -> None: ...
    def commit(self, batch: TreeBatch, kept_nodes: ArrayLike, next: int) -> None: ...

class MarkovProvider(_ToyProvider[MarkovModel]): ...
class NGramProvider(_ToyProvider[NGramModel]): ...

def markov_head(draft: MarkovModel, hidden: int) -> ReDrafterHead: ...
