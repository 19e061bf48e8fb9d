"""The usage tests' clock: the run lifecycle's idea of now, so each attempt lands in a known hour."""

from tests.usage.helpers import clock  # noqa: F401  (the fixture)
