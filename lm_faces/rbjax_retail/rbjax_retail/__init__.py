"""rbjax's supermarket sessions for verifiers 0.4.0: ``vf-eval rbjax-retail`` loads this module by name.

The simulator is not in this package (nor is JAX): it runs in ``rbjax lm serve``, and the shared toolset
forwards the model's tool calls to it. See examples/lm_verifiers.md in the rbjax repository.
"""

from rbjax_retail.taskset import RetailTaskset

__all__ = ["RetailTaskset"]
