"""Why a transaction of the view is stuck and what to do: pure rules over a view row and the
cluster's state, one job per module.

`selection` (which rows get a diagnosis, what of the cluster they need looked up, the bounds),
`partition_facts` (what the cluster snapshot says of one partition), `meanings` (Kafka's meaning of
an error name), `causes` (a cause per marker or append error, the verdict on a late transaction's
client), `summary` (the likeliest cause in one line, its runbook section), `commands` (the Kafka
commands that confirm or fix it, the runbook links), `consumer_groups` (the groups whose committed
offsets wait behind a row) and `assembly` (a row's diagnosis put together, attached to the document).

Nothing here does I/O or reads a clock: `now_ms` is given, so the tests cover every error name.
"""
