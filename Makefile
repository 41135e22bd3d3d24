# The commands of the README. Each sets up what it needs first (idempotent, fast when done):
# the demo only the package and one Kafka version, the tests and the generators everything.
.PHONY: setup setup-demo setup-check demo test check generate lock

setup:
	@scripts/setup

setup-demo:
	@scripts/setup demo

setup-check:
	@scripts/setup check

demo: setup-demo
	.venv/bin/txn-exporter demo

# `make check`'s tests: those that need no broker, no Spark extra, no fresh venv and nothing
# scripts/setup fetches beyond the Python packages (the markers: pyproject.toml says each).
FAST_TESTS = not kafka and not spark and not image and not tools

# The format, lint and type checks first (seconds), stopping at the first that finds anything, with
# what it found; then the tests in two runs (tests/fast_first.py): the fast ones first, stopping at
# the first failure; then the rest, two workers a test file each at a time (the brokers' modules keep
# their clusters: the suite waits on brokers and clients for half its time); a test marked `alone`
# runs while the other worker waits (tests/machine.py). One summary line of both ends the output.
test: setup
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/python -m tests.fast_first "$(FAST_TESTS)"

# The fast loop: the same checks, then the fast tests, whatever fails. No Java, Kafka jars, Spark,
# Debian packages, Go or npm needed. Spread a test at a time over the two workers: its slowest files
# are a few hypothesis tests, not brokers.
check: setup-check
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/pytest -n 2 -m "$(FAST_TESTS)"

# Every generated file (dashboards, rules, the Kubernetes component, the mixin, docs/metrics.md's
# metric table, docs/architecture.md) from its one source, in order: generators/run.py lists them.
generate: setup
	.venv/bin/python -m generators

# The hashed locks scripts/setup and the Dockerfile install from, remade after a change to
# pyproject.toml's dependencies: requirements/ci.txt holds the product's, its dev and spark extras'
# (the workshop's one dependency is the product itself); at ci.txt's versions, requirements/check.txt
# the product's and the dev extra's (`scripts/setup check`), requirements/image.txt the product's
# alone. Resolved by uv for CPython 3.11 on x86_64 Linux (CI's and the image's), with
# every file's hash on PyPI; a pin is kept while pyproject.toml allows it (`make lock UPGRADE=--upgrade`
# takes the newest of everything).
LOCK = .venv/bin/uv pip compile pyproject.toml --quiet --generate-hashes --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --custom-compile-command "make lock" $(UPGRADE)
lock: setup-check
	$(LOCK) --extra dev --extra spark -o requirements/ci.txt
	$(LOCK) --extra dev -c requirements/ci.txt -o requirements/check.txt
	$(LOCK) -c requirements/ci.txt -o requirements/image.txt
