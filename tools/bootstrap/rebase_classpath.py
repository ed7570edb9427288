"""Rebases Debian's Bazel server classpath onto a private prefix.

Debian's `bazel_classpath_debian_depends.txt` and the `Class-Path` entries in its jars'
manifests name absolute `/usr/share/java/...` paths. This resolves the transitive closure of
those jars inside PREFIX and rewrites the classpath file with it (jars Debian lists but does
not ship, and that Bazel never loads, are reported and left out).

Usage: python3 rebase_classpath.py PREFIX CLASSPATH_FILE
"""

import os
import sys
import zipfile


def _rebase(prefix: str, path: str) -> str:
    path = path.strip().removeprefix("file:")
    if path.startswith("/") and not path.startswith(prefix):
        path = prefix + path
    return os.path.normpath(path)


def _manifest_classpath(jar: str) -> list[str]:
    try:
        with zipfile.ZipFile(jar) as archive:
            text = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (KeyError, zipfile.BadZipFile):
        return []
    lines: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.startswith(" ") and lines:
            lines[-1] += line[1:]  # manifest continuation line
        else:
            lines.append(line)
    entries = []
    for line in lines:
        if line.lower().startswith("class-path:"):
            for entry in line.split(":", 1)[1].split():
                if not entry.startswith(("/", "file:")):
                    entry = os.path.join(os.path.dirname(jar), entry)
                entries.append(entry)
    return entries


def main(prefix: str, classpath_file: str) -> None:
    with open(classpath_file) as f:
        pending = [_rebase(prefix, line) for line in f if line.strip()]
    seen, closure, absent = set(), [], []
    while pending:
        jar = _rebase(prefix, pending.pop(0))
        if jar in seen:
            continue
        seen.add(jar)
        if not os.path.exists(jar):
            absent.append(os.path.basename(jar))
            continue
        closure.append(jar)
        pending.extend(_manifest_classpath(jar))
    with open(classpath_file, "w") as f:
        f.write("\n".join(closure) + "\n")
    print(f"[install_bazel] server classpath: {len(closure)} jars; "
          f"listed but not shipped: {' '.join(absent) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
