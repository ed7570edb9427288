"""Matrices, references and checks shared by native_test.py and native_gpu_test.py.

The references are written from the definitions, independently of the native code: SciPy's
``A @ x`` for the product, and for derivatives a gather and a sorted segment sum in plain JAX.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax.test_util import check_grads

from jaxsolve.sparse._csr_arrays import CsrArrays
from jaxsolve.sparse._ffi_primitives import csr_update_unchecked

DTYPES = [np.dtype(t) for t in (np.float32, np.complex64, np.float64, np.complex128)]
DTYPE_IDS = [d.name for d in DTYPES]


def use_dtype(dtype: np.dtype) -> None:
    """Turns x64 on for a 64-bit dtype (the sparse conftest restores the setting)."""
    jax.config.update("jax_enable_x64", np.dtype(dtype) in (np.float64, np.complex128))


def tolerance(dtype: np.dtype) -> dict:
    single = np.dtype(dtype) in (np.float32, np.complex64)
    return {"rtol": 2e-5, "atol": 2e-5} if single else {"rtol": 1e-12, "atol": 1e-12}


def random_csr(shape, dtype, density=0.3, seed=0, empty_rows=()) -> scipy.sparse.csr_matrix:
    """A random CSR matrix with int32 indices, rows ``empty_rows`` emptied."""
    rng = np.random.default_rng(seed)
    matrix = scipy.sparse.random(*shape, density=density, format="lil", rng=rng)
    for row in empty_rows:
        matrix.rows[row], matrix.data[row] = [], []
    matrix = matrix.tocsr()
    if np.issubdtype(dtype, np.complexfloating):
        matrix = matrix + 1j * matrix.multiply(rng.standard_normal(shape))
    matrix = scipy.sparse.csr_matrix(matrix.astype(dtype))
    matrix.indices, matrix.indptr = matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)
    return matrix


def random_array(shape, dtype, seed=1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sample = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        sample = sample + 1j * rng.standard_normal(shape)
    return sample.astype(dtype)


def poisson(n: int, dim: int, dtype=np.float64) -> scipy.sparse.csr_matrix:
    """The ``dim``-dimensional 2nd-order Laplacian on an ``n^dim`` grid (Kronecker sum)."""
    line = scipy.sparse.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    eye = scipy.sparse.identity(n)
    matrix = line
    for _ in range(dim - 1):
        matrix = scipy.sparse.kron(matrix, eye) + scipy.sparse.kron(
            scipy.sparse.identity(matrix.shape[0]), line)
    matrix = scipy.sparse.csr_matrix(matrix.astype(dtype))
    matrix.indices, matrix.indptr = matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)
    return matrix


def reference_matvec(values, indices, indptr, x, *, n_rows):
    """``A x`` in plain JAX from the definition: gathered ``x``, rows summed in order."""
    rows = np.repeat(np.arange(n_rows), np.diff(indptr))
    terms = values.reshape(-1, *(1,) * (x.ndim - 1)) * x[indices]
    return jax.ops.segment_sum(terms, rows, num_segments=n_rows, indices_are_sorted=True)


def kernel_calls(f, *args) -> int:
    """How many times the compiled ``f(*args)`` calls the native product."""
    return jax.jit(f).lower(*args).as_text().count("@jaxsolve_sparse_csr_matvec(")


# ----------------------------------------------------------------------------------------
# Checks of csr_matvec on one device, run on the CPU by native_test.py and on a GPU by
# native_gpu_test.py. `csr_matvec` is passed in: the test files import it.


def check_against_scipy(csr_matvec, device, matrix, x):
    """``csr_matvec`` on ``device`` equals SciPy's ``matrix @ x``, in ``x``'s shape and dtype."""
    y = csr_matvec(jax.device_put(matrix.data, device), matrix.indices, matrix.indptr,
                   jax.device_put(x, device), n_rows=matrix.shape[0])
    assert y.devices() == {device}
    assert y.shape == (matrix.shape[0], *x.shape[1:]) and y.dtype == x.dtype
    # Rounding grows with a row's terms, not its sum (which may cancel): scale atol by them.
    scale = max(1.0, float(np.max(abs(matrix) @ np.abs(x), initial=0)))
    bounds = tolerance(x.dtype)
    np.testing.assert_allclose(np.asarray(y), matrix @ x, rtol=bounds["rtol"],
                               atol=bounds["atol"] * scale)


def check_jit(csr_matvec, device, matrix, x):
    """Jitted, with the pattern as NumPy constants and as traced int32 arguments."""
    n_rows = matrix.shape[0]
    values, x_on = jax.device_put(matrix.data, device), jax.device_put(x, device)
    as_constants = jax.jit(lambda v, x: csr_matvec(v, matrix.indices, matrix.indptr, x,
                                                   n_rows=n_rows))
    as_arguments = jax.jit(lambda v, i, p, x: csr_matvec(v, i, p, x, n_rows=n_rows))
    expected = matrix @ x
    np.testing.assert_allclose(np.asarray(as_constants(values, x_on)), expected,
                               **tolerance(x.dtype))
    pattern = [jax.device_put(a, device) for a in (matrix.indices, matrix.indptr)]
    np.testing.assert_allclose(np.asarray(as_arguments(values, *pattern, x_on)), expected,
                               **tolerance(x.dtype))


def check_vmap_over_x(csr_matvec, device, matrix, xs):
    """vmap over right-hand sides: SciPy's products, from a single kernel call."""
    def f(x):
        return csr_matvec(values, matrix.indices, matrix.indptr, x, n_rows=matrix.shape[0])

    values, xs_on = jax.device_put(matrix.data, device), jax.device_put(xs, device)
    ys = jax.vmap(f)(xs_on)
    np.testing.assert_allclose(np.asarray(ys), np.stack([matrix @ x for x in xs]),
                               **tolerance(xs.dtype))
    assert kernel_calls(jax.vmap(f), xs_on) == 1


