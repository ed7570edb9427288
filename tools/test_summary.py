"""Sums the JUnit XML of Bazel tests into one closing line: `N passed, N failed, N skipped`.

Only the named targets count: the testlogs folder also keeps logs of targets that no
longer exist.

Usage: test_summary.py BAZEL_TESTLOGS_DIR //pkg:target [//pkg:target ...]
"""

import pathlib
import sys
import xml.etree.ElementTree as ElementTree


def main(testlogs: str, *targets: str) -> None:
    passed = failed = skipped = 0
    for target in targets:
        package, name = target.removeprefix("//").split(":")
        report = pathlib.Path(testlogs, package, name, "test.xml")
        if not report.exists():  # not run: bazel has reported why
            continue
        for case in ElementTree.parse(report).iter("testcase"):
            outcome = {child.tag for child in case}
            if outcome & {"failure", "error"}:
                failed += 1
            elif "skipped" in outcome:
                skipped += 1
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main(*sys.argv[1:])
