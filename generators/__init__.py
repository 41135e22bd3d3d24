"""The generators of the repository's generated files, and what they share.

`make generate` (python -m generators) regenerates every generated file from its one source;
tests/generators/test_drift.py fails naming that command when a committed file differs. The steps,
in order (generators/run.py):

1. dashboards/generate.py  -> mixin/dashboards/*.json (the Grafana dashboards; the one copy)
2. alerts/generate.py      -> alerts/kafka-txn-exporter.rules.yml
3. deploy/generate.py      -> deploy/monitoring/prometheusrule.yaml, mixin/dashboards/kustomization.yaml
4. mixin/generate.py       -> mixin/config.libsonnet, mixin/rules/rules.libsonnet,
                              mixin/alerts/alerts.libsonnet, mixin/dashboards/queries.libsonnet
5. generators/docs.py      -> README.md's metric table
6. workshop/txn_workshop/architecture.py -> docs/architecture.md (the floors, drawn from the imports)

Each step builds from Python sources only (the metric catalogue, exporter/metrics/catalogue.py, the
dashboards' and rules' definitions, the code's imports), never from another step's output, so no
order of runs can leave a file stale; the order is that of their imports. Shared here: `metrics` (the metric
names dashboards and alerts may use), `placeholders` (what the mixin's `_config` sets), `output`.
"""
