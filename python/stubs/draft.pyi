# Drafters, their batched levels and the ReDrafter head (src/bind_draft.cpp). A draft_rows
# callable is draft_rows(tree: DraftTree, nodes: np.ndarray, rows: np.ndarray) -> None, filling
# the writable float32 [len(nodes), V] `rows` with the draft probabilities after each node (-1 =
# the root).
from os import PathLike
from typing import Callable

DraftRows = Callable[[DraftTree, np.ndarray, np.ndarray], None]

def sample_iid(probabilities: ArrayLike, stream: RandomStream, k: int,
               first_draw: int = 0) -> Array: ...
def gumbel_top_k(log_weights: ArrayLike, k: int, stream: RandomStream,
                 first_draw: int = 0) -> tuple[Array, Array]: ...
def gumbel_top_k_probabilities(probabilities: ArrayLike, k: int, stream: RandomStream,
                               first_draw: int = 0) -> tuple[Array, Array]: ...

class RowKind(enum.IntEnum):
    LOG_WEIGHTS = 0
    PROBABILITIES = 1

def gumbel_top_k_batch(kind: RowKind, rows: ArrayLike, k: int,
                       streams: Sequence[RandomStream]) -> tuple[Array, Array, Array]: ...
def stochastic_beam_level_batch(draft_rows: ArrayLike, beam_counts: ArrayLike, nodes: ArrayLike,
                                log_probs: ArrayLike, scores: ArrayLike,
                                streams: Sequence[RandomStream]
                                ) -> tuple[Array, Array, Array, Array, Array]: ...

class DraftedTree:
    tree: Final[DraftTree]
    vocab: Final[int]
    def size(self) -> int: ...
    def __len__(self) -> int: ...
    def row_count(self) -> int: ...
    def has_row(self, node: int) -> bool: ...
    def row(self, node: int) -> np.ndarray: ...
    row_index: Final[np.ndarray]
    rows: Final[np.ndarray]
    log_probs: Final[np.ndarray]
    scores: Final[np.ndarray]

def draft_iid_chains(k: int, depth: int, vocab: int, draft_rows: DraftRows,
                     stream: RandomStream) -> DraftedTree: ...
def draft_rsd_c(branching: Sequence[int], vocab: int, draft_rows: DraftRows,
                stream: RandomStream) -> DraftedTree: ...
def draft_rsd_s(width: int, depth: int, vocab: int, draft_rows: DraftRows,
                stream: RandomStream) -> DraftedTree: ...

class BeamMode(enum.IntEnum):
    DETERMINISTIC = 0
    SAMPLING = 1

class BeamSearchResult:
    tokens: Final[np.ndarray]
    prefix_log_probs: Final[np.ndarray]
    nodes: Final[np.ndarray]

def beam_search(width: int, length: int, vocab: int, draft_rows: DraftRows, mode: BeamMode,
                stream: RandomStream) -> tuple[DraftedTree, BeamSearchResult]: ...

class ReDrafterConfig:
    hidden: int
    exit_dim: int
    vocab: int
    num_layers: int
    rnn: bool
    top_k: int
    def __init__(self, *, hidden: int = 0, exit_dim: int = 0, vocab: int = 0, num_layers: int = 1,
                 rnn: bool = True, top_k: int = 50) -> None: ...

class TensorDType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2

class ReDrafterHead:
    config: Final[ReDrafterConfig]
    @staticmethod
    def random(config: ReDrafterConfig, seed: int, scale: float = 0.5) -> ReDrafterHead: ...
    def validate(self) -> None: ...
    embedding: Final[np.ndarray]
    vocab_proj: Final[np.ndarray]

def load_redrafter_head(path: str | PathLike, embedding: ArrayLike | None = None,
                        top_k: int = 50) -> ReDrafterHead: ...
def save_redrafter_head(path: str | PathLike, head: ReDrafterHead,
                        dtype: TensorDType = TensorDType.F32) -> None: ...
def redrafter_head_from_tensors(tensors: dict[str, ArrayLike], embedding: ArrayLike | None = None,
                                top_k: int = 50) -> ReDrafterHead: ...
def redrafter_head_tensors(head: ReDrafterHead) -> dict[str, np.ndarray]: ...
def read_safetensors(path: str | PathLike) -> dict[str, np.ndarray]: ...
def write_safetensors(path: str | PathLike, tensors: dict[str, ArrayLike],
                      dtype: TensorDType = TensorDType.F32) -> None: ...
def redrafter_step(head: ReDrafterHead, hidden: ArrayLike, state: ArrayLike,
                   token: int) -> tuple[Array, Array]: ...

class ReDrafterBeams:
    width: Final[int]
    length: Final[int]
    tokens: Final[np.ndarray]
    log_probs: Final[np.ndarray]
    beam_log_probs: Final[np.ndarray]

def redrafter_beam_search(head: ReDrafterHead, hidden: ArrayLike, init_token: int, width: int,
                          length: int) -> ReDrafterBeams: ...
def redrafter_stochastic_beam_search(head: ReDrafterHead, hidden: ArrayLike, init_token: int,
                                     width: int, depth: int, stream: RandomStream) -> DraftedTree: ...
