# The two commands of the README. Each sets up what it needs first (idempotent, fast when done):
# the demo only the package and one Kafka version, the tests everything.
.PHONY: setup setup-demo demo test

setup:
	@scripts/setup

setup-demo:
	@scripts/setup demo

demo: setup-demo
	.venv/bin/txn-exporter demo

test: setup
	.venv/bin/pytest
