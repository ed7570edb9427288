"""Runs pytest on the test files that a Bazel `py_test` target names in its arguments.

Bazel's runfiles are read-only, so pytest's cache is off and hypothesis keeps its example
database in the test's private temporary directory. Results go to Bazel's
`XML_OUTPUT_FILE` as JUnit XML, which `tools/dev test` sums up. A target whose file collects
no test at all (pytest's exit status 5) fails: it can only be a broken target.

A target with `shard_count` runs as that many Bazel test actions, each with its own timeout;
Bazel tells each which one it is (`TEST_SHARD_INDEX` of `TEST_TOTAL_SHARDS`), and each runs
every `TEST_TOTAL_SHARDS`-th collected test from its index on. Dealing the tests round-robin
spreads a file's slow parametrized cases, which sit side by side, over the shards.
"""

import os
import sys

import pytest


class BazelShard:
    """A pytest plugin that keeps only the collected tests of one Bazel test shard."""

    def __init__(self, index: int, count: int):
        self.index = index
        self.count = count

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        config.hook.pytest_deselected(
            items=[item for k, item in enumerate(items) if k % self.count != self.index])
        items[:] = items[self.index::self.count]


if __name__ == "__main__":
    args = ["-p", "no:cacheprovider", "-q", *sys.argv[1:]]
    if "TEST_TMPDIR" in os.environ:
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                              os.path.join(os.environ["TEST_TMPDIR"], "hypothesis"))
    if "XML_OUTPUT_FILE" in os.environ:
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    plugins = []
    if "TEST_TOTAL_SHARDS" in os.environ:
        # Touching the status file tells Bazel that this runner splits its tests.
        open(os.environ["TEST_SHARD_STATUS_FILE"], "a").close()
        plugins.append(BazelShard(int(os.environ["TEST_SHARD_INDEX"]),
                                  int(os.environ["TEST_TOTAL_SHARDS"])))
    status = pytest.main(args, plugins=plugins)
    if status == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"error: no test collected from {sys.argv[1:]}", file=sys.stderr)
        status = pytest.ExitCode.TESTS_FAILED
    sys.exit(status)
