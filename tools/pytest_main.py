"""Runs pytest on the test files that a Bazel `py_test` target names in its arguments.

Bazel's runfiles are read-only, so pytest's cache is off and hypothesis keeps its example
database in the test's private temporary directory.
"""

import os
import sys

import pytest

if __name__ == "__main__":
    tmpdir = os.environ.get("TEST_TMPDIR")
    if tmpdir:
        os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tmpdir, "hypothesis"))
    sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", *sys.argv[1:]]))
