"""What the generators of the repository's generated files share, below them all: `metrics` (the
metric names dashboards and alerts may use), `placeholders` (what the mixin's `_config` sets),
`output` (writing or checking a generated file); and `docs`, the metric table of docs/metrics.md.
The package generate/ (`make generate`) runs the generators and lists their steps.
"""
