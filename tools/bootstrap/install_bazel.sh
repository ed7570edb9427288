#!/usr/bin/env bash
# Installs an offline-capable Bazel 7 into a private prefix, from Debian's archive only.
#
# Why: our machines reach PyPI and Debian's archive but no Bazel registry and no GitHub.
# Debian sid packages Bazel 7.7.1 (`bazel-bootstrap`) with the rules it needs. Its binaries
# want glibc 2.38+, libstdc++ 14 and Java 21, newer than a Debian 12 host has, so this script
#   1. resolves the .deb closure with a PRIVATE apt configuration (it never reads or edits
#      /etc/apt and installs nothing system-wide),
#   2. unpacks every package with `dpkg -x` into the prefix, sid's glibc and JRE included,
#   3. points Bazel's own executables and the JRE at that glibc with patchelf (the compilers
#      and python that Bazel starts keep using the host's libraries),
#   4. rebases Debian's absolute /usr/share/{bazel,java} paths onto the prefix,
#   5. adds empty stub modules for bazel_tools' dependencies that Debian does not package,
#   6. writes an rc file with the `--override_module` lines and a `bin/bazel` wrapper that
#      passes that rc file. The project's MODULE.bazel stays standard: only the Bazel that
#      this script installs ever sees the overrides.
# The prefix holds absolute paths: re-run the script for another location. Idempotent.
#
# Usage: install_bazel.sh PREFIX
set -euo pipefail

PREFIX=${1:?usage: install_bazel.sh PREFIX}
STATE="${PREFIX}.apt"
MIRROR="${JAXSOLVE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITES="sid trixie bookworm"
# Exact versions of what we build with; the rest of the closure is resolved by apt.
PINNED="bazel-bootstrap=7.7.1+ds-8+b1 bazel-bootstrap-data=7.7.1+ds-8
        bazel-rules-python=0.22.1-3 bazel-rules-cc=0.0.11-3 bazel-platforms=0.0.10-4
        bazel-skylib=1.9.1-2 bazel-rules-java=7.6.5-8 bazel-rules-license=0.0.7-2
        bazel-features=1.11.0-2 bazel-rules-proto=6.0.0-2"
# Bazel's server jar is Java 21 bytecode; libblake3 is needed but not declared by Debian.
UNPINNED="openjdk-21-jre-headless libblake3-0"
# Marked installed in the private status file: the host has them, or Bazel does not need them.
ASSUMED="build-essential default-jdk-headless default-jre-headless python3 unzip zlib1g-dev
         protobuf-compiler-grpc-java-plugin ca-certificates-java java-common util-linux perl
         perl-base debconf tzdata ca-certificates libjs-jquery node-core-js node-html5shiv dpkg
         libpam-runtime libpam-modules"
STUB_MODULES="protobuf zlib buildozer apple_support"

say() { echo "[install_bazel] $*" >&2; }
die() { say "error: $*"; exit 1; }

if [[ -f "$PREFIX/.install-complete" && -x "$PREFIX/bin/bazel" ]]; then
  exec "$PREFIX/bin/bazel" --version
fi
[[ "$(uname -m)" == x86_64 ]] || die "only x86_64 hosts are supported (got $(uname -m))"
for tool in apt-get dpkg dpkg-deb python3; do
  command -v "$tool" >/dev/null || die "'$tool' is missing"
done
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -f "$KEYRING" ]] || die "$KEYRING is missing: apt-get install debian-archive-keyring"

# --- 1. resolve and download --------------------------------------------------------------
mkdir -p "$STATE"/{sources,lists/partial,archives/partial,tools}
printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
  "$MIRROR" "$SUITES" "$KEYRING" > "$STATE/sources/debian.sources"
: > "$STATE/status"
for pkg in $ASSUMED; do
  printf 'Package: %s\nStatus: install ok installed\nPriority: optional\nSection: misc\nMaintainer: none <none@localhost>\nArchitecture: all\nMulti-Arch: foreign\nVersion: 99:99\nDescription: provided by the host\n\n' "$pkg" >> "$STATE/status"
done
APT=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$STATE/sources"
     -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
     -o Dir::State::Lists="$STATE/lists" -o Dir::State::status="$STATE/status"
     -o Dir::Cache="$STATE" -o Dir::Cache::archives="$STATE/archives"
     -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=
     -o APT::Install-Recommends=false -o APT::Install-Suggests=false
     -o APT::Sandbox::User=root -o Debug::NoLocking=1)
say "reading Debian's package lists ($MIRROR: $SUITES)"
"${APT[@]}" update >/dev/null || die "apt-get update failed: is $MIRROR reachable?"
for pin in $PINNED; do
  if ! "${APT[@]}" -s install "$pin" >/dev/null 2>&1; then
    die "Debian no longer serves ${pin} (package ${pin%%=*}); update PINNED in $0"
  fi
done
say "downloading the .deb closure"
"${APT[@]}" -y --download-only install $PINNED $UNPINNED >/dev/null \
  || die "downloading the closure of: $PINNED $UNPINNED failed"
