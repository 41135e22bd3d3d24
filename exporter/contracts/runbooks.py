"""The alerts' runbook: where it is, and the alerts the view's diagnosis links to.

One definition for the alert rules (alerts/generate.py names its alerts with these), the mixin's
default runbook URL (queries/placeholders.py) and the `/transactions` diagnosis, which links a
stuck transaction to the section of the alert that fires for it. Each section's anchor is its
alert's name in lower case (alerts/runbooks.md's headings; tests/view/diagnosis/test_commands.py
checks both).
"""

RUNBOOK_URL = "https://github.com/kafka-txn-exporter/kafka-txn-exporter/blob/main/alerts/runbooks.md"

MARKERS_PENDING = "KafkaTransactionMarkersPendingTooLong"
MARKER_FAILURES = "KafkaTransactionMarkerFailures"
APPEND_ERRORS = "KafkaTransactionStateLogAppendErrors"
LATE = "KafkaTransactionsLate"
HANGING = "KafkaHangingTransactions"
KNOWN_BUG = "KafkaTransactionsMatchingKnownBug"
# The sections the diagnosis links to.
DIAGNOSED = (MARKERS_PENDING, MARKER_FAILURES, APPEND_ERRORS, LATE, HANGING, KNOWN_BUG)
