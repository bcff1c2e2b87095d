"""Drop-in adapters: functions that take the tensors inference engines pass to their own
speculative samplers, with the engines' argument names, shapes and output conventions, and verify
with specdec. `specdec.compat.vllm` (vLLM v1's RejectionSampler), `specdec.compat.flashinfer`
(FlashInfer's chain_speculative_sampling) and `specdec.compat.sglang` (sgl-kernel's
tree_speculative_sampling_target_only and verify_tree_greedy); docs/engines.md says what each
expects and what differs.
"""

from . import flashinfer, sglang, vllm  # noqa: F401

__all__ = ["flashinfer", "sglang", "vllm"]
