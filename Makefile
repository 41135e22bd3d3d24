# The two commands of the README. Each sets up what it needs first (idempotent, fast when done).
.PHONY: setup demo test

setup:
	@scripts/setup

demo: setup
	.venv/bin/txn-exporter demo

test: setup
	.venv/bin/pytest
