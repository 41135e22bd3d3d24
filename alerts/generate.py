"""Generates the Prometheus recording and alerting rules, alerts/kafka-txn-exporter.rules.yml.

    python -m alerts.generate            # rewrites the rules file
    python -m alerts.generate --check    # exit 1 if the committed file differs
    python -m alerts.generate --grafana-url https://grafana.example.org \
        --runbook-url https://git.example.org/kafka-txn-exporter/blob/main/alerts/runbooks.md \
        --exporter-url 'https://{{ $labels.instance }}' \
        --output my.rules.yml           # your links

Metric names go through dashboards.metrics.ref (catalogue, PLANNED or BROKER_JMX only); the
dashboard links use the dashboards' uids; each runbook_url points at the alert's section of
alerts/runbooks.md (the tests check the section exists); a transaction alert's transactions_url
(also at the end of its description) is the exporter's /transactions view of the instance that
fired, filtered to the transactions the alert is about. Labels every alert carries:
severity (critical pages, warning makes a ticket), team (who owns it: alertmanager routes on it)
and component (exporter alerts inhibit `component="transactions"` symptoms of the same instance).
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from dashboards.generate import DRILLDOWN_UID, OVERVIEW_UID
from dashboards.generated import write_or_check
from dashboards.metrics import feature_of, ref

RULES_PATH = Path(__file__).parent / "kafka-txn-exporter.rules.yml"
DEFAULT_GRAFANA_URL = "https://grafana.example.com"
DEFAULT_RUNBOOK_URL = "https://github.com/kafka-txn-exporter/kafka-txn-exporter/blob/main/alerts/runbooks.md"
# The exporter as the alert's instance label names it (its scrape target); https:// if it serves TLS.
DEFAULT_EXPORTER_URL = "http://{{ $labels.instance }}"
EXPORTER_JOB = "kafka-txn-exporter"  # the job name the exporter must be scraped under (README)

TEAM_KAFKA = "kafka"  # owns the brokers and the transaction coordinator
TEAM_OBSERVABILITY = "observability"  # owns the exporter and the monitoring pipeline

# -- recording rules -----------------------------------------------------------------------------

P99_APPEND = "cluster_instance_target_state:kafka_transaction_state_log_append_latency_seconds:p99_rate5m"
P99_COMPLETION = "cluster_instance_result:kafka_transaction_marker_completion_seconds:p99_rate5m"
RETRIES_RATE = "cluster_instance_error:kafka_transaction_marker_retries:rate5m"
APPEND_ERRORS_RATE = "cluster_instance_target_state_error:kafka_transaction_state_log_append_errors:rate5m"
LAG_SUM = "cluster_instance:txn_exporter_partition_consumer_lag_records:sum"

RECORDING: tuple[tuple[str, str], ...] = (
    (
        P99_APPEND,
        "histogram_quantile(0.99, sum by (cluster, instance, target_state, le) (rate("
        f"{ref('kafka_transaction_state_log_append_latency_seconds_bucket')}[5m])))",
    ),
    (
        P99_COMPLETION,
        "histogram_quantile(0.99, sum by (cluster, instance, result, le) (rate("
        f"{ref('kafka_transaction_marker_completion_seconds_bucket')}[5m])))",
    ),
    (RETRIES_RATE, f"sum by (cluster, instance, error) (rate({ref('kafka_transaction_marker_retries_total')}[5m]))"),
    (
        APPEND_ERRORS_RATE,
        "sum by (cluster, instance, target_state, error) (rate("
        f"{ref('kafka_transaction_state_log_append_errors_total')}[5m]))",
    ),
    (LAG_SUM, f"sum by (cluster, instance) ({ref('txn_exporter_partition_consumer_lag_records')})"),
)
RECORDING_NAMES = frozenset(name for name, _ in RECORDING)

# -- alerts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str
    severity: str  # critical | warning
    team: str
    component: str  # transactions | exporter
    summary: str
    description: str
    dashboard: str = OVERVIEW_UID
    # Why the e2e test may find this alert's inputs empty on a healthy cluster (None: must have data).
    expected_empty: str | None = None
    # The query string of the exporter's /transactions view listing the transactions the alert is
    # about (filters: state, comma-separated, HANGING for the scan's findings; min_age); None: no view.
    transactions: str | None = None

    @property
    def anchor(self) -> str:
        return self.name.lower()


def _q(expr: str, unit: str = "", suffix: str = "") -> str:
    """A Go-template query in an annotation: the first sample's value, humanized (``unit="s"``: as
    a duration), or "none". ``expr`` has ``$SAME`` where the alert's cluster and instance go."""
    expr = expr.replace("$SAME", '{cluster="%s", instance="%s"}')
    value = "humanizeDuration" if unit == "s" else "humanize"
    return (
        f"{{{{ with printf `{expr}` $labels.cluster $labels.instance | query }}}}"
        f"{{{{ . | first | value | {value} }}}}{suffix}{{{{ else }}}}none{{{{ end }}}}"
    )


