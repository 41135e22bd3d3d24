"""The broker's version and the known-bug counts as the model keeps them and Prometheus reads them:
txn_exporter_broker_info{version,source} and kafka_transactions_matching_known_bug{bug}."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.contracts.events import BrokerVersionAnswered, BrokerVersionSeen, KnownBugsCounted
from exporter.contracts.kafka_versions import ANY_PATCH, API_VERSIONS, between
from exporter.contracts.known_bugs import KNOWN_BUGS
from exporter.metrics import LatencyRecorders, TransactionCollector
from exporter.model import CoordinatorModel


def scraped(model: CoordinatorModel, recorders: LatencyRecorders) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(TransactionCollector(model, recorders))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {
        s.name: [(dict(x.labels), x.value) for x in f.samples if x.name == s.name] for f in families for s in f.samples
    }


def model_and_recorders() -> tuple[CoordinatorModel, LatencyRecorders]:
    recorders = LatencyRecorders()
    return CoordinatorModel(recorders.sinks()), recorders


def test_the_version_is_unknown_until_learned_then_the_logs_word_stands() -> None:
    model, recorders = model_and_recorders()
    assert scraped(model, recorders)["txn_exporter_broker_info"] == [({"version": "unknown", "source": "none"}, 1.0)]
    model.apply(BrokerVersionAnswered(between((3, 9, 0), (3, 9, ANY_PATCH), API_VERSIONS)))
    assert scraped(model, recorders)["txn_exporter_broker_info"] == [
        ({"version": "3.9.x", "source": "api_versions"}, 1.0)
    ]
    model.apply(BrokerVersionSeen("3.9.1"))
    model.apply(BrokerVersionAnswered(between((3, 9, 0), (3, 9, ANY_PATCH), API_VERSIONS)))
    assert scraped(model, recorders)["txn_exporter_broker_info"] == [({"version": "3.9.1", "source": "log"}, 1.0)]
    model.apply(BrokerVersionSeen("7.7.1-ccs"))  # a restart into a vendor's build: shown as written
    assert scraped(model, recorders)["txn_exporter_broker_info"] == [({"version": "7.7.1-ccs", "source": "log"}, 1.0)]
    assert model.broker_version() is not None and not model.broker_version().known


def test_every_known_bug_has_a_count_from_the_start_and_the_last_count_replaces_it() -> None:
    model, recorders = model_and_recorders()
    matching = scraped(model, recorders)["kafka_transactions_matching_known_bug"]
    assert sorted(labels["bug"] for labels, _ in matching) == sorted(bug.jira for bug in KNOWN_BUGS)
    assert {value for _, value in matching} == {0.0}
    model.apply(KnownBugsCounted({"KAFKA-16352": 2}))
    model.apply(KnownBugsCounted({"KAFKA-20090": 1}))
    counts = {
        labels["bug"]: value for labels, value in scraped(model, recorders)["kafka_transactions_matching_known_bug"]
    }
    assert counts["KAFKA-20090"] == 1.0 and counts["KAFKA-16352"] == 0.0 and len(counts) == len(KNOWN_BUGS)
