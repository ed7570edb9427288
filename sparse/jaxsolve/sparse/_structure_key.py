"""Which values an AMG structure serves: a digest of what of them the structure follows.

An AMG structure (splittings or aggregates, interpolation and coarse patterns; see
:mod:`._hierarchy`) is built from one set of concrete values.  Another operator on the
same pattern — other physics on one mesh — needs a structure of its own, while the next
Newton or time step of the same problem usually does not.  :func:`values_key` tells them
apart: it digests, on the device and in one pass over the entries, what of the values
the structure's host build depends on,

* for classical AMG on a scalar system, the strong couplings of the finest level (the
  graph the C/F splitting and the interpolation pattern are computed from; AHAT or ALL,
  as :func:`._classical.strong_couplings`) and whether every diagonal entry is positive
  (coarsening stops early on an indefinite problem; :func:`._hierarchy.build_structure`);
* for aggregation AMG and block systems, whose matchings follow the order of every
  coupling's magnitude, the values themselves (their bits);
* for aggregation set up on the device (``jaxsolve_setup_location`` ``"DEVICE"``), the
  order of every node's couplings on the finest level, ties included, which is all of the
  values that its parallel matching's first round follows
  (:func:`._device_setup.values_key`, computed there on the device).

So a structure is kept for values with the same key and built anew for others: the
same operator, or one whose finest strong couplings are unchanged (classical AMG),
reuses its structure and compiles nothing; a different one gets its own.  The coarser
levels' splittings and the truncation of the interpolation also follow the values; a
key equal for values that would coarsen differently there keeps the first values'
structure, which still gives a correct hierarchy (Galerkin products of the new values),
as AmgX's ``structure_reuse_levels`` does.

The digest is two 32-bit sums of hashed entries, so different couplings collide with a
probability of about ``2⁻⁶⁴``.  Values on a GPU are digested there, by a program compiled
once per size class (:func:`values_digest`); a checked solve does not wait for it before
its setup, but takes the pattern's latest structure and has its own program compare the
digests (:attr:`._setup.System.setup`), while a first setup, and a solve that reads no
status back, read the digest first.  Values on the CPU are in host memory already: they are digested there (a
64-bit BLAKE2 hash of the same words: the strong couplings, found by the host build's own
kernel, :func:`._classical.strong_couplings`, or the values' bytes), which compiles nothing
(the compiled digest took half a second of a first solve's CPU time at 100 000 rows, most
of it the cumulative sum that numbers each entry's row).  The two kinds of key differ:
values moved between the CPU and a GPU get a structure of their own.
"""

from __future__ import annotations

import functools
import hashlib

import jax
import jax.numpy as jnp
import numpy as np

from . import _classical
from ._compiled_programs import CompiledPrograms
from ._compiler_options import COMPILER_OPTIONS
from ._config import AMGConfig
from ._csr_arrays import CsrArrays
from ._hierarchy import HierarchyStructure, in_host_memory

# The seeds of the digest's two sums.
_SEEDS = (0x9E3779B9, 0x7F4A7C15)
# The compiled digests, by pattern size, rule and kind of operands.
DIGESTS = CompiledPrograms("structure key digest")


def values_key(structure: HierarchyStructure, values: jax.Array) -> str:
    """The key of ``values`` for structures of ``structure``'s pattern and configuration.

    Args:
      structure: any structure built for the pattern and AMG configuration (from these
        values or others): its finest pattern's device arrays are read.
      values: ``(nnz,)`` concrete values on that pattern, or padded with zeros to the
        nonzeros of ``structure``'s finest level (its size class): the same key, from a
        digest compiled once for the class.

    Returns:
      A hex digest, equal for values on one kind of device that :mod:`this module
      <._structure_key>` says share a structure.
    """
    if in_host_memory(values):
        return _host_key(structure, np.asarray(values))
    return digest_key(values_digest(structure, values))


def values_digest(structure: HierarchyStructure, values: jax.Array) -> jax.Array:
    """The ``(2,)`` uint32 digest of concrete ``values`` on a device (see
    :func:`values_key`), left there: computed by a program compiled once per size class,
    and not waited for."""
    arrays = structure.arrays
    finest = arrays.levels[0].a if arrays.levels else arrays.coarsest
    operands = (values, finest.indices, finest.indptr,
                arrays.levels[0].diagonal if arrays.levels else arrays.coarsest_diagonal)
    true_rows = (structure.levels[0].a if structure.levels else structure.coarsest).n_rows
    statics = (finest.n_rows if values.shape[0] == finest.indices.shape[0] else true_rows,
               _strength_rule(structure.config))
    kind = (statics, *((a.shape, a.dtype, a.sharding) for a in operands))
    # Compiled, not called through jit: an executable runs when it is called, also while
    # a caller's jit traces a solve on these concrete values.
    compiled = DIGESTS.get(
        kind, lambda: _digest.lower(*operands, *statics).compile(COMPILER_OPTIONS))
    return compiled(*operands)


