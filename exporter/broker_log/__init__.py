"""Pure parsers of the broker's own log file: the coordinator lines KIP-1344's append-error and
marker-retry metrics need, which never reach `__transaction_state`.

API:
    parser = BrokerLogParser()
    events = parser.feed(lines)          # complete lines as bytes, in file order
    parser.lines, parser.malformed, parser.unrecognized   # cumulative self-metric counts
    error_name("org.apache.kafka.common.errors.NotEnoughReplicasException")  # "NOT_ENOUGH_REPLICAS"

exporter.sources.broker_log_tail follows the file and feeds the parser; see exporter.broker_log.lines for
the formats.
"""

from exporter.broker_log.errors import ERROR_NAMES, UNKNOWN, error_name
from exporter.broker_log.parser import BrokerLogEvent, BrokerLogParser

__all__ = ["ERROR_NAMES", "UNKNOWN", "BrokerLogEvent", "BrokerLogParser", "error_name"]
