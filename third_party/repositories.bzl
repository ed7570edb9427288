"""Repository rules for jaxsolve's build toolchains.

Most find them on the machine: `tools/dev` installs the pinned Python packages (JAX, and
the pip wheels of the CUDA 13 compiler) into the project's venv, and these rules point Bazel
at them. Those named `downloaded_...` or `..._headers` download what has no such wheel,
pinned by hash. The local ones can be redirected with `--repo_env`:

- `JAXSOLVE_PYTHON`: the interpreter (default: `<workspace>/.venv/bin/python`). It is used
  by its own path, never resolved through symlinks: a venv's `bin/python` is a symlink to
  the base interpreter, and resolving it would lose the venv's site-packages.
- `JAXSOLVE_CUDA<major>_PATH`: for a `cuda_toolkit` repository (CUDA 13's), a local CUDA
  toolkit (with `bin/nvcc`, `include/`, `lib64/` or `lib/`) to use instead of the
  `nvidia/cu<major>` pip wheels in the venv.
"""

def _interpreter(rctx):
    python = rctx.os.environ.get("JAXSOLVE_PYTHON", "")
    if not python:
        python = str(rctx.workspace_root) + "/.venv/bin/python"
    if not rctx.path(python).exists:
        fail("No Python at %s. Run `tools/dev test` (it creates the venv), or pass " % python +
             "--repo_env=JAXSOLVE_PYTHON=/path/to/venv/bin/python.")
    return python

def _run_python(rctx, python, code):
    result = rctx.execute([python, "-c", code])
    if result.return_code != 0:
        fail("%s failed:\n%s" % (python, result.stderr))
    return result.stdout.strip()

def _nvidia_wheel_dir(rctx, subdir, marker):
    """The folder `nvidia/<subdir>` of an NVIDIA pip wheel in the venv that holds `marker`.

    NVIDIA's wheels share the `nvidia` namespace package, whose parts may lie in several
    site-packages folders. Returns "" when no part holds `<subdir>/<marker>`.
    """
    return _run_python(
        rctx,
        _interpreter(rctx),
        "import importlib.util, os; s = importlib.util.find_spec('nvidia');" +
        "print(next((os.path.join(p, %r) for p in (s.submodule_search_locations if s else [])" % subdir +
        " if os.path.exists(os.path.join(p, %r, %r))), ''))" % (subdir, marker),
    )

def _local_python_impl(rctx):
    python = _interpreter(rctx)
    rctx.file("BUILD.bazel", """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "runtime",
    interpreter_path = "{python}",
    python_version = "PY3",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".format(python = python))

local_python = repository_rule(
    implementation = _local_python_impl,
    environ = ["JAXSOLVE_PYTHON"],
    local = True,
    doc = "The project's Python interpreter as Bazel's Python toolchain.",
)

def _xla_ffi_headers_impl(rctx):
    python = _interpreter(rctx)
    include = _run_python(rctx, python, "import jax.ffi; print(jax.ffi.include_dir())")
    rctx.symlink(include + "/xla", "include/xla")
    rctx.file("BUILD.bazel", """\
exports_files(["include/xla/ffi/api/ffi.h"])

filegroup(
    name = "header_files",
    srcs = glob(["include/xla/ffi/api/*.h"]),
    visibility = ["//visibility:public"],
)

cc_library(
    name = "headers",
    hdrs = glob(["include/xla/ffi/api/*.h"]),
    includes = ["include"],
    visibility = ["//visibility:public"],
)
""")

xla_ffi_headers = repository_rule(
    implementation = _xla_ffi_headers_impl,
    environ = ["JAXSOLVE_PYTHON"],
    local = True,
    doc = "XLA's header-only FFI API, taken from the installed jaxlib (`jax.ffi.include_dir()`).",
)

def _write_cuda_toolkit(rctx, major, nvcc, comment, tools = []):
    """The BUILD file of a CUDA toolkit repository: `nvcc`, `headers`, `cudart_static`.

    Expects `include/` and `lib/libcudart_static.a` in the repository; `nvcc` is the path of
    the compiler, absolute or relative to the repository, run through a wrapper (not a
    symlink: nvcc finds nvcc.profile, cicc and ptxas from its own path). `tools` names more
    files of the repository to export.
    """
    version = rctx.execute([rctx.path(nvcc), "--version"]).stdout.strip().split("\n")[-1]
    if not version.startswith("Build cuda_%d." % major):
        fail("%s is not a CUDA %d compiler: %s" % (nvcc, major, version))

    # The wrapper is the compile actions' only input from the toolkit, so it names what the
    # toolkit is made of: another compiler or other headers then recompile. It names no path
    # of this output base (a compiler inside the repository is found from the wrapper's own
    # real location), since its text is part of every CUDA compile's key and the disk cache
    # serves those to every checkout of the machine.
    if not nvcc.startswith("/"):
        nvcc = "$(dirname \"$(readlink -f \"$0\")\")/" + nvcc
    rctx.file("nvcc", "#!/bin/sh\n# %s\n# %s\nexec \"%s\" \"$@\"\n" % (comment, version, nvcc),
              executable = True)
    rctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

# {comment}
# {version}
exports_files({tools})

cc_library(
    name = "headers",
    # include/nv/ holds extensionless headers (<nv/target>) that cuda_fp16.h includes.
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/nv/**"],
                allow_empty = True),
    includes = ["include"],
)

# Linked statically: our libraries then need no libcudart.so.{major} at run time and work
# beside any CUDA {major} JAX plugin (the driver API underneath is shared).
cc_library(
    name = "cudart_static",
    srcs = ["lib/libcudart_static.a"],
    linkopts = ["-ldl", "-lpthread", "-lrt"],
)
""".format(comment = comment, major = major, version = version, tools = repr(["nvcc"] + tools)))

