"""`make generate` (`python -m generators`): `run` runs every generator of the repository's generated
files in order and lists their steps; `docs` is one of them (the metric table of docs/metrics.md);
`output` writes a generated file, or finds the committed ones that differ. It stands above all it
runs (dashboards/, alerts/, deploy/, mixin/), and none of them imports it: what they share is
queries/, below them.
"""