RATE_VALUE = '{{ $value | printf "%.2f" }}/s'


BROKER_LOG_FAULT = "needs --broker-log; counter series appear with the first event (a fault)"


def _feature_reason(*names: str) -> str | None:
    for name in names:
        feature = feature_of(name)
        if feature is not None:
            return feature
    return BROKER_LOG_FAULT


PENDING = ref("kafka_transactions_with_pending_markers")
PREPARES = "PREPARE_COMMIT,PREPARE_ABORT"  # the view's states of transactions waiting for markers
OLDEST = ref("kafka_transaction_pending_markers_oldest_age_seconds")

ALERTS: tuple[Alert, ...] = (
    Alert(
        "KafkaTransactionMarkersPendingTooLong",
        f"max by (cluster, instance) ({OLDEST}) > 30",
        "1m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "Transaction markers pending for {{ $value | humanizeDuration }} on {{ $labels.instance }}",
        "The oldest prepared transaction coordinated by {{ $labels.instance }} (cluster {{ $labels.cluster }})"
        " has waited {{ $value | humanizeDuration }} for its commit/abort markers; "
        + _q(f"sum({PENDING}$SAME)")
        + " transactions are waiting. Until the markers are written the"
        " last stable offset of their data partitions does not advance: read_committed consumers of those"
        " partitions are stuck. Marker retries: " + _q(f"sum({RETRIES_RATE}$SAME)", suffix="/s") + ".",
        transactions=f"?state={PREPARES}&min_age=30",
    ),
    Alert(
        "KafkaTransactionMarkerRetriesSustained",
        f"{RETRIES_RATE} > 0.1",
        "10m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "WriteTxnMarkers retried " + RATE_VALUE + " with {{ $labels.error }} on {{ $labels.instance }}",
        "The transaction coordinator on {{ $labels.instance }} (cluster {{ $labels.cluster }}) has been"
        " retrying transaction markers with {{ $labels.error }} at " + RATE_VALUE + " for 10 minutes."
        " Transactions waiting for markers: "
        + _q(f"sum({PENDING}$SAME)")
        + ", the oldest for "
        + _q(f"max({OLDEST}$SAME)", "s")
        + ".",
        expected_empty=_feature_reason("kafka_transaction_marker_retries_total"),
        transactions=f"?state={PREPARES}",
    ),
    Alert(
        "KafkaTransactionMarkerFailures",
        f"sum by (cluster, instance, error) (increase({ref('kafka_transaction_marker_failures_total')}[10m])) > 0",
        "0m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "Transaction markers permanently failed with {{ $labels.error }} on {{ $labels.instance }}",
        "{{ $value | humanize }} partition-level WriteTxnMarkers failures with {{ $labels.error }} in the last"
        " 10 minutes on {{ $labels.instance }} (cluster {{ $labels.cluster }}): the coordinator gave up"
        " sending those markers (fenced, epoch changed, or an unsupported partition).",
        expected_empty=_feature_reason("kafka_transaction_marker_failures_total"),
        transactions=f"?state={PREPARES},HANGING",
    ),
    Alert(
        "KafkaTransactionStateLogAppendErrors",
        f"{APPEND_ERRORS_RATE} > 0",
        "5m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "__transaction_state appends of {{ $labels.target_state }} failing with {{ $labels.error }} on"
        " {{ $labels.instance }}",
        "For 5 minutes the coordinator on {{ $labels.instance }} (cluster {{ $labels.cluster }}) has failed to"
        " append {{ $labels.target_state }} transitions to __transaction_state with {{ $labels.error }}, at"
        " " + RATE_VALUE + ". Producers see COORDINATOR_NOT_AVAILABLE/NOT_COORDINATOR and cannot"
        " begin, commit or abort transactions coordinated there.",
        expected_empty=_feature_reason("kafka_transaction_state_log_append_errors_total"),
        transactions="",
    ),
    Alert(
        "KafkaTransactionCompleteAppendRetries",
        "sum by (cluster, instance) (rate("
        f"{ref('kafka_transaction_state_log_complete_append_retries_total')}[5m])) > 0",
        "10m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "Final COMPLETE_* appends retrying on {{ $labels.instance }}",
        "For 10 minutes the coordinator on {{ $labels.instance }} (cluster {{ $labels.cluster }}) has been"
        " retrying the final COMPLETE_COMMIT/COMPLETE_ABORT append of transactions whose markers are written"
        " (" + RATE_VALUE + "). Those transactional ids cannot start a new transaction"
        " (CONCURRENT_TRANSACTIONS).",
        expected_empty=_feature_reason("kafka_transaction_state_log_complete_append_retries_total"),
        transactions=f"?state={PREPARES}",
    ),
    Alert(
        "KafkaTransactionStateLogAppendLatencyHigh",
        f"{P99_APPEND} > 1",
        "10m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "p99 __transaction_state append latency of {{ $labels.target_state }} is {{ $value | humanizeDuration }}"
        " on {{ $labels.instance }}",
        "The 99th percentile of the time from submitting a {{ $labels.target_state }} transition to"
        " __transaction_state to the record being readable has been above 1 s for 10 minutes on"
        " {{ $labels.instance }} (cluster {{ $labels.cluster }}): {{ $value | humanizeDuration }}. EndTxn and"
        " AddPartitionsToTxn wait for these appends. p99 prepare-to-complete: "
        + _q(f"max({P99_COMPLETION}$SAME)", "s")
        + ". The slowest appends' transactional ids are the"
        " exemplars of the latency panels.",
        transactions="",
    ),
    Alert(
        "KafkaTransactionsLate",
        f"sum by (cluster, instance) ({ref('kafka_transactions_late')}) > 0",
        "5m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "{{ $value }} transactions outlived their timeout on {{ $labels.instance }}",
        "{{ $value }} open transactions coordinated by {{ $labels.instance }} (cluster {{ $labels.cluster }})"
        " are older than their transaction timeout: the coordinator should have aborted them. Data partitions"
        " with late transactions: " + _q(f"sum({ref('kafka_partitions_with_late_transactions')}$SAME)") + ".",
        expected_empty=_feature_reason("kafka_transactions_late"),
        transactions="?state=ONGOING",
    ),
    Alert(
        "KafkaHangingTransactions",
        f"sum by (cluster, instance) ({ref('kafka_hanging_transactions')}) > 0",
        "5m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "{{ $value }} hanging transactions seen by {{ $labels.instance }}",
        "{{ $value }} transactions are open on data partitions while their coordinator no longer has them"
        " ongoing ({{ $labels.instance }}, cluster {{ $labels.cluster }}). They hold the last stable offset:"
        " read_committed consumers of those partitions make no progress and compaction stops there, until"
        " the transactions are aborted (kafka-transactions.sh --find-hanging / abort).",
        expected_empty=_feature_reason("kafka_hanging_transactions"),
        transactions="?state=HANGING",
    ),
    Alert(
        "TxnExporterDown",
        f'up{{job="{EXPORTER_JOB}"}} == 0',
        "2m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} is not scraped",
        "Prometheus has failed to scrape kafka-txn-exporter at {{ $labels.instance }} (cluster"
        " {{ $labels.cluster }}) for 2 minutes: transactions coordinated by that broker are not monitored.",
        dashboard=DRILLDOWN_UID,
    ),
    Alert(
        "TxnExporterSourceDown",
        f"{ref('txn_exporter_source_up')} == 0",
        "2m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} cannot read __transaction_state",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster {{ $labels.cluster }}) has not been able to"
        " read __transaction_state from Kafka for 2 minutes; its transaction metrics are frozen (the oldest"
        " pending-markers age keeps growing).",
        dashboard=DRILLDOWN_UID,
    ),
    Alert(
        "TxnExporterLagging",
        f"{LAG_SUM} > 1000",
        "10m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} is {{ $value | humanize }} records behind",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster {{ $labels.cluster }}) has been more than 1000"
        " records behind the high watermark of its __transaction_state partitions for 10 minutes"
        " ({{ $value | humanize }}); its gauges describe the past. Partitions still replaying: "
        + _q(f'sum({ref("txn_exporter_partitions_followed")}{{cluster="%s", instance="%s", phase="replaying"}})')
        + ".",
        dashboard=DRILLDOWN_UID,
    ),
    Alert(
        "TxnExporterReplayStuck",
        f'{ref("txn_exporter_partitions_followed")}{{phase="replaying"}} > 0',
        "15m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} has partitions replaying for 15 minutes",
        "{{ $value }} __transaction_state partitions of kafka-txn-exporter at {{ $labels.instance }} (cluster"
        " {{ $labels.cluster }}) have not caught up with their history for 15 minutes; until they do their"
        " transactions are not counted live.",
        dashboard=DRILLDOWN_UID,
    ),
    Alert(
        "TxnExporterDecodeErrors",
        f"sum by (cluster, instance, reason) (increase({ref('kafka_transaction_state_log_decode_errors_total')}[10m])) > 0",
        "0m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} skipped records it could not decode ({{ $labels.reason }})",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster {{ $labels.cluster }}) skipped"
        " {{ $value | humanize }} __transaction_state records in 10 minutes ({{ $labels.reason }}): a Kafka"
        " version writing a format it does not know, or corruption. Its transaction counts may be wrong.",
        dashboard=DRILLDOWN_UID,
        expected_empty="counter series appear with the first decode error (a fault)",
    ),
)

