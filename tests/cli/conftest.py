"""The scanner twins' fixture, for the command-line tests that compare both twins."""

from tests.scan.conftest import scanner  # noqa: F401 - a fixture
