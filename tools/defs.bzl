"""Bazel macros shared by jaxsolve's packages."""

load("@rules_cc//cc:defs.bzl", "cc_library")
load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")

# The glibc our native libraries are built against (Debian 12); wheels must say so.
NATIVE_WHEEL_PLATFORM = "manylinux_2_36_x86_64"

# The JAX releases jaxsolve is tested on are 0.10.2 (CI, CPython 3.11) and 0.11.2 (the GPU
# host, CPython 3.12); packages allow the range around them.
JAX_REQUIREMENT = "jax>=0.10.2,<0.12"

def _import_check_impl(ctx):
    stamp = ctx.actions.declare_file(ctx.label.name + ".ok")
    args = ctx.actions.args()
    args.add("--readme", ctx.file._readme)
    args.add("--stamp", stamp)
    if ctx.attr.package:
        args.add("--package", ctx.attr.package)
    args.add_all(ctx.attr.build_deps, before_each = "--build-dep")
    args.add_all(ctx.files.srcs)
    ctx.actions.run(
        executable = ctx.executable._checker,
        arguments = [args],
        inputs = ctx.files.srcs + [ctx.file._readme],
        outputs = [stamp],
        mnemonic = "ImportArrows",
        progress_message = "Checking the imports of %{label}",
    )

    # A validation output: Bazel runs it whenever a target that depends on this one is built,
    # and a failure fails the build; nothing waits for it, and it is in no runfiles or wheel.
    return [OutputGroupInfo(_validation = depset([stamp]))]

import_check = rule(
    implementation = _import_check_impl,
    attrs = {
        "build_deps": attr.string_list(doc = "sibling packages the library depends on"),
        "package": attr.string(doc = "the package whose library `srcs` are, if they are"),
        "srcs": attr.label_list(allow_files = [".py"], mandatory = True),
        "_checker": attr.label(default = "//tools:import_arrows", executable = True, cfg = "exec"),
        "_readme": attr.label(default = "//:README.md", allow_single_file = True),
    },
    doc = """Checks `srcs` against jaxsolve's import rules (tools/import_arrows.py) at build time.

    A file may not import another package's `_private` modules or `jax._src`, nor a sibling
    that the README's arrow table does not allow its package; a package library's Bazel
    `build_deps` obey the same table. Depend on the target (as `data`) to run the check
    whenever the dependent is built.
    """,
)

def jaxsolve_py_package(name, deps = [], data = []):
    """The Python library of the package `name`, from the `*.py` files of this folder.

    Two targets: `:<name>`, the public face (`__init__.py`, `__main__.py` and the modules
    without a leading underscore), visible to all, and `:internals`, the `_private` modules,
    visible to nothing outside this folder. Bazel's visibility stops a BUILD file from naming
    another package's internals; Python resolves imports from the runfiles, which hold them
    anyway, so the `import_check` `:imports` (a dependency of `:<name>`) is what fails the
    build when a file imports another package's `_module`, `jax._src`, or a sibling the
    README's arrow table forbids, or when `deps` name such a sibling.
    """
    internals = native.glob(["_*.py"], exclude = ["__*__.py"])
    public = native.glob(["*.py"], exclude = internals)
    import_check(
        name = "imports",
        srcs = public + internals,
        package = name,
        build_deps = [dep.split("/")[2] for dep in deps if dep.startswith("//")],
    )
    py_library(
        name = "internals",
        srcs = internals,
        imports = ["../.."],
        deps = deps,
    )
    py_library(
        name = name,
        srcs = public,
        data = data + [":imports"],
        imports = ["../.."],  # puts <name>/ on sys.path: `import jaxsolve.<name>` works
        visibility = ["//visibility:public"],
        deps = [":internals"] + deps,
    )

