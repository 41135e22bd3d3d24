"""TransactionLogKey v0 and TransactionLogValue v0/v1, as Kafka 3.6 to 4.x write them.

Layouts (Kafka's TransactionLogKey.json / TransactionLogValue.json):
  key:   int16 version (0), string TransactionalId
  value: int16 version, ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
         TransactionStatus int8, TransactionPartitions nullable [{Topic string, PartitionIds [int32]}],
         TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
  v0 is the classic encoding, v1 the flexible one (compact lengths and tagged fields after every
  struct; top-level tags 0 PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion,
  3 NextProducerEpoch, which Kafka's trunk writes (KIP-939)).

The value's fields are declared once, in TransactionLogValue (see "The value's fields: one table"):
the general decoder of the tagged fields, encode_value, value_from_fields, the JSON of
`txn-exporter decode` and the pipeline's columns are derived from it.

Tags this codec does not name (a newer Kafka's: KAFKA-20357 persists the last producer epoch as a
further tagged field) are kept, as (tag, bytes) in tag order, in the value's `unknown_tagged_fields`,
and the value decodes without them, as the broker's reader does. A value version above 1 is a
DecodeError of its own reason (unknown_value_version): Kafka changes the layout only with a version.
Tagged fields inside a partitions entry (no Kafka version defines any) are skipped.

Decoding is on the exporter's hot path, so it works on offsets into the buffer with precompiled
structs instead of a generic reader object; truncation surfaces as IndexError/struct.error and is
turned into one typed error at the boundary.

The coordinator model never reads TransactionPartitions, the one costly field (topic strings and id
lists: ~2 us of ~3 for a value naming 2 topics x 3 partitions). `partitions=False` walks the array
with every length and bound checked but builds nothing, and the value's `partitions` is
PARTITIONS_SKIPPED. What that walk cannot see is invalid UTF-8 inside a topic name.

`make=` builds the value from its fields by position (in the table's order: see ValueMaker) in
place of value_from_fields, which makes a TransactionLogValue, as json's hooks do: `txn-exporter
decode` formats JSON straight from the parsed fields, with no object in between; with
`partitions=PartitionsMemo(...)`, it formats each distinct partitions array once instead of once
per record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from typing import Any, Final, Generic, Protocol, TypeVar, overload

from exporter.codec.errors import DecodeError
from exporter.codec.states import TransactionState
from exporter.codec.varint import read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_KEY_HEAD = struct.Struct(">hh")
# version, producer id, epoch, timeout, status: the same 17 bytes in v0 and v1 ...
_VALUE_HEAD_V0 = struct.Struct(">hqhibi")  # ... plus the v0 partitions array length
_TIMESTAMPS = struct.Struct(">qq")

KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)
_VERSION_0, _VERSION_1 = (_I16.pack(v) for v in VALUE_VERSIONS)


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

_M = TypeVar("_M")  # what a PartitionsMemo converts an array to
_V = TypeVar("_V")  # what `make=` builds a value into
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


class PartitionsMemo(Generic[_M]):
    """A `partitions=` mode for a caller that makes something of each distinct partitions array
    rather than of each record's (txn-exporter decode: its JSON text). A v1 array that no fast path
    reads reaches `make` as `convert(its dict)`, made once per distinct array while it stays in
    `known` (by the array's bytes; cleared when it holds `limit`). Other arrays come as dicts.

    A known array is not walked again: where it would end is guessed from the shape of the tagged
    fields after it, and confirmed by finding the bytes up to there in `known`, which is enough: the
    bytes of a whole valid array end where the array does."""

    __slots__ = ("convert", "known", "limit")

    def __init__(self, convert: Callable[[Partitions | None], _M], limit: int) -> None:
        self.convert = convert
        self.known: dict[bytes, _M] = {}
        self.limit = limit


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


class TaggedLayout:
    """What the general reader of the top-level tagged fields needs of a table: the defaults of the
    known ones in table order, and by tag, each one's index there and struct."""

    __slots__ = ("defaults", "known")

    def __init__(self, tagged_fields: tuple[ValueField, ...]) -> None:
        self.defaults = [f.default for f in tagged_fields]
        self.known = {f.tag: (i, struct.Struct(">" + f.wire)) for i, f in enumerate(tagged_fields)}


_TAGGED_LAYOUT = TaggedLayout(TAGGED_FIELDS)
_TAGS = {f.name: f.tag for f in TAGGED_FIELDS if f.tag is not None}
_TAGGED_DEFAULTS = {f.name: f.default for f in TAGGED_FIELDS}

# The fast paths of decode_value are written for v1's layout as Kafka 4.x writes it: the fields of
# every version as below, and the first three tagged fields passed by position in this order. A
# change to the table that breaks either fails here, at import, not silently in a decoded field.
if "".join(f.wire for f in VALUE_FIELDS if f.tag is None) != "hqhib[]qq" or [f.name for f in TAGGED_FIELDS[:3]] != [
    "previous_producer_id",
    "next_producer_id",
    "client_transaction_version",
]:
    raise TypeError("TransactionLogValue's fixed fields or first tagged fields changed: see decode_value's fast paths")

# The usual top-level tagged fields of a v1 value: tag count 1, the tag, its size.
_ONLY_PREVIOUS_PRODUCER_ID = bytes((1, _TAGS["previous_producer_id"], 8))
_ONLY_CLIENT_TRANSACTION_VERSION = bytes((1, _TAGS["client_transaction_version"], 2))
# Two tagged fields, PreviousProducerId then ClientTransactionVersion: the head of each (tag count,
# tag, size; tag, size), and both fields read at once from the head of the first.
_PREVIOUS_THEN_CLIENT_VERSION_HEAD = bytes((2, _TAGS["previous_producer_id"], 8))
_CLIENT_VERSION_HEAD = bytes((_TAGS["client_transaction_version"], 2))
_PREVIOUS_THEN_CLIENT_VERSION = struct.Struct(">3xq2xh")
# What the fast paths pass for NextProducerId, between the two they read.
_PREVIOUS_PRODUCER_ID_DEFAULT: Final[int] = _TAGGED_DEFAULTS["previous_producer_id"]
_NEXT_PRODUCER_ID_DEFAULT: Final[int] = _TAGGED_DEFAULTS["next_producer_id"]


@dataclass(slots=True)
class TransactionLogRecord:
    offset: int
    timestamp_ms: int
    transactional_id: str
    value: TransactionLogValue | None  # None: a tombstone (the transactional id expired)
    # The value's bytes, as decode_record got them: the model keeps them for in-flight transactions,
    # whose partitions the transactions view decodes when it shows them (PARTITIONS_SKIPPED above).
    raw_value: bytes | None = field(default=None, compare=False, repr=False)


def decode_record(
    key: bytes, value: bytes | None, offset: int, timestamp_ms: int, partitions: bool = True
) -> TransactionLogRecord:
    """Decodes one record's key and value (None for a tombstone). Raises DecodeError."""
    # A v0 key of at most 259 bytes is compared to its expected header instead of being unpacked.
    n = len(key) - 4
    if 0 <= n < 256 and key[:4] == KEY_V0_HEADS[n]:
        try:
            tid = key[4:].decode()
        except UnicodeDecodeError as e:
            raise DecodeError("invalid_utf8", str(e)) from None
    else:
        tid = decode_key(key)
    return TransactionLogRecord(
        offset, timestamp_ms, tid, None if value is None else decode_value(value, partitions), value
    )


def decode_key(buf: bytes) -> str:
    """Returns the transactional id. Raises DecodeError."""
    try:
        version, length = _KEY_HEAD.unpack_from(buf, 0)
    except struct.error:
        raise DecodeError("truncated", f"key of {len(buf)} bytes") from None
    if version != KEY_VERSION:
        # The broker skips keys of other versions when it loads the log; so do we, but visibly.
        raise DecodeError("unknown_key_version", f"key version {version}")
    if length < 0:
        raise DecodeError("bad_length", f"transactional id length {length}")
    if 4 + length > len(buf):
        raise DecodeError("truncated", f"transactional id of {length} bytes in a {len(buf)}-byte key")
    return _utf8(buf[4 : 4 + length])


@overload
def decode_value(buf: bytes, partitions: bool = True) -> TransactionLogValue: ...
@overload
def decode_value(buf: bytes, partitions: bool, make: ValueMaker[PartitionsField, _V]) -> _V: ...
@overload
def decode_value(buf: bytes, partitions: PartitionsMemo[_M], make: ValueMaker[Partitions | _M | None, _V]) -> _V: ...
def decode_value(
    buf: bytes, partitions: bool | PartitionsMemo[Any] = True, make: ValueMaker[Any, object] = value_from_fields
) -> object:
    """Decodes a non-null value; with partitions=False, see PARTITIONS_SKIPPED; for `make`, the
    module doc; for PartitionsMemo, its doc. Raises DecodeError.

    Value v1, which every 4.x coordinator writes, is decoded inline: a call less per record."""
    version = buf[:2]  # compared as bytes: cheaper than unpacking on every record
    try:
        if version == _VERSION_1:
            state = _STATES_BY_BYTE[buf[16]]  # TransactionStatus, checked before anything else is read
            if state is None:
                raise DecodeError("unknown_state", f"transaction state id {struct.unpack_from('>b', buf, 16)[0]}")
            # Two fast paths for the shapes brokers write, one struct each; else the general reader.
            count = buf[17]
            n = buf[18] - 1
            # Both also read PreviousProducerId when it is the only tagged field (pre-TV2 clients:
            # librdkafka, Java before 4.0) and ends the value.
            if count < 2:  # an empty partitions array (Complete* records) or a null one (Empty records)
                if len(buf) == 45 and buf[34:37] == _ONLY_PREVIOUS_PRODUCER_ID:
                    producer_id, epoch, timeout_ms, last_update, start, previous_id = (
                        _V1_NO_PARTITIONS_PREVIOUS_ID.unpack_from(buf, 0)
                    )
                    return make(
                        1,
                        producer_id,
                        epoch,
                        timeout_ms,
                        state,
                        ({} if count else None) if partitions else PARTITIONS_SKIPPED,
                        last_update,
                        start,
                        previous_id,
                    )
                producer_id, epoch, timeout_ms, last_update, start = _V1_NO_PARTITIONS.unpack_from(buf, 0)
                # (A PartitionsField, or what a PartitionsMemo made of the array.)
                topics: object = ({} if count else None) if partitions else PARTITIONS_SKIPPED
                pos = 34
            elif count == 2 and 0 < n < 0x7F and len(buf) >= 42 + n and buf[19 + n] == 2 and buf[24 + n] == 0:
                # One topic with one partition and no tagged fields in its entry: Ongoing and Prepare*.
                if len(buf) == 52 + n and buf[41 + n : 44 + n] == _ONLY_PREVIOUS_PRODUCER_ID:
                    producer_id, epoch, timeout_ms, topic, first, last_update, start, previous_id = (
                        _V1_ONE_TOPIC_PREVIOUS_ID[n].unpack_from(buf, 0)
                    )
                    return make(
                        1,
                        producer_id,
                        epoch,
                        timeout_ms,
                        state,
                        {topic.decode(): [first]} if partitions else PARTITIONS_SKIPPED,
                        last_update,
                        start,
                        previous_id,
                    )
                producer_id, epoch, timeout_ms, topic, first, last_update, start = _V1_ONE_TOPIC[n].unpack_from(buf, 0)
                topics = {topic.decode(): [first]} if partitions else PARTITIONS_SKIPPED
                pos = 41 + n
            else:
                if not partitions:
                    topics, pos = PARTITIONS_SKIPPED, _v1_partitions_end(buf)
                elif partitions is True:
                    topics, pos = _v1_partitions(buf)
                else:
                    topics, pos = _memo_v1_partitions(buf, partitions)
                around = _V1_AROUND_PARTITIONS.get(pos) or _v1_around_partitions(pos)
                producer_id, epoch, timeout_ms, last_update, start = around.unpack_from(buf, 0)
                pos += 16
            # Top-level tagged fields: the usual cases first.
            tags = buf[pos : pos + 3]
            if tags[0] == 0:
                return make(1, producer_id, epoch, timeout_ms, state, topics, last_update, start)
            if tags == _ONLY_PREVIOUS_PRODUCER_ID:  # a 4.x coordinator, a client before TV2
                previous_id = _I64.unpack_from(buf, pos + 3)[0]
                return make(1, producer_id, epoch, timeout_ms, state, topics, last_update, start, previous_id)
            if tags == _PREVIOUS_THEN_CLIENT_VERSION_HEAD and buf[pos + 11 : pos + 13] == _CLIENT_VERSION_HEAD:
                # A 4.3+ coordinator, a TV2 client: PreviousProducerId and ClientTransactionVersion.
                previous_id, client_version = _PREVIOUS_THEN_CLIENT_VERSION.unpack_from(buf, pos)
                return make(
                    1,
                    producer_id,
                    epoch,
                    timeout_ms,
                    state,
                    topics,
                    last_update,
                    start,
                    previous_id,
                    _NEXT_PRODUCER_ID_DEFAULT,
                    client_version,
                )
            if tags == _ONLY_CLIENT_TRANSACTION_VERSION:  # a 4.0-4.2 coordinator, a TV2 client
                client_version = _I16.unpack_from(buf, pos + 3)[0]
                return make(
                    1,
                    producer_id,
                    epoch,
                    timeout_ms,
                    state,
                    topics,
                    last_update,
                    start,
                    _PREVIOUS_PRODUCER_ID_DEFAULT,
                    _NEXT_PRODUCER_ID_DEFAULT,
                    client_version,
                )
            # (The general path: every tagged field the table names, then the unknown ones, passed.)
            return make(
                1, producer_id, epoch, timeout_ms, state, topics, last_update, start, *_v1_tagged_fields(buf, pos)
            )
        if version == _VERSION_0:
            return _decode_value_v0(buf, partitions, make)
    except (IndexError, struct.error):
        raise DecodeError("truncated", f"value v{version[1]} of {len(buf)} bytes") from None
    except UnicodeDecodeError as e:
        raise DecodeError("invalid_utf8", f"topic name: {e}") from None
    if len(buf) < 2:
        raise DecodeError("truncated", f"value of {len(buf)} bytes")
    raise DecodeError("unknown_value_version", f"value version {_I16.unpack_from(buf, 0)[0]}")


def _decode_value_v0(buf: bytes, build_partitions: bool | PartitionsMemo[Any], make: ValueMaker[Any, _V]) -> _V:
    # (PartitionsMemo gets dicts here: v0 values are from brokers before 4.0, and rare.)
    _, producer_id, epoch, timeout_ms, status, count = _VALUE_HEAD_V0.unpack_from(buf, 0)
    state = _STATES.get(status)
    if state is None:
        raise DecodeError("unknown_state", f"transaction state id {status}")
    pos = 21
    if count == 1:
        # The common shape (one topic): one struct per topic-name length reads the rest at once.
        n = _I16.unpack_from(buf, 21)[0]
        if 0 <= n < 256 and len(buf) >= 47 + n:
            topic, ids, first, last_update, start = _V0_ONE_TOPIC[n].unpack_from(buf, 23)
            if ids == 1:
                return make(
                    0,
                    producer_id,
                    epoch,
                    timeout_ms,
                    state,
                    {topic.decode(): [first]} if build_partitions else PARTITIONS_SKIPPED,
                    last_update,
                    start,
                )
    partitions: PartitionsField
    if count == -1:
        partitions = None if build_partitions else PARTITIONS_SKIPPED
    elif count < 0:
        raise DecodeError("bad_length", f"partitions array length {count}")
    elif not build_partitions:
        pos = _v0_partitions_end(buf, count)
        partitions = PARTITIONS_SKIPPED
    else:
        size = len(buf)
        # Each entry takes at least 6 bytes: refuse absurd counts before looping on them.
        if count * 6 > size - pos:
            raise IndexError
        partitions = {}
        for _ in range(count):
            n = _I16.unpack_from(buf, pos)[0]
            if n < 0:
                raise DecodeError("bad_length", f"topic name length {n}")
            pos += 2
            end = pos + n
            if end > size:
                raise IndexError
            topic = buf[pos:end].decode()
            n = _I32.unpack_from(buf, end)[0]
            pos = end + 4
            if n < 0:
                raise DecodeError("bad_length", f"partition ids array length {n}")
            end = pos + 4 * n
            if end > size:
                raise IndexError
            partitions[topic] = list(_int32_array(n).unpack_from(buf, pos))
            pos = end
    last_update, start = _TIMESTAMPS.unpack_from(buf, pos)
    return make(0, producer_id, epoch, timeout_ms, state, partitions, last_update, start)


def _v0_partitions_end(buf: bytes, count: int) -> int:
    """Where the v0 partitions array of `count` entries ends, every length and bound checked."""
    size = len(buf)
    pos = 21
    if count * 6 > size - pos:
        raise IndexError
    for _ in range(count):
        n = _I16.unpack_from(buf, pos)[0]
        if n < 0:
            raise DecodeError("bad_length", f"topic name length {n}")
        pos += 2 + n
        n = _I32.unpack_from(buf, pos)[0]
        if n < 0:
            raise DecodeError("bad_length", f"partition ids array length {n}")
        pos += 4 + 4 * n
        if pos > size:
            raise IndexError
    return pos


def _memo_v1_partitions(buf: bytes, memo: PartitionsMemo[_M]) -> tuple[_M, int]:
    """For PartitionsMemo: what the v1 array is converted to, and where it ends."""
    size = len(buf)
    # Where the array ends if the value ends with one of the tagged-field shapes decode_value knows
    # (timestamps, then the tags); a wrong guess finds nothing in `known`.
    if buf[size - 11 : size - 8] == _ONLY_PREVIOUS_PRODUCER_ID:
        pos = size - 27
    elif buf[size - 15 : size - 12] == _PREVIOUS_THEN_CLIENT_VERSION_HEAD:
        pos = size - 31
    elif buf[size - 5 : size - 2] == _ONLY_CLIENT_TRANSACTION_VERSION:
        pos = size - 21
    else:
        pos = size - 17  # no tagged fields
    known = memo.known
    if pos > 17:
        found = known.get(buf[17:pos], known)  # (`known` itself: never a value in it)
        if found is not known:
            return found, pos  # type: ignore[return-value]  # because not `known`, so one of its values
    topics, pos = _v1_partitions(buf)
    if len(known) >= memo.limit:
        known.clear()
    found = known[buf[17:pos]] = memo.convert(topics)
    return found, pos


def _v1_partitions(buf: bytes) -> tuple[Partitions | None, int]:
    """The v1 partitions array in general; returns it and the position after it."""
    size = len(buf)
    count = buf[17]
    if count < 0x80:  # lengths below 127 (one-byte varints) are the rule: read them inline
        pos = 18
    else:
        count, pos = read_uvarint(buf, 17)
    if count == 0:
        return None, pos
    count -= 1
    # Each entry takes at least 3 bytes (topic length, ids length, tag count).
    if count * 3 > size - pos:
        raise IndexError
    partitions: Partitions = {}
    for _ in range(count):
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:
            raise DecodeError("bad_length", "null topic name")
        end = pos + n - 1
        if end > size:
            raise IndexError
        topic = buf[pos:end].decode()
        n = buf[end]
        if n < 0x80:
            pos = end + 1
        else:
            n, pos = read_uvarint(buf, end)
        if n == 0:
            raise DecodeError("bad_length", "null partition ids array")
        end = pos + 4 * (n - 1)
        if end > size:
            raise IndexError
        partitions[topic] = list((_INT32_ARRAYS[n - 1] if n <= 64 else _int32_array(n - 1)).unpack_from(buf, pos))
        # The usual case: no tagged fields in the entry.
        pos = end + 1 if buf[end] == 0 else _skip_tagged_fields(buf, end)
    return partitions, pos


def _v1_partitions_end(buf: bytes) -> int:
    """Where the v1 partitions array ends, every length and bound checked as _v1_partitions does."""
    size = len(buf)
    count = buf[17]
    if count < 0x80:
        pos = 18
    else:
        count, pos = read_uvarint(buf, 17)
    if count == 0:
        return pos
    count -= 1
    if count * 3 > size - pos:
        raise IndexError
    for _ in range(count):
        n = buf[pos]  # lengths below 127 (one-byte varints) are the rule: read them inline
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:
            raise DecodeError("bad_length", "null topic name")
        pos += n - 1
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:
            raise DecodeError("bad_length", "null partition ids array")
        pos += 4 * (n - 1)
        if pos >= size:
            raise IndexError
        if buf[pos] == 0:
            pos += 1
        else:
            pos = _skip_tagged_fields(buf, pos)
    return pos


def _v1_tagged_fields(buf: bytes, pos: int) -> list[Any]:
    """The value's top-level tagged fields at `pos` (at least one): those the table names, in its
    order (their defaults when absent), then the unknown ones as a tuple of (tag, bytes)."""
    layout = _TAGGED_LAYOUT
    fields: list[Any] = layout.defaults.copy()
    known_tags = layout.known
    unknown: list[tuple[int, bytes]] | None = None
    tags, pos = read_uvarint(buf, pos)
    size = len(buf)
    for _ in range(tags):
        tag = buf[pos]
        length = buf[pos + 1]
        if tag < 0x80 and length < 0x80:  # one-byte tag and size: always, for the known tags
            pos += 2
        else:
            tag, pos = read_uvarint(buf, pos)
            length, pos = read_uvarint(buf, pos)
        end = pos + length
        if end > size:
            raise IndexError
        known = known_tags.get(tag)
        if known is not None:
            index, layout_of_tag = known
            if length != layout_of_tag.size:
                raise DecodeError("bad_length", f"tagged field {tag} of {length} bytes")
            fields[index] = layout_of_tag.unpack_from(buf, pos)[0]
        elif unknown is None:
            unknown = [(tag, bytes(buf[pos:end]))]
        else:
            unknown.append((tag, bytes(buf[pos:end])))
        pos = end
    fields.append(() if unknown is None else tuple(unknown))
    return fields


_STATES = {int(state): state for state in TransactionState}
# By the TransactionStatus byte read unsigned (an int8 below 0 reads as 128 to 255): None if unknown.
_STATES_BY_BYTE = tuple(_STATES.get(b) for b in range(256))
# A v0 key's first four bytes (version 0, id length n), by n.
KEY_V0_HEADS = [_KEY_HEAD.pack(KEY_VERSION, n) for n in range(256)]
# v1 fast paths, from the start of the value (version and TransactionStatus skipped, checked apart):
# producer id, epoch, timeout, (empty partitions array), both timestamps.
_V1_NO_PARTITIONS = struct.Struct(">2xqhi2xqq")
# producer id, epoch, timeout and both timestamps around a partitions array ending at a given
# position: one struct per position, made on first use and kept for the usual sizes.
_V1_AROUND_PARTITIONS: dict[int, struct.Struct] = {}
_V1_AROUND_CACHED_BELOW = 4096


def _v1_around_partitions(end: int) -> struct.Struct:
    around = struct.Struct(f">2xqhi{end - 16}xqq")
    if end < _V1_AROUND_CACHED_BELOW:
        _V1_AROUND_PARTITIONS[end] = around
    return around


# producer id, epoch, timeout, one topic's name (of n bytes, the index) and its one partition id,
# both timestamps; the one-byte lengths and tag count in between are checked apart.
_V1_ONE_TOPIC = [struct.Struct(f">2xqhi3x{n}sxixqq") for n in range(127)]
# The same two, then the 3 bytes of the tagged-field header (checked apart) and PreviousProducerId.
_V1_NO_PARTITIONS_PREVIOUS_ID = struct.Struct(">2xqhi2xqq3xq")
_V1_ONE_TOPIC_PREVIOUS_ID = [struct.Struct(f">2xqhi3x{n}sxixqq3xq") for n in range(127)]
# v0: topic name, partition ids count, one partition id, both timestamps: by topic-name length.
_V0_ONE_TOPIC = [struct.Struct(f">{n}siiqq") for n in range(256)]
# Partition-id arrays are short: one precompiled struct per length saves a format parse per entry.
_INT32_ARRAYS = [struct.Struct(f">{n}i") for n in range(64)]


def _int32_array(n: int) -> struct.Struct:
    return _INT32_ARRAYS[n] if n < 64 else struct.Struct(f">{n}i")


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError("invalid_utf8", str(e)) from None


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    tags, pos = read_uvarint(buf, pos)
    for _ in range(tags):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise IndexError
    return pos


# --- Encoding: the inverse, used to build test vectors and benchmark data. ---


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return _KEY_HEAD.pack(KEY_VERSION, len(raw)) + raw


def encode_value(value: TransactionLogValue) -> bytes:
    """The value's bytes, by the table of its class (TransactionLogValue's, or one declared alike)."""
    if value.version not in VALUE_VERSIONS:
        raise ValueError(f"cannot encode value version {value.version}")
    flexible = value.version == 1
    table = _tables.get(type(value)) or _tables.setdefault(type(value), value_fields(type(value)))
    out = bytearray()
    for f in table:
        if f.tag is not None:
            continue
        if f.wire != ARRAY:
            out += struct.pack(">" + f.wire, getattr(value, f.name))
            continue
        partitions = getattr(value, f.name)
        if partitions is PARTITIONS_SKIPPED:  # (len() below raised this TypeError, less plainly)
            raise TypeError("cannot encode a value decoded without its partitions (PARTITIONS_SKIPPED)")
        if flexible:
            out += _encoderead_uvarint(0 if partitions is None else len(partitions) + 1)
        else:
            out += _I32.pack(-1 if partitions is None else len(partitions))
        for topic, ids in (partitions or {}).items():
            raw = topic.encode("utf-8")
            if flexible:
                out += _encoderead_uvarint(len(raw) + 1) + raw + _encoderead_uvarint(len(ids) + 1)
            else:
                out += _I16.pack(len(raw)) + raw + _I32.pack(len(ids))
            out += struct.pack(f">{len(ids)}i", *ids)
            if flexible:
                out += b"\x00"  # no tagged fields in the partitions entry
    if flexible:
        # Written only when not default, in ascending tag order, as Kafka does.
        written = [
            (f.tag, struct.pack(">" + f.wire, getattr(value, f.name)))
            for f in table
            if f.tag is not None and getattr(value, f.name) != f.default
        ]
        written = sorted(written + list(value.unknown_tagged_fields), key=lambda t: t[0])
        out += _encoderead_uvarint(len(written))
        for tag, raw in written:
            out += _encoderead_uvarint(tag) + _encoderead_uvarint(len(raw)) + raw
    return bytes(out)


# The table of each value class encode_value met (TransactionLogValue's, or a test's).
_tables: dict[type, tuple[ValueField, ...]] = {TransactionLogValue: VALUE_FIELDS}


def _encoderead_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
