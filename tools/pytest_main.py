"""Runs pytest on the test files that a Bazel `py_test` target names in its arguments.

Bazel's runfiles are read-only, so pytest's cache is off and hypothesis keeps its example
database in the test's private temporary directory. Results go to Bazel's
`XML_OUTPUT_FILE` as JUnit XML, which `tools/dev test` sums up. A target whose file collects
no test at all (pytest's exit status 5) fails: it can only be a broken target.
"""

import os
import sys

import pytest

if __name__ == "__main__":
    args = ["-p", "no:cacheprovider", "-q", *sys.argv[1:]]
    if "TEST_TMPDIR" in os.environ:
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                              os.path.join(os.environ["TEST_TMPDIR"], "hypothesis"))
    if "XML_OUTPUT_FILE" in os.environ:
        args.append("--junitxml=" + os.environ["XML_OUTPUT_FILE"])
    status = pytest.main(args)
    if status == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"error: no test collected from {sys.argv[1:]}", file=sys.stderr)
        status = pytest.ExitCode.TESTS_FAILED
    sys.exit(status)
