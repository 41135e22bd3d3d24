"""alerts/prometheus.example.yml scrapes the exporters as the rules and dashboards select them: YAML
cannot import exporter.defaults, so its job, its targets' port and its rules file are held to it here."""

from __future__ import annotations

from pathlib import Path

import yaml

from alerts import generate
from exporter import defaults

EXAMPLE = Path(generate.__file__).parent / "prometheus.example.yml"


def test_the_example_scrapes_the_exporters_job_on_their_port_with_the_rules_loaded():
    config = yaml.safe_load(EXAMPLE.read_text())
    (scrape,) = config["scrape_configs"]
    assert scrape["job_name"] == defaults.SCRAPE_JOB
    targets = [target for group in scrape["static_configs"] for target in group["targets"]]
    assert targets and all(target.rpartition(":")[2] == str(defaults.PORT) for target in targets), targets
    assert all("cluster" in group["labels"] for group in scrape["static_configs"]), "the label the rules group by"
    assert [Path(path).name for path in config["rule_files"]] == [generate.RULES_PATH.name]
