"""Sums the JUnit XML of every Bazel test into one closing line: `N passed, N failed, N skipped`.

Usage: test_summary.py BAZEL_TESTLOGS_DIR
"""

import pathlib
import sys
import xml.etree.ElementTree as ElementTree


def main(testlogs: str) -> None:
    passed = failed = skipped = 0
    for report in pathlib.Path(testlogs).rglob("test.xml"):
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
