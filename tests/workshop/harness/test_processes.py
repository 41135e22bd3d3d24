"""The harness's process helpers that need no broker."""

from __future__ import annotations

import socket

from txn_workshop.harness.processes import LOWEST_PORT, first_ephemeral_port, free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range_clients_draw_from() -> None:
    first_ephemeral = first_ephemeral_port()
    for _ in range(20):
        port = free_port()
        assert LOWEST_PORT <= port < first_ephemeral
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    # An outgoing connection's local port: never one that free_port gives.
    with socket.socket() as client, socket.socket() as server:
        server.bind(("127.0.0.1", free_port()))
        server.listen()
        client.connect(server.getsockname())
        assert client.getsockname()[1] >= first_ephemeral