def check_vmap_over_values(csr_matvec, device, matrix, scales, x):
    """vmap over values, alone and with x: a batch of systems on one pattern, one call."""
    def f(v, x):
        return csr_matvec(v, matrix.indices, matrix.indptr, x, n_rows=matrix.shape[0])

    values = jax.device_put(np.stack([s * matrix.data for s in scales]), device)
    xs = np.stack([x * (i + 1) for i in range(len(scales))])
    x_on, xs_on = jax.device_put(x, device), jax.device_put(xs, device)
    np.testing.assert_allclose(np.asarray(jax.vmap(f, (0, None))(values, x_on)),
                               np.stack([s * (matrix @ x) for s in scales]),
                               **tolerance(x.dtype))
    np.testing.assert_allclose(np.asarray(jax.vmap(f)(values, xs_on)),
                               np.stack([s * (matrix @ x) for s, x in zip(scales, xs)]),
                               **tolerance(x.dtype))
    assert kernel_calls(jax.vmap(f, (0, None)), values, x_on) == 1
    assert kernel_calls(jax.vmap(f), values, xs_on) == 1


def check_nested_vmap(csr_matvec, device, matrix, scales, xs):
    """Nested vmaps over values and x, either way round: every pairing, one call."""
    def f(v, x):
        return csr_matvec(v, matrix.indices, matrix.indptr, x, n_rows=matrix.shape[0])

    values = jax.device_put(np.stack([s * matrix.data for s in scales]), device)
    xs_on = jax.device_put(xs, device)
    expected = np.stack([[s * (matrix @ x) for x in xs] for s in scales])
    values_outside = jax.vmap(jax.vmap(f, (None, 0)), (0, None))
    x_outside = jax.vmap(jax.vmap(f, (0, None)), (None, 0))
    np.testing.assert_allclose(np.asarray(values_outside(values, xs_on)), expected,
                               **tolerance(xs.dtype))
    np.testing.assert_allclose(np.asarray(x_outside(values, xs_on)), expected.swapaxes(0, 1),
                               **tolerance(xs.dtype))
    assert kernel_calls(values_outside, values, xs_on) == 1