# -- rendering -----------------------------------------------------------------------------------


def _dashboard_url(grafana_url: str, alert: Alert) -> str:
    return (
        f"{grafana_url.rstrip('/')}/d/{alert.dashboard}"
        "?var-cluster={{ $labels.cluster }}&var-instance={{ $labels.instance }}"
    )


def rules(
    grafana_url: str = DEFAULT_GRAFANA_URL,
    runbook_url: str = DEFAULT_RUNBOOK_URL,
    exporter_url: str = DEFAULT_EXPORTER_URL,
) -> dict:
    alerting = []
    for alert in ALERTS:
        rule: dict = {"alert": alert.name, "expr": alert.expr}
        if alert.for_ != "0m":
            rule["for"] = alert.for_
        rule["labels"] = {"severity": alert.severity, "team": alert.team, "component": alert.component}
        description = alert.description
        if alert.transactions is not None:
            transactions_url = f"{exporter_url.rstrip('/')}/transactions{alert.transactions}"
            description += f" Which transactions: {transactions_url}"
        rule["annotations"] = {
            "summary": alert.summary,
            "description": description,
            "runbook_url": f"{runbook_url}#{alert.anchor}",
            "dashboard_url": _dashboard_url(grafana_url, alert),
        }
        if alert.transactions is not None:
            rule["annotations"]["transactions_url"] = transactions_url
        alerting.append(rule)
    return {
        "groups": [
            {"name": "kafka-txn-exporter.recording", "rules": [{"record": n, "expr": e} for n, e in RECORDING]},
            {"name": "kafka-txn-exporter.alerts", "rules": alerting},
        ]
    }


