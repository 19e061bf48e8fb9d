"""The retention tests' clock (the run lifecycle's idea of now, so each run ends when the test says), and
the app with a recording dispatcher (webhook deliveries are made and recorded, never sent)."""

from tests.fixtures.dispatch import app, dispatcher  # noqa: F401  (the fixtures)
from tests.usage.helpers import clock  # noqa: F401  (the fixture)
