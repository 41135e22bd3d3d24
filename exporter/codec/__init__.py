"""Pure decoding of `__transaction_state`: bytes in, dataclasses out, typed errors. No I/O."""

from exporter.codec.encode import encode_key, encode_value
from exporter.codec.errors import DecodeError
from exporter.codec.record import TransactionLogRecord, decode_key, decode_record
from exporter.codec.states import TransactionState
from exporter.codec.value import PARTITIONS_SKIPPED, VALUE_FIELDS, TransactionLogValue, value_from_fields
from exporter.codec.value_decode import decode_value

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