def jaxsolve_py_tests(srcs, deps = [], data = [], size = "medium", shard_counts = {}, env = {},
                      env_of = {}, **kwargs):
    """One pytest-driven `py_test` per `*_test.py` file, named after it.

    The other Python files beside the tests (`conftest.py`, shared helpers) travel as data;
    `//tests/support:jaxsolve_testing`, the fixtures and checks all packages' tests share, is a
    dependency of each.
    Files named `*_gpu_test.py` hold only tests marked `gpu`; Bazel runs on machines without
    GPUs, so they get no target here and run on a GPU host through `tools/dev gpu-test`.
    No `__init__.py` is generated (`legacy_create_init = False`): one would break the
    PEP 420 `jaxsolve` namespace.

    Every Python file of the folder (GPU tests too) is checked against the import rules
    (`import_check`) whenever the tests are built: a violation fails the build.

    `shard_counts` maps a file to the number of Bazel shards its tests are dealt over
    (`tools/pytest_main.py` does the dealing): each shard is its own test action, with its own
    timeout, and two cores run two at once. `env` holds environment variables every target's
    tests run with; `env_of` maps a file to more of them for its target alone.
    """
    conftests = native.glob(["*.py"], exclude = ["*_test.py"])
    if not native.existing_rule("imports"):  # one check of every Python file of the folder
        import_check(name = "imports", srcs = native.glob(["*.py"]))
    for src in srcs:
        if src.endswith("_gpu_test.py"):
            continue
        py_test(
            name = src[:-len(".py")],
            srcs = [src, "//tools:pytest_main.py"],
            main = "//tools:pytest_main.py",
            args = ["-c", "$(rootpath //:pytest.ini)", "$(rootpath %s)" % src],
            data = data + conftests + ["//:pytest.ini", ":imports"],
            deps = deps + ["//tests/support:jaxsolve_testing"],
            legacy_create_init = False,
            size = size,
            shard_count = shard_counts.get(src),
            env = env | env_of.get(src, {}),
            **kwargs
        )

def jaxsolve_bench(name, deps, data = [], smoke_test = False):
    """A benchmark of `tools/bench`: the script `<name>.py`, run by `tools/dev bench <name>`.

    With `smoke_test`, `<name>_test.py` becomes its CPU smoke test (pytest, the script as
    data), which runs the benchmark at a tiny size in CI so that it keeps running; a benchmark
    only a GPU host can run has none. Both use the packages' public names only (the folder's
    `import_check`).
    """
    py_binary(
        name = name,
        srcs = [name + ".py"],
        data = data,
        deps = deps,
        legacy_create_init = False,
    )
    if smoke_test:
        py_test(
            name = name + "_test",
            srcs = [name + "_test.py", "//tools:pytest_main.py"],
            main = "//tools:pytest_main.py",
            args = ["-c", "$(rootpath //:pytest.ini)", "$(rootpath %s_test.py)" % name],
            data = [name + ".py", "//:pytest.ini"],
            deps = deps,
            legacy_create_init = False,
        )

# The GPUs cuda_library compiles for, per CUDA major: SASS for sm_80 and sm_90, and PTX of the
# newest architecture the compiler knows, which the driver compiles for later GPUs. CUDA 12's
# nvcc (12.4) knows up to sm_90; CUDA 13's, sm_100.
_CUDA_GENCODES = {
    12: ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90",
         "arch=compute_90,code=compute_90"],
    13: ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90",
         "arch=compute_100,code=compute_100"],
}

def cuda_library(name, srcs, major, hdrs = [], deps = [], copts = []):
    """Compiles `.cu` sources with the nvcc of CUDA `major` into a static, PIC library.

    Uses the toolkit repository `@cuda<major>`, for the architectures of `_CUDA_GENCODES`.
    The sources see `JAXSOLVE_CUDA_MAJOR` defined to `major` (layout's cuda_error.h checks it
    against the headers'). The result is an ordinary `cc_library`, linked into a
    `cc_binary(linkshared = True)` as usual, with that major's static runtime.
    """
    cuda = "@cuda%d" % major
    ffi_h = "@xla_ffi//:include/xla/ffi/api/ffi.h"
    objects = []
    for src in srcs:
        obj = "_%s_%s.o" % (name, src.replace("/", "_"))
        native.genrule(
            name = obj + "_compile",
            srcs = [src, ffi_h, "@xla_ffi//:header_files"] + hdrs,
            outs = [obj],
            # nvcc names its intermediate files /tmp/tmpxft_<pid>_...; Bazel's sandboxes give
            # each action its own PID namespace but share /tmp, so two concurrent compiles can
            # have the same pid and overwrite each other's preprocessed source. A private
            # TMPDIR per action keeps them apart.
            cmd = " ".join([
                "tmp=$$(mktemp -d) && trap 'rm -rf \"$$tmp\"' EXIT && TMPDIR=$$tmp",
                "$(execpath %s//:nvcc)" % cuda,
                "-c -O3 -std=c++17 -Xcompiler -fPIC,-fvisibility=hidden",
                "-DJAXSOLVE_CUDA_MAJOR=%d" % major,
                " ".join(["-gencode " + gencode for gencode in _CUDA_GENCODES[major]]),
                "-I. -I$$(dirname $(execpath %s))/../../.." % ffi_h,
                " ".join(copts),
                "-o $@ $(execpath %s)" % src,
            ]),
            tools = [cuda + "//:nvcc"],
        )
        objects.append(obj)
    cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["@xla_ffi//:headers", cuda + "//:headers", cuda + "//:cudart_static"],
        alwayslink = True,
    )

