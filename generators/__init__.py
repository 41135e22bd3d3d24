"""The generators of the repository's generated files: what they share, below them all: `metrics`
(the metric names dashboards and alerts may use), `placeholders` (what the mixin's `_config` sets),
`output` (writing or checking a generated file); `docs`, the metric table of docs/metrics.md; and,
above them all, `run` (`make generate`, `python -m generators`), which runs every generator in
order and lists their steps. The floor plan (docs/architecture.md) tells the two apart: `run` and
`__main__` import the generators (dashboards/, alerts/, deploy/, mixin/), which import the rest.
"""