def with_short_for(document: dict, for_: str = "5s", interval: str | None = None) -> dict:
    """The same rules with every `for:` shortened (tests: Prometheus evaluating every second)."""
    document = copy.deepcopy(document)
    for group in document["groups"]:
        if interval:
            group["interval"] = interval
        for rule in group["rules"]:
            if "alert" in rule and "for" in rule:
                rule["for"] = for_
    return document


HEADER = "# Generated by `python -m alerts.generate` from alerts/generate.py: do not edit by hand.\n"


def render(document: dict) -> str:
    return HEADER + yaml.safe_dump(document, sort_keys=False, width=4096, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m alerts.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is not up to date")
    parser.add_argument("--grafana-url", default=DEFAULT_GRAFANA_URL)
    parser.add_argument("--runbook-url", default=DEFAULT_RUNBOOK_URL, help="runbooks.md as your users reach it")
    parser.add_argument(
        "--exporter-url",
        default=DEFAULT_EXPORTER_URL,
        help="the exporter that fired, as a Go template (its /transactions view is linked)",
    )
    parser.add_argument("--output", type=Path, default=RULES_PATH)
    args = parser.parse_args(argv)
    text = render(rules(args.grafana_url, args.runbook_url, args.exporter_url))
    return write_or_check({args.output: text}, "python -m alerts.generate", args.check)


if __name__ == "__main__":
    sys.exit(main())