def check_derivatives(csr_matvec, device, matrix, x):
    """jax.jvp and jax.grad in values and x equal those of the plain-JAX reference."""
    indices, indptr, n_rows = matrix.indices, matrix.indptr, matrix.shape[0]
    values, x_on = jax.device_put(matrix.data, device), jax.device_put(x, device)
    d_values = jax.device_put(random_array(matrix.data.shape, x.dtype, seed=5), device)
    d_x = jax.device_put(random_array(x.shape, x.dtype, seed=6), device)
    weights = jax.device_put(random_array((n_rows, *x.shape[1:]), x.dtype, seed=7), device)

    def ours(v, x):
        return csr_matvec(v, indices, indptr, x, n_rows=n_rows)

    def theirs(v, x):
        return reference_matvec(v, indices, indptr, x, n_rows=n_rows)

    def loss(product):
        return lambda v, x: jnp.real(jnp.vdot(weights, product(v, x)))

    tol = tolerance(x.dtype)
    for primals, tangents in [((values, x_on), (d_values, d_x)),
                              ((values, x_on), (d_values, jnp.zeros_like(d_x)))]:
        y, dy = jax.jvp(ours, primals, tangents)
        y_ref, dy_ref = jax.jvp(theirs, primals, tangents)
        np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), **tol)
        np.testing.assert_allclose(np.asarray(dy), np.asarray(dy_ref), **tol)
    grads = jax.grad(loss(ours), argnums=(0, 1))(values, x_on)
    grads_ref = jax.grad(loss(theirs), argnums=(0, 1))(values, x_on)
    for g, g_ref in zip(grads, grads_ref):
        assert g.devices() == {device}
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), **tol)
    if x.dtype in (np.float64, np.complex128):  # finite differences need the precision
        check_grads(ours, (values, x_on), order=2, modes=("fwd", "rev"))


# ----------------------------------------------------------------------------------------
# Checks of csr_product_values (the sparse product's values on fixed patterns), run on the
# CPU by native_test.py and on a GPU by native_gpu_test.py; the pattern of C comes from
# spgemm_symbolic, both passed in by the test files.


def product_operands(device, a, b, c_indptr, c_indices):
    """``A``, ``B`` (SciPy CSR) and ``C``'s pattern as the kernel's operands on ``device``."""
    def put(x, dtype=None):
        return jax.device_put(np.asarray(x, dtype), device)

    def csr(m):
        return CsrArrays(put(m.data), put(m.indices, np.int32), put(m.indptr, np.int32))

    return csr(a), csr(b), put(c_indices, np.int32), put(c_indptr, np.int32)


def check_csr_product(csr_product_values, spgemm_symbolic, device, a, b):
    """The product's values on ``device`` equal SciPy's ``a @ b`` on spgemm's pattern."""
    use_dtype(a.dtype)
    c = spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, b.shape[1])
    values = csr_product_values(*product_operands(device, a, b, c.indptr, c.indices),
                                n_cols=b.shape[1])
    assert values.devices() == {device} and values.dtype == a.dtype
    ours = scipy.sparse.csr_matrix((np.asarray(values), c.indices, c.indptr),
                                   (a.shape[0], b.shape[1]))
    # Rounding grows with the magnitudes summed, not the sum (which may cancel).
    scale = max(1.0, float(np.max((abs(a) @ abs(b)).data, initial=0)))
    error = float(np.max(np.abs((ours - a @ b).data), initial=0))
    assert error <= tolerance(a.dtype)["atol"] * scale, error
    return c


