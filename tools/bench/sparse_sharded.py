"""The one-host sharded solve: iterations single vs sharded, and bytes exchanged per iteration.

Issue 7's figure that predicts multi-GPU scaling (two CPU cores cannot measure scaling itself):
for the 7-point Poisson matrix on an ``n × n × n`` grid (``n`` from the command line, 24 by
default) split over 1, 2, 4 and 8 devices (``jaxsolve.sharding.shard_rows``), each row gives

* ``its``: iterations of ``jaxsolve.sparse.solve`` on the sharded matrix (PCG with the sharded
  preconditioner: block-Jacobi AMG with a coarse space, wrapped in damped Jacobi), next to
  ``single``, the iterations of the single-device AMG-PCG on the same system;
* per device and iteration, counted from the exchange plans
  (``jaxsolve.sparse.communication_per_iteration``): ``halo`` the bytes the busiest device
  sends in the halo exchanges of all products (the method's, and the four of each
  preconditioner application), ``halo (padded)`` with the padding of the ``ppermute``
  messages, ``reductions`` the payloads of the ``psum`` s (scalar inner products, and two
  coarse residuals of ``P × C`` values per application), and their ``total``;
* ``halo/matvec``: the halo of one product, sent by the busiest device.

Then the nonsymmetric upwind convection-diffusion problem
(``jaxsolve.sparse.matrices.convection_diffusion_matrix_2d``, ``--cd`` grid side, Péclet
``--peclet``) with PBICGSTAB, iterations single vs sharded. All in float32, tolerance 1e-6
(relative to ``‖b‖``), ``b`` from ``rhs_random``. The devices are 8 virtual CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=8``, set here before JAX starts), so the
numbers of the sharded solver and its exchange are those of 8 GPUs; the times are not.

Run it with Bazel (``tools/dev bench sparse_sharded [N]``) or from a checkout::

    cd sparse && PYTHONPATH=.:../autodiff:../runtime:../sharding \\
        ../.venv/bin/python ../tools/bench/sparse_sharded.py 24
"""

import os

os.environ["XLA_FLAGS"] = " ".join(
    filter(None, [os.environ.get("XLA_FLAGS"), "--xla_force_host_platform_device_count=8"]))

import argparse  # noqa: E402

import jax  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import matrices  # noqa: E402

PCG = {"solver": "PCG", "tolerance": 1e-6, "max_iters": 500, "preconditioner": {"solver": "AMG"}}
BICGSTAB = {"solver": "PBICGSTAB", "tolerance": 1e-6, "max_iters": 500,
            "preconditioner": {"solver": "AMG"}}
PARTS = (1, 2, 4, 8)


def _iterations(A, b, config, parts=None):
    if parts is not None:
        A = sharding.shard_rows(A, sharding.row_mesh(devices=jax.devices("cpu")[:parts]))
        b = jax.device_put(b, A.sharding)
    _, info = sparse.solve(A, b, config=config)
    status = sparse.Status(int(info.status)).name
    return int(info.iterations), status, A


def _kib(count: int) -> str:
    return f"{count / 1024:.1f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=24, help="3D Poisson grid side")
    parser.add_argument("--cd", type=int, default=64, help="convection-diffusion grid side")
    parser.add_argument("--peclet", type=float, default=10.0)
    args = parser.parse_args()
    if len(jax.devices("cpu")) < max(PARTS):
        raise SystemExit("needs 8 CPU devices: JAX started before XLA_FLAGS was set")

    A = matrices.poisson3d_matrix(args.n)
    b = matrices.rhs_random(A.shape[0])
    single, status, _ = _iterations(A, b, PCG)
    print(f"3D Poisson {args.n}^3 ({A.shape[0]} rows), PCG, float32: single-device AMG "
          f"{single} iterations ({status})")
    header = (f"{'parts':>5} {'its':>4} {'its/single':>10} {'halo/matvec':>12} {'halo':>11}"
              f" {'halo (padded)':>14} {'reductions':>11} {'total':>11}")
    print(header)
    print("-" * len(header))
    for parts in PARTS:
        its, status, A_sharded = _iterations(A, b, PCG, parts)
        counts = sparse.communication_per_iteration(A_sharded, PCG)
        per_matvec = A_sharded.bytes_per_matvec()["sent"]
        print(f"{parts:>5} {its:>4} {its / single:>10.2f} {_kib(per_matvec):>12}"
              f" {_kib(counts['halo']):>11} {_kib(counts['halo_padded']):>14}"
              f" {_kib(counts['reductions']):>11} {_kib(counts['total']):>11}"
              + ("" if status == "SUCCESS" else f"  {status}"))

    A = matrices.convection_diffusion_matrix_2d(args.cd, peclet=args.peclet)
    b = matrices.rhs_random(A.shape[0])
    single, status, _ = _iterations(A, b, BICGSTAB)
    print(f"\nconvection-diffusion {args.cd}^2 (Péclet {args.peclet}), PBICGSTAB, float32: "
          f"single-device AMG {single} iterations ({status})")
    for parts in PARTS:
        its, status, _ = _iterations(A, b, BICGSTAB, parts)
        print(f"{parts:>5} parts: {its:>4} iterations ({its / single:.2f} x single, {status})")


if __name__ == "__main__":
    main()
