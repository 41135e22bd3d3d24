"""The transactions view: which transactions are in flight, stuck or hanging, one row per transaction.

What the metrics count (no per-id series: unbounded cardinality), this lists, from what the model
already holds, at no cardinality cost. Served by the exporter's HTTP server with its TLS and basic
auth; `txn-exporter transactions --url URL` prints it in a terminal.

URL contract (alerts and runbooks link to it):

    GET /transactions[?state=S[,S...]][&min_age=AGE][&limit=N][&format=json|html][&scope=broker|cluster]

- HTML to a browser (`Accept` naming text/html), JSON otherwise; `format` forces either.
- `state`: ONGOING, PREPARE_COMMIT, PREPARE_ABORT, HANGING (case-insensitive, repeatable or
  comma-separated); default all. `min_age`: seconds, or with a unit (`500ms`, `90s`, `5m`, `2h`);
  `limit`: rows per list, 1 to 1000, default 100. Anything else: 400 with a one-line message.

- `scope=cluster`: this exporter's view merged with its configured peers' (`--peer`), each row
  naming its broker, a peer that does not answer a line (`cluster`).

Modules: `query` (filters, selection from the model's snapshot, the JSON document), `page` (HTML),
`table` (terminal), `endpoint` (the HTTP route), `cluster` (several exporters' views merged:
`txn-exporter transactions` with several exporters, and scope=cluster), `diagnosis` (why a row is
stuck and what to do: a package, one module per part). Nothing here does I/O: the other
exporters' views are fetched by exporter.sources.peer_exporters.
"""