def _cuda_toolkit_impl(rctx):
    major = rctx.attr.major
    root = rctx.os.environ.get("JAXSOLVE_CUDA%d_PATH" % major, "")
    if not root:
        root = _nvidia_wheel_dir(rctx, "cu%d" % major, "bin/nvcc")
    if not root or not rctx.path(root + "/bin/nvcc").exists:
        fail(("No CUDA %d compiler found (looked for the nvidia-cuda-nvcc pip wheel in the venv). " +
              "Run `tools/dev test`, which installs the pinned wheels, or point " +
              "--repo_env=JAXSOLVE_CUDA%d_PATH at a local toolkit.") % (major, major))
    libdir = root + "/lib64" if rctx.path(root + "/lib64/libcudart_static.a").exists else root + "/lib"
    rctx.symlink(root + "/include", "include")
    rctx.symlink(libdir + "/libcudart_static.a", "lib/libcudart_static.a")
    _write_cuda_toolkit(rctx, major, root + "/bin/nvcc", "The CUDA toolkit at " + root)

cuda_toolkit = repository_rule(
    implementation = _cuda_toolkit_impl,
    attrs = {"major": attr.int(mandatory = True, values = [12, 13])},
    environ = ["JAXSOLVE_PYTHON", "JAXSOLVE_CUDA12_PATH", "JAXSOLVE_CUDA13_PATH"],
    local = True,
    doc = "A CUDA toolkit of one major version: nvcc, headers, the static runtime.",
)

def _downloaded_cuda_toolkit_impl(rctx):
    # The compiler: Debian's package keeps nvcc and cicc in usr/lib/nvidia-cuda-toolkit/bin,
    # ptxas, fatbinary, nvlink and cudafe++ in usr/bin, libdevice beside them.
    rctx.download_and_extract(url = rctx.attr.compiler_deb, sha256 = rctx.attr.compiler_deb_sha256,
                              type = "deb", output = "deb")
    data = [p for p in rctx.path("deb").readdir() if p.basename.startswith("data.tar")]
    if len(data) != 1:
        fail("%s holds no single data.tar.*" % rctx.attr.compiler_deb)
    rctx.extract(data[0], output = "compiler")
    for p in rctx.path("deb").readdir():
        rctx.delete(p)
    toolkit = rctx.path("compiler/usr/lib/nvidia-cuda-toolkit")
    rctx.delete(toolkit.get_child("bin").get_child("nvcc.profile"))  # a link to /etc/nvcc.profile
    # Debian's gcc/g++ wrappers pick the newest g++-<N> installed; nvcc uses the host's `gcc`
    # instead, as the CUDA 13 build does.
    rctx.delete(toolkit.get_child("bin").get_child("gcc"))
    rctx.delete(toolkit.get_child("bin").get_child("g++"))
    rctx.file(toolkit.get_child("bin").get_child("nvcc.profile"), """\
NVVMIR_LIBRARY_DIR = {toolkit}/libdevice
PATH += {toolkit}/bin:{usr}/bin:
INCLUDES += "-I{include}" $(_SPACE_)
""".format(toolkit = toolkit, usr = rctx.path("compiler/usr"), include = rctx.path("include")))

    # The headers: every nvidia/*/include folder of the header wheels, merged into include/.
    for i, (url, sha256) in enumerate(rctx.attr.header_wheels.items()):
        rctx.download_and_extract(url = url, sha256 = sha256, type = "zip", output = "w%d" % i)
        for part in rctx.path("w%d/nvidia" % i).readdir():
            if not part.get_child("include").exists:
                continue
            for entry in part.get_child("include").readdir():
                if entry.basename == "__init__.py":
                    continue
                if rctx.path("include/" + entry.basename).exists:
                    fail("include/%s comes from two header wheels" % entry.basename)
                rctx.symlink(entry, "include/" + entry.basename)

    rctx.download_and_extract(url = rctx.attr.runtime_wheel, sha256 = rctx.attr.runtime_wheel_sha256,
                              type = "zip", output = "runtime")
    rctx.symlink("runtime/nvidia/cuda_runtime/lib/libcudart_static.a", "lib/libcudart_static.a")
    # The tests list the architectures of our fat binaries with it (it reads CUDA 13's too).
    rctx.symlink("compiler/usr/bin/cuobjdump", "cuobjdump")
    _write_cuda_toolkit(
        rctx,
        rctx.attr.major,
        "compiler/usr/lib/nvidia-cuda-toolkit/bin/nvcc",
        "nvcc of %s, the headers of %s, the static runtime of %s." % (
            rctx.attr.compiler_deb, ", ".join(rctx.attr.header_wheels), rctx.attr.runtime_wheel),
        tools = ["cuobjdump"],
    )

