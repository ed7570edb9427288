"""AMG configurations the sparse benchmarks share, imported as `amg_configs` from beside them."""

LEAN = {"solver": "AMG", "algorithm": "CLASSICAL", "selector": "PMISC", "aggressive_levels": 1,
        "interp_max_elements": 4}
"""Issue 33's leanest classical hierarchy, a preconditioner scope: PMISC with one aggressive
level.  On 3D Poisson 128³ it keeps 2.9 × A and its PCG is the fastest solve measured (7.9 ms,
14 iterations, on an H200).  Four interpolation weights a row, the default's before it took
six: with the aggressive level six take the same 14 iterations there, 2 % more bytes each."""
