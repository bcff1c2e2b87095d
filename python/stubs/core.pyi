# Errors, random streams, warps and sampling (src/bind_core.cpp).
import enum
from typing import Any, Final, Generic, Sequence, TypeVar, Union

import numpy as np
import numpy.typing as npt

ArrayLike = Union[npt.ArrayLike, Any]  # NumPy arrays, buffers, torch tensors (__dlpack__), lists
Array = Any  # a NumPy array, or a torch tensor when an input was one

class Error(ValueError):
    """A bad argument: `argument` names it, `problem` says what is wrong."""
    argument: str
    problem: str

class Domain(enum.IntEnum):
    DRAFT = 1
    VERIFY = 2
    SAMPLE = 3
    USER = 15

class RandomStream:
    seed: int
    sequence: int
    position: int
    node: int
    domain: Domain
    def __init__(self, *, seed: int = 0, sequence: int = 0, position: int = 0, node: int = 0,
                 domain: Domain = Domain.VERIFY) -> None: ...
    def uniform(self, draw: int) -> float: ...
    def gumbel(self, draw: int) -> float: ...
    def at_node(self, node: int) -> RandomStream: ...
    def at_position(self, position: int) -> RandomStream: ...
    def in_domain(self, domain: Domain) -> RandomStream: ...
    def uniforms(self, count: int, first: int = 0) -> np.ndarray: ...
    def gumbels(self, count: int, first: int = 0) -> np.ndarray: ...

class Warp:
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    def __init__(self, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                 min_p: float = 0.0) -> None: ...
    def is_greedy(self) -> bool: ...
    def is_identity(self) -> bool: ...
    def validate(self, vocab: int) -> None: ...

def warp_logits(warp: Warp, logits: ArrayLike) -> Array: ...
def warp_probabilities(warp: Warp, probabilities: ArrayLike) -> Array: ...
def sample(probabilities: ArrayLike, u: float) -> int: ...