downloaded_cuda_toolkit = repository_rule(
    implementation = _downloaded_cuda_toolkit_impl,
    attrs = {
        "major": attr.int(mandatory = True, values = [12, 13]),
        "compiler_deb": attr.string(mandatory = True, doc = "Debian's nvidia-cuda-toolkit .deb"),
        "compiler_deb_sha256": attr.string(mandatory = True),
        "header_wheels": attr.string_dict(
            mandatory = True,
            doc = "url -> sha256 of the pip wheels whose nvidia/*/include folders make the " +
                  "headers: the runtime's and nvcc's crt/ of the compiler's version, CCCL's nv/"),
        "runtime_wheel": attr.string(
            mandatory = True, doc = "the nvidia-cuda-runtime-cu<major> wheel of libcudart_static.a"),
        "runtime_wheel_sha256": attr.string(mandatory = True),
    },
    doc = """A CUDA toolkit (the targets of cuda_toolkit) downloaded, pinned by hash.

    For a CUDA major whose compiler has no pip wheel (CUDA 12's nvidia-cuda-nvcc-cu12 holds
    only ptxas, libnvvm and the crt/ headers): nvcc, cicc, ptxas, fatbinary and nvlink come
    from Debian's nvidia-cuda-toolkit package (whose binaries need only glibc 2.14), the
    headers and the static runtime from NVIDIA's pip wheels. Downloaded (about 110 MB) only
    when a target uses it.""",
)

def _nvidia_wheel_impl(rctx):
    rctx.download_and_extract(url = rctx.attr.url, sha256 = rctx.attr.sha256, type = "zip",
                              output = "wheel")
    rctx.symlink("wheel/" + rctx.attr.include, "include")
    rctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

# The headers of the pip wheel {url}.
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    deps = {deps},
)

# Its shared libraries named by the rule, as data (for tests that load what we link against).
filegroup(
    name = "libraries",
    srcs = {libraries},
)
""".format(url = rctx.attr.url, deps = repr([str(d) for d in rctx.attr.deps]),
           libraries = repr(["wheel/" + path for path in rctx.attr.libraries])))

nvidia_wheel = repository_rule(
    implementation = _nvidia_wheel_impl,
    attrs = {
        "url": attr.string(mandatory = True, doc = "the wheel on files.pythonhosted.org"),
        "sha256": attr.string(mandatory = True),
        "include": attr.string(mandatory = True, doc = "the wheel's folder of headers"),
        "deps": attr.string_list(doc = "labels of the headers these include"),
        "libraries": attr.string_list(doc = "paths of shared libraries in the wheel to expose"),
    },
    doc = """The headers (and, as data, named libraries) of an NVIDIA pip wheel, downloaded
    (pinned by hash) from PyPI.

    Our libraries do not link the wheel's library, whose symbols bind at load time to the copy
    Python preloads from the installed wheel; a test may load the exposed libraries to check
    that they do. Fetched only when a target uses it.""",
)

def _nvidia_wheel_library_impl(rctx):
    root = _nvidia_wheel_dir(rctx, rctx.attr.subdir, "include/" + rctx.attr.header)
    if not root:
        fail("%s not found in the venv's site-packages (nvidia/%s/include). Install the pip wheel %s." %
             (rctx.attr.header, rctx.attr.subdir, rctx.attr.wheel))
    rctx.symlink(root + "/include", "include")
    rctx.symlink(root + "/lib/" + rctx.attr.library, "lib/" + rctx.attr.library)
    rctx.file("BUILD.bazel", """\
package(default_visibility = ["//visibility:public"])

# From the pip wheel {wheel}.
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)

# Linked by its soname; at run time the wheel's copy is loaded first (see jaxsolve.dense).
cc_import(
    name = "library",
    shared_library = "lib/{library}",
)
""".format(wheel = rctx.attr.wheel, library = rctx.attr.library))

nvidia_wheel_library = repository_rule(
    implementation = _nvidia_wheel_library_impl,
    attrs = {
        "header": attr.string(mandatory = True, doc = "a header the wheel must have, e.g. nccl.h"),
        "library": attr.string(mandatory = True, doc = "the shared library's file name"),
        "subdir": attr.string(mandatory = True, doc = "the wheel's folder below nvidia/"),
        "wheel": attr.string(mandatory = True, doc = "the pip requirement that provides it"),
    },
    environ = ["JAXSOLVE_PYTHON"],
    local = True,
    doc = """Headers and shared library of an NVIDIA pip wheel installed in the venv.

    Fetched only when a target uses it, so machines that build no such target need not
    install the (large) wheel.""",
)
