"""The one CUDA-major rule (`cuda_major`) and NVIDIA's wheels (`nvidia_library`,
`preload_nvidia_library`), without a GPU.

Installed JAX CUDA plugins are real distributions here: a ``*.dist-info`` folder on
``sys.path``, which is all ``importlib.metadata`` reads. Only the CUDA client that a GPU
machine's JAX would run is stood in for, by a device reporting its ``platform_version``.
"""

import re
import types

import jax
import pytest

import jaxsolve.runtime as jr


@pytest.fixture
def plugins(monkeypatch, tmp_path):
    """Installs (as far as `importlib.metadata` sees) the JAX CUDA plugins of given majors."""

    def install(*majors):
        site = tmp_path / "site"
        for major in majors:
            info = site / f"jax_cuda{major}_plugin-0.10.2.dist-info"
            info.mkdir(parents=True)
            (info / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: jax-cuda{major}-plugin\nVersion: 0.10.2\n")
        monkeypatch.syspath_prepend(str(site))

    return install


@pytest.fixture
def cuda_client(monkeypatch):
    """JAX's CUDA backend as a GPU machine has it: a device whose client reports `version`."""

    def run(version):
        client = types.SimpleNamespace(platform_version=version)
        device = types.SimpleNamespace(client=client)
        devices = jax.devices

        def with_cuda(backend=None):
            return [device] if backend == "cuda" else devices(backend)

        monkeypatch.setattr(jax, "devices", with_cuda)

    return run


@pytest.mark.parametrize("major", [12, 13])
def test_the_one_installed_plugin_decides(plugins, major):
    plugins(major)
    assert jr.cuda_major() == major


@pytest.mark.parametrize("installed, says", [
    ((), "no jax-cuda<major>-plugin is installed"),
    ((12, 13), "both jax-cuda12-plugin and jax-cuda13-plugin are installed"),
])
def test_without_a_cuda_backend_to_ask_it_says_why(plugins, installed, says):
    # Here JAX has no CUDA backend, which is what the rule asks when the plugins do not tell.
    plugins(*installed)
    with pytest.raises(RuntimeError, match=re.escape(
            "the CUDA version of JAX's CUDA backend could not be determined: " + says)):
        jr.cuda_major()


@pytest.mark.parametrize("version, major", [("cuda 12080", 12), ("cuda 13000", 13)])
def test_with_both_plugins_the_running_cuda_client_decides(plugins, cuda_client, version,
                                                           major):
    # (jaxsolve.sharding's NCCL raised here, while the native libraries took the client's
    # major: one dense call could load two CUDA majors' libraries.)
    plugins(12, 13)
    cuda_client(version)
    assert jr.cuda_major() == major


def test_a_client_version_without_a_number_is_an_error(cuda_client):
    cuda_client("cuda")
    with pytest.raises(RuntimeError, match="its CUDA client reports 'cuda'"):
        jr.cuda_major()


def test_nvidia_library_searches_the_nvidia_folders_on_sys_path(monkeypatch, tmp_path):
    library = tmp_path / "nvidia" / "example" / "lib" / "libexample.so.1"
    library.parent.mkdir(parents=True)
    library.touch()
    assert jr.nvidia_library("example/lib/libexample.so.1") is None
    monkeypatch.syspath_prepend(str(tmp_path))
    assert jr.nvidia_library("example/lib/libexample.so.1") == library
    assert jr.nvidia_library("example/lib/libabsent.so.1") is None


def test_a_missing_library_names_its_wheel():
    with pytest.raises(RuntimeError, match="from the pip wheel nvidia-example-cu13"):
        jr.preload_nvidia_library("example/lib/libjaxsolve_absent.so.0",
                                  "libjaxsolve_absent.so.0", "nvidia-example-cu13")