def digest_key(digest: jax.Array | np.ndarray) -> str:
    """The key of a digest of :func:`values_digest` (read from the device)."""
    return "".join(f"{int(word):08x}" for word in np.asarray(digest))


def key_digest(key: str) -> np.ndarray:
    """The ``(2,)`` uint32 digest whose key is ``key`` (:func:`digest_key`'s inverse); of a
    host key (values in host memory), a digest that values on a device have only by a
    collision (about ``2⁻⁶⁴``)."""
    return np.array([int(key[:8], 16), int(key[8:16], 16)], np.uint32)


def _host_key(structure: HierarchyStructure, values: np.ndarray) -> str:
    """The key of ``values`` (possibly padded) in host memory: a hash of what
    :func:`_digest` digests."""
    finest = structure.levels[0].a if structure.levels else structure.coarsest
    values = np.ascontiguousarray(values[:finest.nnz])
    if _strength_rule(structure.config) is None:
        words = values.view(np.uint8)
    else:
        strong = _classical.strong_couplings(finest, values, structure.config)
        positive = np.all(np.real(values[finest.diagonal_positions()]) > 0)
        words = np.append(np.packbits(strong), np.uint8(positive))
    return hashlib.blake2b(words, digest_size=8).hexdigest()


def _strength_rule(config: AMGConfig) -> tuple | None:
    """The strength criterion the digest reproduces, or None to digest the values."""
    if config.algorithm != "CLASSICAL" or config.block_dim > 1:
        return None
    return (config.strength, config.strength_threshold, config.max_row_sum)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _digest(values: jax.Array, indices: jax.Array, indptr: jax.Array, diagonal: jax.Array,
            n_rows: int, rule: tuple | None) -> jax.Array:
    """``(2,)`` uint32: the digest of ``values``' strong couplings (``rule``) or bits.

    The index arrays may be padded past the pattern's ``n_rows`` rows and ``nnz`` entries
    (a structure's are padded to its size classes): only their true parts are read. The
    rows and ``values`` may be padded too (empty rows, no stored diagonal; zeros past the
    last row's end): the digest reads the entries before that end alone.
    """
    nnz = values.shape[0]
    indices, indptr, diagonal = indices[:nnz], indptr[:n_rows + 1], diagonal[:n_rows]
    count = indptr[-1]  # the entries of the rows: padding entries lie past
    if rule is None:
        parts = (jnp.real(values), jnp.imag(values)) if jnp.iscomplexobj(values) else (values,)
        words = jnp.concatenate([jax.lax.bitcast_convert_type(part, jnp.uint32).reshape(nnz, -1)
                                 for part in parts], axis=1).ravel()
        flag = jnp.uint32(0)
    else:
        rows = CsrArrays(values, indices, indptr).row_ids
        words = _strong(values, indices, rows, diagonal, n_rows, rule).astype(jnp.uint32)
        flag = jnp.all((diagonal < 0) | (jnp.real(values[diagonal]) > 0)).astype(jnp.uint32)
    # the words of the first `count` entries (one or more words an entry)
    return summed_digest(words, flag, count.astype(jnp.uint32) * (words.shape[0] // max(nnz, 1)))


def summed_digest(words: jax.Array, flag: jax.Array, counted: jax.Array) -> jax.Array:
    """``(2,)`` uint32: two sums of the hashed ``(position, word)`` pairs of the first
    ``counted`` words, and the flag."""
    positions = jnp.arange(words.shape[0], dtype=jnp.uint32)
    return jnp.stack([jnp.sum(jnp.where(positions < counted,
                                        _mixed(_mixed(positions + seed) ^ words), 0),
                              dtype=jnp.uint32)
                      ^ (flag * _mixed(seed))
                      for seed in map(jnp.uint32, _SEEDS)])


def _strong(values: jax.Array, indices: jax.Array, rows: jax.Array, diagonal: jax.Array,
            n_rows: int, rule: tuple) -> jax.Array:
    """``(nnz,)`` bool: classical AMG's strong couplings (the criterion of
    :func:`._classical_kernels.classical_strength`), in the values' precision."""
    strength, threshold, max_row_sum = rule
    off_diagonal = indices != rows
    if strength == "ALL":
        return off_diagonal & (values != 0)
    d = values[diagonal]
    magnitude = jnp.abs(d)
    divisor = jnp.where(magnitude > 0, magnitude, 1).astype(values.dtype)
    phase = jnp.where(magnitude > 0, jnp.conj(d) / divisor, 1)
    coupling = -jnp.real(values * phase[rows])
    largest = jax.ops.segment_max(jnp.where(off_diagonal, coupling, -jnp.inf), rows,
                                  num_segments=n_rows, indices_are_sorted=True)
    row_sum = jax.ops.segment_sum(values, rows, num_segments=n_rows, indices_are_sorted=True)
    dependent = (largest > 0) & (jnp.abs(row_sum) <= max_row_sum * magnitude)
    return (dependent[rows] & off_diagonal & (coupling > 0)
            & (coupling >= (threshold * largest)[rows]))


def _mixed(x: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finalizer: every input bit flips about half the output bits."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)