def _wheel_impl(ctx):
    # Files of the deps (sources, generated files and native libraries in their runfiles)
    # below `<package folder>/jaxsolve/<name>/` go to `jaxsolve/<name>/` in the wheel.
    prefix = ctx.label.package + "/" if ctx.label.package else ""
    wanted = prefix + ctx.attr.package.replace(".", "/") + "/"
    files = depset(transitive = [dep[DefaultInfo].default_runfiles.files for dep in ctx.attr.deps] +
                                [dep[DefaultInfo].files for dep in ctx.attr.deps])
    lines = []
    inputs = []
    for f in files.to_list():
        if f.short_path.startswith(wanted) and not f.short_path.endswith(".pyc"):
            lines.append("%s\t%s" % (f.short_path[len(prefix):], f.path))
            inputs.append(f)
    listing = ctx.actions.declare_file(ctx.label.name + ".files")
    ctx.actions.write(listing, "\n".join(lines) + "\n")
    stem = ctx.attr.distribution.replace("-", "_")
    out = ctx.actions.declare_file("%s-%s-py3-none-%s.whl" % (stem, ctx.attr.version, ctx.attr.platform))
    args = ctx.actions.args()
    args.add_all(["--out", out, "--name", ctx.attr.distribution, "--version", ctx.attr.version,
                  "--platform", ctx.attr.platform, "--python-requires", ctx.attr.python_requires,
                  "--files", listing])
    args.add_all(ctx.attr.requires, before_each = "--requires")
    args.add_all(["%s=%s" % (extra, r) for extra, reqs in ctx.attr.extra_requires.items() for r in reqs],
                 before_each = "--extra")
    args.add_all(["%s=%s" % item for item in ctx.attr.console_scripts.items()],
                 before_each = "--console-script")
    ctx.actions.run(
        executable = ctx.executable._wheelmaker,
        arguments = [args],
        inputs = inputs + [listing],
        outputs = [out],
        mnemonic = "PyWheel",
        progress_message = "Building wheel %s" % out.basename,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles([out]))]

_wheel = rule(
    implementation = _wheel_impl,
    attrs = {
        "console_scripts": attr.string_dict(),
        "deps": attr.label_list(),
        "distribution": attr.string(mandatory = True),
        "extra_requires": attr.string_list_dict(),
        "package": attr.string(mandatory = True),
        "platform": attr.string(default = "any"),
        "python_requires": attr.string(default = ">=3.11"),
        "requires": attr.string_list(),
        "version": attr.string(mandatory = True),
        "_wheelmaker": attr.label(default = "//tools:wheelmaker", executable = True, cfg = "exec"),
    },
)

def jaxsolve_wheel(name, distribution, version, package, deps = [], requires = [],
                   extra_requires = {}, platform = "any", console_scripts = {}):
    """One distribution of the jaxsolve family, built as a wheel (`bazel build //layout:wheel`).

    `package` is the dotted package the distribution contributes to the `jaxsolve`
    namespace, e.g. "jaxsolve.layout": the files of `deps` (with their runfiles, so native
    libraries too) found below `<this folder>/jaxsolve/layout/` are packed at
    `jaxsolve/layout/`. `platform` is "any" for pure Python, else a manylinux tag.
    `console_scripts` maps a command pip installs to the `module:function` it runs.
    """
    _wheel(
        name = name,
        distribution = distribution,
        version = version,
        package = package,
        deps = deps,
        requires = requires,
        extra_requires = extra_requires,
        platform = platform,
        console_scripts = console_scripts,
        visibility = ["//visibility:public"],
    )
