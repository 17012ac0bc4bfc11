"""Batch sizes that keep compilations few: a batch of B stores runs padded to one of a few sizes."""

from __future__ import annotations


def batch_bucket(stores: int) -> int:
    """The padded batch for ``stores`` stores: the next power of two, at least 16 (a step of 16 stores costs a
    few milliseconds; a compilation tens of seconds). The extra rows copy the last store and their results are
    dropped (a store's results do not depend on its batch)."""
    return max(16, 1 << (max(stores, 1) - 1).bit_length())