def check_csr_product_vmap(csr_product_values, spgemm_symbolic, device, a, b):
    """Under vmap over ``A``'s values, ``B``'s or both, one kernel call per batch.

    Each system's values equal the unbatched call's bit for bit (the sums run in one
    order), whether the batch's systems share ``A`` or ``B`` or not, and under nested vmap.
    """
    use_dtype(a.dtype)
    c = spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, b.shape[1])
    a_arrays, b_arrays, c_indices, c_indptr = product_operands(device, a, b, c.indptr,
                                                               c.indices)
    scales = jax.device_put(np.array([1.0, -2.0, 0.5], a.dtype), device)

    def product(a_values, b_values):
        return csr_product_values(a_arrays._replace(values=a_values),
                                  b_arrays._replace(values=b_values), c_indices, c_indptr,
                                  n_cols=b.shape[1])

    def one(s, t):
        return product(s * a_arrays.values, t * b_arrays.values)

    expected = np.stack([np.asarray(one(s, t)) for s in scales for t in scales])
    cases = {
        "A": (jax.vmap(one, (0, None)), (scales, scales[0]), expected[0::3]),
        "B": (jax.vmap(one, (None, 0)), (scales[0], scales), expected[:3]),
        "both": (jax.vmap(one), (scales, scales), expected[0::4]),
        "nested": (jax.vmap(jax.vmap(one, (None, 0)), (0, None)), (scales, scales),
                   expected.reshape(3, 3, -1)),
    }
    for name, (batched, args, want) in cases.items():
        np.testing.assert_array_equal(np.asarray(batched(*args)), want, err_msg=name)
        hlo = jax.jit(batched).lower(*args).as_text()
        # One call for the whole batch: no loop of calls (vmap's sequential fallback).
        assert hlo.count("jaxsolve_sparse_csr_product") == 1 and "while" not in hlo, name


def product_missing_a_column(spgemm_symbolic, a, b):
    """C's pattern with its first row's last column left out, and that row."""
    c = spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, b.shape[1])
    row = int(np.flatnonzero(np.diff(c.indptr))[0])
    drop = c.indptr[row + 1] - 1
    indptr = c.indptr - (np.arange(c.indptr.size) > row)
    return indptr, np.delete(c.indices, drop), row


# ----------------------------------------------------------------------------------------
# The product's update (csr_update_unchecked): base + weight (rhs ∓ A x), on one device.


