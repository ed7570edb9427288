"""Sums the JUnit XML of Bazel tests into one closing line: `N passed, N failed, N skipped`.

Only the named targets count: the testlogs folder also keeps logs of targets that no
longer exist.

Usage: test_summary.py BAZEL_TESTLOGS_DIR //pkg:target [//pkg:target ...]
"""

import pathlib
import sys
import xml.etree.ElementTree as ElementTree


def _latest_reports(target_logs: pathlib.Path) -> list[pathlib.Path]:
    """The JUnit reports of a target's latest run: none if it did not run (bazel said why).

    A target sharded into n shards leaves one report per shard in `shard_<i>_of_<n>/`, an
    unsharded one `test.xml`; reports of an earlier shard count stay beside them, so only the
    layout written last counts.
    """
    layouts: dict[str, list[pathlib.Path]] = {}
    for report in target_logs.glob("**/test.xml"):
        shard_count = "" if report.parent == target_logs else report.parent.name.partition("_of_")[2]
        layouts.setdefault(shard_count, []).append(report)
    if not layouts:
        return []
    return max(layouts.values(), key=lambda reports: max(r.stat().st_mtime for r in reports))


def main(testlogs: str, *targets: str) -> None:
    passed = failed = skipped = 0
    for target in targets:
        package, name = target.removeprefix("//").split(":")
        cases = (case for report in _latest_reports(pathlib.Path(testlogs, package, name))
                 for case in ElementTree.parse(report).iter("testcase"))
        for case in cases:
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
