# The three commands that hold the project together. Each is idempotent.
.PHONY: setup demo test test-fast api clean

setup:
	@bash scripts/setup.sh

demo: setup
	@.venv/bin/inlet demo $(DEMO_ARGS)

test: setup
	@bash scripts/test.sh

# The suite without spark-submit runs, against SQLite only: the quick loop while coding.
test-fast: setup
	@.venv/bin/python -m pytest -m "not slow" -q $(PYTEST_ARGS)

api: setup
	@.venv/bin/inlet api

clean:
	rm -rf .venv .inlet
