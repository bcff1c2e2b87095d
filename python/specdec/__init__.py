"""Speculative decoding algorithms for LLM inference engines.

The Python face of the specdec C++ library: the same functions under the same names, the same
Philox random streams (a seed gives the same tokens in C++, CUDA and Python), and the same errors
(`specdec.Error`, a ValueError naming the argument and the bad value).

Arrays: NumPy arrays, anything with the buffer protocol, and PyTorch tensors (anything with
``__dlpack__``) are read in place when C-contiguous. Logits may be float32, float16 or bfloat16;
tokens int32 or int64. Outputs are NumPy arrays for NumPy inputs and torch tensors for torch
inputs. See docs/python.md for the tour and the name mapping.
"""

from ._specdec import *  # noqa: F401,F403
from ._specdec import Error, RandomStream, Warp  # noqa: F401  (named for readers and linters)
from .providers import LogitsProvider  # noqa: F401

__version__ = "0.1.0"
