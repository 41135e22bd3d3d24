"""Pure decoding of `__transaction_state`: bytes in, dataclasses out, typed errors. No I/O."""

from exporter.codec.errors import DecodeError
from exporter.codec.states import TransactionState
from exporter.codec.transaction_log import (
    PARTITIONS_SKIPPED,
    VALUE_FIELDS,
    TransactionLogRecord,
    TransactionLogValue,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
    value_from_fields,
)

__all__ = [
    "PARTITIONS_SKIPPED",
    "VALUE_FIELDS",
    "DecodeError",
    "TransactionLogRecord",
    "TransactionLogValue",
    "TransactionState",
    "decode_key",
    "decode_record",
    "decode_value",
    "encode_key",
    "encode_value",
    "value_from_fields",
]
