"""Writes one wheel (PEP 427) from a list of files and the distribution's metadata.

Bazel's `jaxsolve_wheel` rule (tools/defs.bzl) calls this: Debian's packaged rules_python
ships `py_wheel` without the wheelmaker tool it needs, so we carry our own. The archive is
deterministic: entries sorted, fixed timestamps, so an unchanged tree gives the same bytes.

Usage: wheelmaker.py --out W --name N --version V --platform P --python-requires R
                     --files LIST [--requires REQ ...] [--extra EXTRA=REQ ...]
                     [--console-script NAME=MODULE:FUNCTION ...]
LIST holds one `path-in-wheel<TAB>path-on-disk` line per file. Each console script becomes
an `entry_points.txt` line, from which pip writes an executable `NAME` that runs
`sys.exit(FUNCTION())`.
"""

import argparse
import base64
import hashlib
import re
import zipfile

_EPOCH = (1980, 1, 1, 0, 0, 0)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _metadata(args: argparse.Namespace) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {args.name}", f"Version: {args.version}",
             f"Requires-Python: {args.python_requires}"]
    lines += [f"Requires-Dist: {requirement}" for requirement in args.requires]
    extras: dict[str, list[str]] = {}
    for item in args.extra:
        extra, requirement = item.split("=", 1)
        extras.setdefault(extra, []).append(requirement)
    for extra, requirements in sorted(extras.items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in requirements]
    return "\n".join(lines) + "\n"


def _entry_points(console_scripts: list[str]) -> str:
    """The `entry_points.txt` of the console scripts `NAME=MODULE:FUNCTION`."""
    lines = ["[console_scripts]"]
    for item in sorted(console_scripts):
        name, _, target = item.partition("=")
        if not re.fullmatch(r"[\w.-]+", name) or not re.fullmatch(r"[\w.]+:\w+", target):
            raise SystemExit(f"wheelmaker: a console script is NAME=MODULE:FUNCTION, got {item!r}")
        lines.append(f"{name} = {target}")
    return "\n".join(lines) + "\n"


def _write(archive: zipfile.ZipFile, record: list[str], path: str, data: bytes,
           executable: bool = False) -> None:
    info = zipfile.ZipInfo(path, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o755 if executable else 0o644) << 16
    archive.writestr(info, data)
    record.append(f"{path},{_record_hash(data)},{len(data)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--out", "--name", "--version", "--platform", "--python-requires", "--files"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--requires", action="append", default=[])
    parser.add_argument("--extra", action="append", default=[])
    parser.add_argument("--console-script", action="append", default=[])
    args = parser.parse_args()

    stem = re.sub(r"[^\w\d.]+", "_", args.name)
    dist_info = f"{stem}-{args.version}.dist-info"
    with open(args.files) as f:
        files = sorted(tuple(line.rstrip("\n").split("\t")) for line in f if line.strip())
    wheel = (f"Wheel-Version: 1.0\nGenerator: jaxsolve wheelmaker\n"
             f"Root-Is-Purelib: {'true' if args.platform == 'any' else 'false'}\n"
             f"Tag: py3-none-{args.platform}\n")
    record: list[str] = []
    with zipfile.ZipFile(args.out, "w") as archive:
        for in_wheel, on_disk in files:
            with open(on_disk, "rb") as f:
                _write(archive, record, in_wheel, f.read(), executable=in_wheel.endswith(".so"))
        _write(archive, record, f"{dist_info}/METADATA", _metadata(args).encode())
        _write(archive, record, f"{dist_info}/WHEEL", wheel.encode())
        if args.console_script:
            _write(archive, record, f"{dist_info}/entry_points.txt",
                   _entry_points(args.console_script).encode())
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=_EPOCH)
        archive.writestr(info, "\n".join(record) + "\n")


if __name__ == "__main__":
    main()
