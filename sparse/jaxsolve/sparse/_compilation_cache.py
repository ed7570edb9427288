"""JAX's persistent compilation cache, switched on for a process's first solve.

A solve's programs (the Krylov loop with its cycle, the numeric setup) are compiled by XLA
on the first call for each pattern's level sizes: seconds, in every new process. JAX can
keep compiled programs on disk and load them instead (its *persistent compilation cache*),
but by default it writes only programs that took at least a second to compile, and it is
off until a directory is set. :func:`enable_compilation_cache` sets the directory and
writes every program, so that a second process solving the same problem compiles nothing.

The environment variable ``JAXSOLVE_COMPILATION_CACHE`` does the same when
``jaxsolve.sparse`` is imported: a directory, or ``1`` for the default one.

The switch is JAX's and process-wide: it caches the caller's other programs too. As JAX's
own documentation warns, the cache is trusted: a directory others can write to lets them
run code in your process.
"""

from __future__ import annotations

import os
import pathlib

import jax
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

ENVIRONMENT_VARIABLE = "JAXSOLVE_COMPILATION_CACHE"


def default_cache_dir() -> pathlib.Path:
    """``$XDG_CACHE_HOME/jaxsolve/compilation`` (``~/.cache/jaxsolve/compilation``)."""
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "jaxsolve" / "compilation"


def enable_compilation_cache(path: str | os.PathLike[str] | None = None, *,
                             min_compile_time_secs: float = 0.0) -> pathlib.Path:
    """Keeps XLA's compiled programs on disk, for the next process's first solve.

    Sets JAX's ``jax_compilation_cache_dir`` to ``path`` (created if missing),
    ``jax_persistent_cache_min_compile_time_secs`` to ``min_compile_time_secs`` (JAX's
    default, 1 s, would leave out most of a solve's programs, which compile in 0.05–1 s
    each but add up to seconds) and ``jax_persistent_cache_min_entry_size_bytes`` to
    ``-1`` (no size limit). Programs compiled later in this process are written there and
    read back, instead of compiled, by any process with the same settings, JAX version and
    devices. Setting ``JAXSOLVE_COMPILATION_CACHE`` before importing ``jaxsolve.sparse``
    calls this for you.

    Args:
      path: the cache directory; None for :func:`default_cache_dir`'s.
      min_compile_time_secs: programs that compile faster than this are not written.

    Returns:
      The cache directory, absolute.

    Raises:
      ValueError: if ``min_compile_time_secs`` is negative.

    Examples:
      >>> import tempfile
      >>> import jax
      >>> from jaxsolve import sparse
      >>> where = sparse.enable_compilation_cache(tempfile.mkdtemp())
      >>> jax.config.jax_compilation_cache_dir == str(where)
      True
    """
    if not min_compile_time_secs >= 0:
        raise ValueError("enable_compilation_cache: min_compile_time_secs must be >= 0, "
                         f"got {min_compile_time_secs!r}.")
    directory = pathlib.Path(default_cache_dir() if path is None else path).expanduser()
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_secs)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # JAX decides once per process whether the cache is in use, at its first compilation;
    # a reset makes it look at the new directory.
    _jax_cache.reset_cache()
    return directory


def enable_from_environment() -> pathlib.Path | None:
    """:func:`enable_compilation_cache` as ``JAXSOLVE_COMPILATION_CACHE`` asks, if set.

    An empty value or ``0`` leaves the cache as it is; ``1`` means the default directory.
    """
    value = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if value in ("", "0"):
        return None
    return enable_compilation_cache(None if value == "1" else value)