def check_update(device, matrix, x, seed=7, derivatives=True):
    """Every update the cycle uses equals its unfused form from SciPy's product, in one
    kernel call, plain, under vmap over right-hand sides and over values (with their
    weights), and (with ``derivatives``) its derivatives equal those of the unfused form.

    The derivatives are plain JAX (a gather and a segment sum), the same on every device;
    on the GPU they are checked on small matrices only: JAX 0.11.2's XLA crashes (a
    segmentation fault) compiling the segment sum's scatter of an eager ``jax.jvp`` at
    tens of thousands of entries.
    """
    n_rows = matrix.shape[0]
    rhs, base = (random_array((n_rows, *x.shape[1:]), x.dtype, seed=s) for s in (seed, seed + 1))
    weight = random_array(n_rows, x.dtype, seed=seed + 2)
    indices, indptr = (jax.device_put(a, device) for a in (matrix.indices, matrix.indptr))
    on = functools.partial(jax.device_put, device=device)
    product = matrix @ x
    w = weight[:, None] if x.ndim == 2 else weight
    cases = [  # (update, expected)
        ({"rhs": rhs, "subtract": True}, rhs - product),
        ({"base": base}, base + product),
        ({"rhs": rhs, "weight": weight, "base": base, "subtract": True},
         base + w * (rhs - product)),
        ({"weight": weight}, w * product),
        ({"weight": weight, "base": base, "subtract": True}, base - w * product),
    ]
    scale = max(1.0, float(np.max(abs(matrix) @ np.abs(x), initial=0)))
    bounds = tolerance(x.dtype)
    for update, expected in cases:
        operands = {k: on(v) if isinstance(v, np.ndarray) else v for k, v in update.items()}
        y = csr_update_unchecked(on(matrix.data), indices, indptr, on(x), **operands)
        assert y.devices() == {device} and y.shape == expected.shape
        np.testing.assert_allclose(np.asarray(y), expected, rtol=bounds["rtol"],
                                   atol=bounds["atol"] * scale * 4)

    def sweep(values, x, rhs, weight, base):
        return csr_update_unchecked(values, indices, indptr, x, rhs=rhs, weight=weight,
                                    base=base, subtract=True)

    operands = [on(a) for a in (matrix.data, x, rhs, weight, base)]
    # vmap over right-hand sides (x, rhs and base) and over values with their weights
    xs, rhss, bases = (np.stack([a, 2 * a, -a]) for a in (x, rhs, base))
    over_columns = jax.vmap(sweep, (None, 0, 0, None, 0))
    got = over_columns(operands[0], on(xs), on(rhss), operands[3], on(bases))
    want = np.stack([b + w * (r - matrix @ c) for c, r, b in zip(xs, rhss, bases)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=bounds["rtol"],
                               atol=bounds["atol"] * scale * 8)
    assert kernel_calls(over_columns, operands[0], on(xs), on(rhss), operands[3],
                        on(bases)) == 1
    values_s, weights_s = np.stack([matrix.data, 3 * matrix.data]), np.stack([weight, -weight])
    over_values = jax.vmap(sweep, (0, None, None, 0, None))
    got = over_values(on(values_s), *operands[1:3], on(weights_s), operands[4])
    want = np.stack([base + (s * w) * (rhs - t * product) for s, t in ((1, 1), (-1, 3))])
    np.testing.assert_allclose(np.asarray(got), want, rtol=bounds["rtol"],
                               atol=bounds["atol"] * scale * 8)
    assert kernel_calls(over_values, on(values_s), *operands[1:3], on(weights_s),
                        operands[4]) == 1

    if not derivatives:
        return

    def unfused(values, x, rhs, weight, base):
        product = reference_matvec(values, matrix.indices, matrix.indptr, x, n_rows=n_rows)
        return base + (weight[:, None] if x.ndim == 2 else weight) * (rhs - product)

    tangents = [on(random_array(a.shape, x.dtype, seed=seed + 10 + i))
                for i, a in enumerate(operands)]
    _, d_fused = jax.jvp(sweep, operands, tangents)
    _, d_unfused = jax.jvp(unfused, operands, tangents)
    np.testing.assert_allclose(np.asarray(d_fused), np.asarray(d_unfused), rtol=bounds["rtol"],
                               atol=bounds["atol"] * scale * 8)
    cotangent = on(random_array(product.shape, x.dtype, seed=seed + 20))
    grads = [jax.vjp(f, *operands)[1](cotangent) for f in (sweep, unfused)]
    for fused_grad, unfused_grad in zip(*grads):
        np.testing.assert_allclose(np.asarray(fused_grad), np.asarray(unfused_grad),
                                   rtol=bounds["rtol"], atol=bounds["atol"] * scale * 8)


# ----------------------------------------------------------------------------------------
# Classical AMG's interpolation weights (interpolation_weights), on one device: the host's
# NumPy-order weights (``_classical.host_values``) are the reference.


def interpolation_matrix(n: int, dtype) -> scipy.sparse.csr_matrix:
    """A 2D Poisson matrix of ``n²`` rows in ``dtype`` whose entries are scaled at random
    (about one off-diagonal in eight of the diagonal's sign, so that ``ā`` drops some; a
    small phase for complex dtypes): every branch of the weights' formula is taken."""
    a = poisson(n, 2)
    rng = np.random.default_rng(5)
    scale = rng.uniform(0.5, 1.5, a.nnz)
    off_diagonal = a.indices != np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    scale[off_diagonal & (rng.uniform(size=a.nnz) < 0.125)] *= -0.3
    values = a.data * scale
    if np.issubdtype(dtype, np.complexfloating):
        values = values * np.exp(0.3j * rng.uniform(-1, 1, a.nnz))
    return scipy.sparse.csr_matrix((values.astype(dtype), a.indices, a.indptr), a.shape)


def long_row_matrix() -> scipy.sparse.csr_matrix:
    """:func:`interpolation_matrix` (24², float64) with a hub: point 0 strongly depends on
    300 other points (which depend weakly on it, so that it stays an F point, its pairs far
    into its row), so that the longest row has more entries than uint8 offsets (with the
    nowhere and d_i targets) reach: a plan of uint16 offsets."""
    poisson2d = interpolation_matrix(24, np.float64)
    others = np.arange(1, 301)
    hub = scipy.sparse.csr_matrix(
        (np.concatenate([np.full(300, -1.0), np.full(300, -0.01), [310.0], np.full(300, 0.01)]),
         (np.concatenate([np.zeros(300, int), others, [0], others]),
          np.concatenate([others, np.zeros(300, int), [0], others]))), poisson2d.shape)
    matrix = (poisson2d + hub).tocsr()
    matrix.sort_indices()
    return matrix


def interpolation_level(matrix, interpolator: str, truncated: bool):
    """``matrix``'s pattern and a classical level's ``InterpolationStructure`` for it, split
    by PMIS: on these regular grids HMIS leaves no F-F pair without a common C point, so its
    D2 plans would have no distance-two triples for the kernel's checks to see."""
    from jaxsolve.sparse import _classical, parse_amgx_config
    from jaxsolve.sparse._csr_arrays import CsrStructure

    config = parse_amgx_config({"solver": "AMG", "algorithm": "CLASSICAL", "selector": "PMIS",
                                "interpolator": interpolator, "strength_threshold": 0.25,
                                "interp_max_elements": 2 if truncated else -1}).amg
    pattern = CsrStructure(matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32),
                           matrix.shape[1])
    structure = _classical.level_structure(pattern, matrix.data, config)
    assert (structure.keep is not None) == truncated
    return pattern, structure


