"""The `__transaction_state` value's fields, declared once: TransactionLogValue is the table.

Layout (Kafka's TransactionLogValue.json): int16 version, ProducerId int64, ProducerEpoch int16,
TransactionTimeoutMs int32, TransactionStatus int8, TransactionPartitions nullable [{Topic string,
PartitionIds [int32]}], TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64.
v0 is the classic encoding, v1 the flexible one (compact lengths and tagged fields after every
struct; the top-level tagged fields are the table's below, which tests/codec/test_kafka_schema.py
holds to the schema in the pinned Kafka jars).

The general reader of the tagged fields (tagged_fields), encode_value, value_from_fields, the JSON
of `txn-exporter decode` and the pipeline's columns are derived from the table: a new tagged field
is one line here (docs/changing.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, Final, Protocol, TypeVar

from exporter.codec.states import TransactionState

VALUE_VERSIONS = (0, 1)


class _PartitionsSkipped(Enum):
    """The `partitions` of a value decoded with partitions=False. Deliberately not a mapping: code
    that reads partitions from such a value fails loudly instead of seeing none. (A one-member enum:
    `partitions is PARTITIONS_SKIPPED` narrows the field's type, and a pickled value keeps it.)"""

    PARTITIONS_SKIPPED = "PARTITIONS_SKIPPED"

    def __repr__(self) -> str:
        return "PARTITIONS_SKIPPED"

    __str__ = __repr__


PARTITIONS_SKIPPED: Final = _PartitionsSkipped.PARTITIONS_SKIPPED

# {topic: [partition ids]} in the order the coordinator wrote them.
Partitions = dict[str, list[int]]
# A value's `partitions`: None when written as null; PARTITIONS_SKIPPED when decoded with partitions=False.
PartitionsField = Partitions | _PartitionsSkipped | None

_P_contra = TypeVar("_P_contra", contravariant=True)
_V_co = TypeVar("_V_co", covariant=True)


class ValueMaker(Protocol[_P_contra, _V_co]):
    """`make=`: called with the value's fields by position, in VALUE_FIELDS' order: the fields of
    every version, then the tagged ones (a prefix of them: those left out are at their defaults;
    all of them, then the unknown ones, maybe none, as a tuple, when the general reader read them),
    the partitions as `partitions=` made them. value_from_fields is the one that makes a
    TransactionLogValue."""

    def __call__(
        self,
        version: int,
        producer_id: int,
        producer_epoch: int,
        transaction_timeout_ms: int,
        state: TransactionState,
        partitions: _P_contra,
        last_update_timestamp_ms: int,
        start_timestamp_ms: int,
        /,
        *tagged: Any,
    ) -> _V_co: ...


# --- The value's fields: one table. ---
#
# TransactionLogValue's declaration is the table: each field's metadata says where it is on the
# wire (fixed() or tagged(), with its struct format), its annotation its type, its default the value
# of an absent tagged field. Everything else is derived from it: VALUE_FIELDS, the positional maker
# (value_from_fields), the tagged-field reader, encode_value, the JSON of `txn-exporter decode` and
# the pipeline's columns. A new tagged field (KAFKA-20357's, say) is one line in the class, after the
# last tagged one: decoded by the general reader, encoded, shown, stored.

INT8, INT16, INT32, INT64 = "b", "h", "i", "q"  # struct formats of Kafka's int types
ARRAY = "[]"  # TransactionPartitions, whose bytes are read by hand
_WIRES = (INT8, INT16, INT32, INT64, ARRAY)


def fixed(wire: str) -> dict[str, Any]:
    """A field of every value version, in the layout's order (the metadata of its dataclass field)."""
    return {"wire": wire, "tag": None}


def tagged(tag: int, wire: str) -> dict[str, Any]:
    """A v1 tagged field (the metadata of its dataclass field, whose default is the field's own)."""
    return {"wire": wire, "tag": tag}


@dataclass(frozen=True, slots=True)
class ValueField:
    """One row of the value's table (see TransactionLogValue)."""

    name: str  # TransactionLogValue's attribute, the key of the decode command's JSON
    wire: str  # struct format (INT8 to INT64), or ARRAY
    tag: int | None  # a v1 tagged field's tag; None: a field of every version
    default: Any  # a tagged field's value when absent; None for the others


@dataclass(slots=True, kw_only=True)
class TransactionLogValue:
    """A decoded value, its fields by name (keyword arguments only: all-int fields passed by
    position would swap silently). Its fields' metadata is the codec's table (see above)."""

    version: int = field(metadata=fixed(INT16))
    producer_id: int = field(metadata=fixed(INT64))
    producer_epoch: int = field(metadata=fixed(INT16))
    transaction_timeout_ms: int = field(metadata=fixed(INT32))
    state: TransactionState = field(metadata=fixed(INT8))
    # {topic: [partition ids]} in the order the coordinator wrote them; None when written as null;
    # PARTITIONS_SKIPPED when decoded with partitions=False.
    partitions: PartitionsField = field(metadata=fixed(ARRAY))
    last_update_timestamp_ms: int = field(metadata=fixed(INT64))
    start_timestamp_ms: int = field(metadata=fixed(INT64))
    # Tagged fields (v1 only), in tag order; their defaults when absent.
    previous_producer_id: int = field(default=-1, metadata=tagged(0, INT64))
    next_producer_id: int = field(default=-1, metadata=tagged(1, INT64))
    client_transaction_version: int = field(default=0, metadata=tagged(2, INT16))
    next_producer_epoch: int = field(default=-1, metadata=tagged(3, INT16))
    # Tagged fields this codec does not name, as (tag, bytes) in the order read. Always last.
    unknown_tagged_fields: tuple[tuple[int, bytes], ...] = ()


def value_fields(cls: type) -> tuple[ValueField, ...]:
    """The table of a value class declared as TransactionLogValue is (fields with fixed() or tagged()
    metadata, then unknown_tagged_fields). Raises TypeError if it is not one the codec can derive
    from: the fixed fields first, tagged ones after them in ascending tag order, each with a default."""
    declared = fields(cls)
    if not declared or declared[-1].name != "unknown_tagged_fields":
        raise TypeError(f"{cls.__name__}: unknown_tagged_fields must be the last field")
    rows: list[ValueField] = []
    for f in declared[:-1]:
        if "wire" not in f.metadata or f.metadata["wire"] not in _WIRES:
            raise TypeError(f"{cls.__name__}.{f.name}: no fixed() or tagged() metadata")
        tag = f.metadata["tag"]
        if tag is None:
            if rows and rows[-1].tag is not None:
                raise TypeError(f"{cls.__name__}.{f.name}: a fixed field after a tagged one")
            if f.default is not MISSING:
                raise TypeError(f"{cls.__name__}.{f.name}: a fixed field with a default")
        else:
            if f.default is MISSING or f.metadata["wire"] == ARRAY:
                raise TypeError(f"{cls.__name__}.{f.name}: a tagged field needs a default and an int type")
            if rows and rows[-1].tag is not None and tag <= rows[-1].tag:
                raise TypeError(f"{cls.__name__}.{f.name}: tag {tag} after tag {rows[-1].tag}")
        rows.append(ValueField(f.name, f.metadata["wire"], tag, None if tag is None else f.default))
    return tuple(rows)


def positional_maker(cls: type[Any]) -> Callable[..., Any]:
    """A `make=` for a value class declared as TransactionLogValue is: its fields by position, in
    its table's order, the tagged ones and unknown_tagged_fields optional. Generated from the table
    (as dataclasses generates __init__): on the hot path, a keyword call costs twice a positional
    one, and object.__new__ plus the stores costs less than the class's own call."""
    value_fields(cls)  # (checks the declaration)
    names = [f.name for f in fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params = []
    for f in fields(cls):
        if f.default is MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
    stores = "".join(f"    value.{name} = {name}\n" for name in names)
    source = f"def make({', '.join(params)}, /):\n    value = _new(_cls)\n{stores}    return value\n"
    exec(source, namespace)  # (text made above from the class's own field names)
    make: Callable[..., Any] = namespace["make"]
    make.__qualname__ = make.__name__ = f"{cls.__name__}_from_fields"
    make.__doc__ = f"A {cls.__name__} from its fields by position (see positional_maker)."
    return make


VALUE_FIELDS: Final = value_fields(TransactionLogValue)
TAGGED_FIELDS: Final = tuple(f for f in VALUE_FIELDS if f.tag is not None)
# The default `make=`: a TransactionLogValue from its fields by position (see ValueMaker).
value_from_fields: Final[ValueMaker[PartitionsField, TransactionLogValue]] = positional_maker(TransactionLogValue)