( cd "$STATE/tools" && "${APT[@]}" download patchelf/bookworm >/dev/null ) \
  || die "downloading package patchelf (bookworm) failed"

# --- 2. unpack ----------------------------------------------------------------------------
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
for deb in "$STATE"/archives/*.deb; do dpkg -x "$deb" "$PREFIX"; done
dpkg -x "$STATE"/tools/patchelf_*.deb "$STATE/tools/root"
PATCHELF="$STATE/tools/root/usr/bin/patchelf"

# --- 3. relocate --------------------------------------------------------------------------
while IFS= read -r link; do          # absolute symlinks inside the packages -> the prefix
  target=$(readlink "$link")
  [[ -e "$PREFIX$target" ]] && ln -sfn "$PREFIX$target" "$link"
done < <(find "$PREFIX" -type l -lname '/*')

LIBDIR="$PREFIX/usr/lib/x86_64-linux-gnu"
JAVA_HOME_PRIVATE=$(find "$PREFIX/usr/lib/jvm" -maxdepth 1 -name 'java-21-openjdk-*' -type d | head -1)
[[ -n "$JAVA_HOME_PRIVATE" ]] || die "package openjdk-21-jre-headless did not unpack a JRE"
use_private_glibc() {
  local elf=$1 rpath
  head -c4 "$elf" 2>/dev/null | grep -q ELF || return 0
  rpath=$("$PATCHELF" --print-rpath "$elf" 2>/dev/null || true)
  if "$PATCHELF" --print-interpreter "$elf" >/dev/null 2>&1; then
    "$PATCHELF" --set-interpreter "$LIBDIR/ld-linux-x86-64.so.2" "$elf"
  fi
  "$PATCHELF" --force-rpath --set-rpath "${rpath:+$rpath:}$LIBDIR" "$elf"
}
for elf in "$PREFIX/usr/bin/bazel" "$PREFIX"/usr/libexec/x86_64-linux-gnu/bazel/* \
           "$PREFIX"/usr/lib/x86_64-linux-gnu/bazel/*.so; do
  use_private_glibc "$elf"
done
while IFS= read -r elf; do use_private_glibc "$elf"; done \
  < <(find "$JAVA_HOME_PRIVATE" -type f \( -name '*.so*' -o -path '*/bin/*' -o -name jspawnhelper \))

# The server classpath and the jars' Class-Path manifests name /usr/share/java/*.jar.
python3 "$(dirname "$0")/rebase_classpath.py" "$PREFIX" \
  "$PREFIX/usr/share/bazel/bazel_classpath_debian_depends.txt"

SHARE="$PREFIX/usr/share/bazel"
for module in $STUB_MODULES; do
  mkdir -p "$SHARE/stubs/$module"
  printf 'module(name = "%s", version = "0.0.0-offline-stub")\n' "$module" > "$SHARE/stubs/$module/MODULE.bazel"
  echo "# Offline stub: Debian does not package this module and Bazel's own graph names it." \
    > "$SHARE/stubs/$module/BUILD.bazel"
done
cat > "$SHARE/stubs/buildozer/buildozer_binary.bzl" <<'EOF'
def _empty_repo_impl(rctx):
    rctx.file("BUILD.bazel", "# offline stub: buildozer is not available\n")

_empty_repo = repository_rule(implementation = _empty_repo_impl)

def _buildozer_binary_impl(mctx):
    _empty_repo(name = "buildozer_binary")

buildozer_binary = module_extension(implementation = _buildozer_binary_impl)
EOF

# --- 4. the rc file (Debian's /etc/bazel/bazelrc, relocated) and the wrapper ---------------
mkdir -p "$PREFIX/etc" "$PREFIX/bin"
{
  echo "# Written by jaxsolve's tools/bootstrap/install_bazel.sh for this Bazel only."
  echo "startup --install_base=$SHARE"
  echo "startup --trust_install_base"
  echo "startup --server_javabase=$JAVA_HOME_PRIVATE"
  echo "common --noenable_workspace"
  for pair in platforms=tools/platforms bazel_skylib=tools/skylib bazel_features=tools/features \
              rules_cc=rules/cc rules_java=rules/java rules_license=rules/license \
              rules_python=rules/python rules_proto=rules/proto; do
    echo "common --override_module=${pair%%=*}=$SHARE/${pair#*=}"
  done
  for module in $STUB_MODULES; do echo "common --override_module=$module=$SHARE/stubs/$module"; done
} > "$PREFIX/etc/bazelrc"
cat > "$PREFIX/bin/bazel" <<EOF
#!/bin/sh
# --bazelrc replaces the user's ~/.bazelrc; the workspace's .bazelrc is still read.
exec "$PREFIX/usr/bin/bazel" --bazelrc="$PREFIX/etc/bazelrc" "\$@"
EOF
chmod +x "$PREFIX/bin/bazel"
"$PREFIX/bin/bazel" --version >/dev/null || die "the installed Bazel does not start"
date -u +%FT%TZ > "$PREFIX/.install-complete"
say "installed in $PREFIX ($(du -sh "$PREFIX" | cut -f1))"
"$PREFIX/bin/bazel" --version
