"""What the dashboards' and the rules' queries are written in, below every generator that writes
them: `metrics` (the metric names dashboards and alerts may use, and their series' selectors) and
`placeholders` (what differs between installations, the mixin's `_config`: its defaults, or a
jsonnet expression over it). It imports no generator; `make generate` (generators/) stands above
them all.
"""
