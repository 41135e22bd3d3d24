# The commands of the README. Each sets up what it needs first (idempotent, fast when done):
# the demo only the package and one Kafka version, the tests and the generators everything.
.PHONY: setup setup-demo setup-check demo test check generate

setup:
	@scripts/setup

setup-demo:
	@scripts/setup demo

setup-check:
	@scripts/setup check

demo: setup-demo
	.venv/bin/txn-exporter demo

# The format, lint and type checks first (seconds), stopping at the first that finds anything, with
# what it found; then the tests, whose summary line ends the output. Two workers, a test file each at
# a time (the brokers' modules keep their clusters): the suite waits on brokers and clients for half
# its time (on 2 cores: 37 min with one worker, 24 with two); a test marked `alone` runs while the
# other worker waits (tests/machine.py).
test: setup
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/pytest -n 2 --dist loadfile

# The fast loop: the same checks, then every test that needs no broker, no Spark, no fresh venv and
# nothing scripts/setup fetches beyond the Python packages (markers kafka, spark, image and tools:
# tests/conftest.py). No Java, Kafka jars, Debian packages, Go or npm needed. Spread a test at a
# time over the two workers: its slowest files are a few hypothesis tests, not brokers.
check: setup-check
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .
	.venv/bin/mypy
	.venv/bin/pytest -n 2 -m "not kafka and not spark and not image and not tools"

# Every generated file (dashboards, rules, the Kubernetes component, the mixin, docs/metrics.md's
# metric table, docs/architecture.md) from its one source, in order: generators/run.py lists them.
generate: setup
	.venv/bin/python -m generators
