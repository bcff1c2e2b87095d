"""Drop-in adapters: functions that take the tensors inference engines pass to their own
speculative samplers, with the engines' argument names, shapes and output conventions, and verify
with specdec. `specdec.compat.vllm` (vLLM v1's RejectionSampler) and `specdec.compat.flashinfer`
(FlashInfer's chain_speculative_sampling); docs/engines.md says what each expects and what differs.
"""

from . import flashinfer, vllm  # noqa: F401

__all__ = ["flashinfer", "vllm"]
