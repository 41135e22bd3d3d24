"""Synthetic-but-valid __transaction_state segments, built with the project's encoders."""

from __future__ import annotations

from pathlib import Path

from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value
from txn_workshop.record_batches import encode_batch

S = TransactionState


class Log:
    """Records of one __transaction_state partition, appended in order."""

    def __init__(self, partition: int = 0) -> None:
        self.partition = partition
        self.records: list[tuple[bytes, bytes | None, int]] = []

    def add(
        self,
        tid: str,
        ts: int,
        state: S | None,
        pid: int = 1,
        epoch: int = 0,
        timeout: int = 60000,
        partitions: dict | None = None,
        start: int = -1,
        version: int = 1,
        ctv: int = 0,
    ) -> None:
        if state is None:
            self.records.append((encode_key(tid), None, ts))
            return
        value = TransactionLogValue(
            version=version,
            producer_id=pid,
            producer_epoch=epoch,
            transaction_timeout_ms=timeout,
            state=state,
            partitions=partitions if partitions is not None else {},
            last_update_timestamp_ms=ts,
            start_timestamp_ms=start,
            client_transaction_version=ctv,
        )
        self.records.append((encode_key(tid), encode_value(value), ts))

    def transaction(
        self,
        tid: str,
        begin: int,
        prepare: int,
        complete: int,
        commit: bool = True,
        pid: int = 1,
        epoch: int = 0,
        timeout: int = 60000,
        abort_epoch: int | None = None,
    ) -> None:
        parts = {"orders": [0, 1]}
        self.add(tid, begin, S.ONGOING, pid, epoch, timeout, parts, begin)
        ep = epoch if abort_epoch is None else abort_epoch
        self.add(tid, prepare, S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, pid, ep, timeout, parts, begin)
        self.add(tid, complete, S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, pid, ep, timeout, {}, begin)

    def write(self, log_dir: Path, base_offset: int = 0) -> Path:
        d = log_dir / f"__transaction_state-{self.partition}"
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{base_offset:020d}.log"
        path.write_bytes(b"".join(encode_batch(base_offset + i, [r]) for i, r in enumerate(self.records)))
        return path
