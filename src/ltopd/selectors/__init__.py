"""Training-free visual-token selectors behind one registry.

``select(name, inputs, k, **options)`` returns the sorted kept indices (length ``min(k, N)``);
``requirements(name)`` says which ``SelectionInputs`` fields a selector needs. Registered names:
cdpruner, divprune, fastv, dart, hiprune, random, uniform. ``cdpruner_dense`` (materialised kernel)
is exported for tests and benchmarks but is not in the registry.
"""

from . import controls, dart, divprune, fastv, hiprune  # noqa: F401  (register the selectors)
from .base import SELECTORS, SelectionInputs, keep_count, requirements, select
from .cdpruner import cdpruner, cdpruner_dense, relevance
from .memory import peak_allocated_bytes

__all__ = [
    "SELECTORS",
    "SelectionInputs",
    "cdpruner",
    "cdpruner_dense",
    "keep_count",
    "peak_allocated_bytes",
    "relevance",
    "requirements",
    "select",
]
