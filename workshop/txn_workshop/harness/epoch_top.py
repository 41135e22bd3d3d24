"""A transactional id driven to the top of the producer epoch, and a TV2 transaction timed out there
(KAFKA-20090: before 4.3.0 it stays ONGOING for good).

The epoch is driven up with InitProducerId, the request every producer sends as it starts, which bumps
the id's epoch by one: sent back to back on one connection, each as soon as the last is answered (the
coordinator takes one transition of an id at a time; a second in flight gets CONCURRENT_TRANSACTIONS),
about 1 ms each on a local broker: 32,765 of them in about 35 s. Kafka's clients send one per producer
they create (a Java KafkaProducer and its initTransactions take tens of ms). Raw frames on a socket,
encoded by kafka-python's protocol classes (its client's event loop took 5.6 ms a request).

Then java/EpochTop.java (the broker version's kafka-clients, TV2 against a broker whose
transaction.version is 2) opens a transaction at the epoch below the top, lets the coordinator abort it
on its timeout, and opens the next (see its docstring).
"""

from __future__ import annotations

import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

from txn_workshop.harness.jars import kafka_libs
from txn_workshop.harness.java_workload import JavaWorkloadError, compiled_classes

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

SOURCE = "EpochTop.java"
TRANSACTION_COORDINATOR = 1  # FindCoordinator's key type
# Versions every pinned 4.x broker answers: FindCoordinator v4 (a batch of keys), InitProducerId v4.
FIND_COORDINATOR_VERSION = 4
INIT_PRODUCER_ID_VERSION = 4
# Errors the coordinator answers while it is not ready for the id yet: retried.
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS = 14, 15, 16, 51
RETRIED = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS}


class EpochTopError(RuntimeError):
    pass


class _Connection:
    """One socket to one broker, a request at a time (the next sent once the last is answered)."""

    def __init__(self, host: str, port: int) -> None:
        self._socket = socket.create_connection((host, port), timeout=30)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation_id = 0

    def ask(self, request: Any, response_class: Any, version: int) -> Any:
        self._correlation_id += 1
        request.with_header(correlation_id=self._correlation_id, client_id="epoch-top")
        self._socket.sendall(request.encode(version=version, header=True, framed=True))
        (size,) = struct.unpack(">i", self._read(4))
        return response_class.decode(self._read(size), version=version, header=True)

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._socket.recv(size - len(data))
            if not chunk:
                raise EpochTopError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self._socket.close()


def _coordinator(broker: KafkaBroker, transactional_id: str, timeout: float) -> tuple[str, int]:
    host, port = broker.bootstrap_servers.split(":")
    connection = _Connection(host, int(port))
    deadline = time.monotonic() + timeout
    try:
        while True:
            request = FindCoordinatorRequest(key_type=TRANSACTION_COORDINATOR, coordinator_keys=[transactional_id])
            (found,) = connection.ask(request, FindCoordinatorResponse, FIND_COORDINATOR_VERSION).coordinators
            if found.error_code == 0:
                return found.host, found.port
            if found.error_code not in RETRIED or time.monotonic() > deadline:
                raise EpochTopError(f"FindCoordinator for {transactional_id!r}: error {found.error_code}")
            time.sleep(0.2)  # __transaction_state is being created, or its partition loaded
    finally:
        connection.close()


def drive_epoch(broker: KafkaBroker, transactional_id: str, epoch: int, timeout: float = 300) -> tuple[int, int]:
    """Sends InitProducerId for `transactional_id` until the coordinator gives it `epoch` (the id must
    be new or at a lower epoch, with no transaction open); (producer id, epoch) as last answered."""
    connection = _Connection(*_coordinator(broker, transactional_id, timeout))
    deadline = time.monotonic() + timeout
    try:
        while True:
            request = InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
            )
            answer = connection.ask(request, InitProducerIdResponse, INIT_PRODUCER_ID_VERSION)
            if answer.error_code == 0 and answer.producer_epoch >= epoch:
                return answer.producer_id, answer.producer_epoch
            if answer.error_code not in (0, *RETRIED) or time.monotonic() > deadline:
                raise EpochTopError(f"InitProducerId for {transactional_id!r}: {answer}")
    finally:
        connection.close()


@dataclass(frozen=True)
class Step:
    """One of EpochTop's steps, as the coordinator described the id after it."""

    name: str  # init, timed-out, aborted, open
    producer_id: int
    epoch: int
    state: str  # as kafka-clients' TransactionState prints it: Empty, Ongoing, CompleteAbort...


def timed_out_at_the_top(
    broker: KafkaBroker, topic: str, transactional_id: str, timeout_ms: int, timeout: float = 300
) -> list[Step]:
    """Runs java/EpochTop.java against `broker` (its version's client): the id's epoch must be two
    below the top already (drive_epoch(..., 32765)). Returns its four steps; the last transaction is
    left open when it returns (the process halts without closing its producer)."""
    classes = compiled_classes(broker.version, SOURCE)
    proc = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            f"{classes}:{kafka_libs(broker.version)}/*",
            "EpochTop",
            "--bootstrap",
            broker.bootstrap_servers,
            "--topic",
            topic,
            "--id",
            transactional_id,
            "--timeout-ms",
            str(timeout_ms),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise JavaWorkloadError(f"EpochTop failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    steps = []
    for line in proc.stdout.splitlines():
        name, producer_id, epoch, state = line.split("\t")
        steps.append(Step(name, int(producer_id), int(epoch), state))
    return steps
