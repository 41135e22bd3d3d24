"""The contracts every floor above shares: the events sources emit (events), and the KIP rules
(lifecycle: transactions and timeouts, KIP-588/890; hanging_rules: late and hanging, KIP-664). Pure,
no I/O. The transaction states themselves are defined once, in exporter.codec.states."""