def interpolation_operands(device, matrix, pattern, structure, plan=None):
    """The weights kernel's operands on ``device`` (``plan``: the structure's own
    ``InterpolationArrays``, or others given in their place)."""
    from jaxsolve.sparse import _classical

    arrays = _classical.host_arrays(structure) if plan is None else plan
    on = functools.partial(jax.device_put, device=device)
    diagonal = matrix.data[pattern.diagonal_positions()]
    return ((on(matrix.data), on(diagonal), on(pattern.indices), on(pattern.indptr),
             *_classical.kernel_operands(jax.tree.map(on, arrays)),
             on(structure.p.indptr)), {"full_nnz": structure.full.nnz})


def check_interpolation_weights(interpolation_weights, device, dtype, interpolator, truncated):
    """The kernel's weights are the host's: bit for bit for real values on the CPU (one
    order of sums, in double), within rounding elsewhere; under vmap over values, one
    kernel call whose systems are the unbatched calls' bit for bit."""
    from jaxsolve.sparse import _classical

    use_dtype(dtype)
    matrix = interpolation_matrix(12, dtype)
    pattern, structure = interpolation_level(matrix, interpolator, truncated)
    operands, sizes = interpolation_operands(device, matrix, pattern, structure)
    weights = interpolation_weights(*operands, **sizes)
    assert weights.devices() == {device} and weights.dtype == dtype
    assert weights.shape == (structure.p.nnz,)
    host = _classical.host_values(structure, pattern, matrix.data)
    assert np.isfinite(host).all() and len(np.unique(np.round(np.abs(host), 3))) > 10
    if device.platform == "cpu" and not np.iscomplexobj(host):
        np.testing.assert_array_equal(np.asarray(weights), host)
    else:
        np.testing.assert_allclose(np.asarray(weights), host, **tolerance(dtype))

    def weights_of(values):
        return interpolation_weights(values, values[pattern.diagonal_positions()],
                                     *operands[2:], **sizes)

    rng = np.random.default_rng(9)
    stack = jax.device_put(
        (matrix.data * rng.uniform(0.8, 1.2, (3, matrix.nnz))).astype(dtype), device)
    batched = jax.vmap(weights_of)(stack)
    np.testing.assert_array_equal(np.asarray(batched),
                                  np.stack([np.asarray(weights_of(v)) for v in stack]))
    hlo = jax.jit(jax.vmap(weights_of)).lower(stack).as_text()
    assert hlo.count("jaxsolve_sparse_interpolation_weights") == 1 and "while" not in hlo


def plan_sending_outside_a_row(structure):
    """The structure's plan with one triple sent out of its row of ``P`` (to the offset
    past the row's last weight), and that row."""
    from jaxsolve.sparse import _classical, _classical_kernels

    arrays = _classical.host_arrays(structure)
    targets = arrays.triple_targets.copy()
    t = int(np.flatnonzero(targets < _classical_kernels.to_diagonal(targets.dtype))[0])
    row = int(np.searchsorted(arrays.triple_indptr, t, side="right") - 1)
    targets[t] = np.diff(structure.full.indptr)[row]
    return arrays._replace(triple_targets=targets), row
