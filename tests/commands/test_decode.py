"""`txn-exporter decode`: its JSON lines are a public contract, as are its exit status and errors."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.cli import main
from exporter.codec import (
    VALUE_FIELDS,
    TransactionLogRecord,
    TransactionLogValue,
    TransactionState,
    decode_record,
    encode_key,
    encode_value,
)
from exporter.codec.value import TAGGED_FIELDS
from txn_workshop.record_batches import encode_batch

# A tag above the highest the codec names: where a newer Kafka's tagged field goes.
NEXT_TAG = TAGGED_FIELDS[-1].tag + 1

ONGOING = TransactionLogValue(
    version=1,
    producer_id=42,
    producer_epoch=3,
    transaction_timeout_ms=60000,
    state=TransactionState.ONGOING,
    partitions={"orders": [0, 2], 'q"x': [1]},
    last_update_timestamp_ms=1010,
    start_timestamp_ms=1000,
    client_transaction_version=2,
)


def segment(tmp_path, *batches, name="00000000000000000000.log"):
    path = tmp_path / name
    path.write_bytes(b"".join(batches))
    return path


def test_record_and_tombstone_lines(tmp_path, capsys):
    path = segment(
        tmp_path,
        encode_batch(7, [(encode_key("tx-1"), encode_value(ONGOING), 1011)]),
        encode_batch(8, [(encode_key("tx-2"), None, 1012)]),
    )
    assert main(["decode", str(path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {
            "offset": 7,
            "timestamp_ms": 1011,
            "transactional_id": "tx-1",
            "value": {
                "version": 1,
                "producer_id": 42,
                "producer_epoch": 3,
                "transaction_timeout_ms": 60000,
                "state": "ONGOING",
                "partitions": {"orders": [0, 2], 'q"x': [1]},
                "last_update_timestamp_ms": 1010,
                "start_timestamp_ms": 1000,
                "previous_producer_id": -1,
                "next_producer_id": -1,
                "client_transaction_version": 2,
                "next_producer_epoch": -1,
                # A tagged field added to the codec's table since: last, at its default.
                **{f.name: f.default for f in TAGGED_FIELDS[4:]},
            },
        },
        {"offset": 8, "timestamp_ms": 1012, "transactional_id": "tx-2", "value": None},
    ]
    assert list(lines[0]["value"]) == [f.name for f in VALUE_FIELDS]
    assert list(lines[0]) == ["offset", "timestamp_ms", "transactional_id", "value"]


def test_errors_are_lines_and_decoding_goes_on(tmp_path, capsys):
    corrupt = bytearray(encode_batch(1, [(encode_key("b"), None, 5)]))
    corrupt[-1] ^= 1
    good = encode_batch(0, [(encode_key("a"), None, 5)])
    bad_record = encode_batch(2, [(b"\x00\x07bad-version-key", None, 5)])
    path = segment(tmp_path, good, bytes(corrupt), bad_record, encode_batch(3, [(encode_key("d"), None, 5)]))
    assert main(["decode", str(path)]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["offset"] == 0
    assert lines[1]["position"] == len(good) and lines[1]["error"].startswith("crc_mismatch")
    assert lines[2]["offset"] == 2 and lines[2]["error"].startswith("unknown_key_version")
    assert lines[3]["transactional_id"] == "d"


def test_missing_file_is_one_clear_line_and_the_others_still_decode(tmp_path):
    good = segment(tmp_path, encode_batch(0, [(encode_key("a"), None, 5)]))
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "decode", str(tmp_path / "nope.log"), str(good)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert (
        result.stderr.strip() == f"txn-exporter decode: cannot read {tmp_path / 'nope.log'}: No such file or directory"
    )
    assert json.loads(result.stdout)["transactional_id"] == "a"


def test_a_log_dir_decodes_its_transaction_state_partitions_in_order(tmp_path, capsys):
    for partition in (10, 2):
        d = tmp_path / f"__transaction_state-{partition}"
        d.mkdir()
        segment(d, encode_batch(partition, [(encode_key(f"p{partition}"), None, 5)]))
    (tmp_path / "orders-0").mkdir()
    assert main(["decode", str(tmp_path)]) == 0
    assert [json.loads(line)["transactional_id"] for line in capsys.readouterr().out.splitlines()] == ["p2", "p10"]


def test_a_file_that_is_not_a_segment_is_said_so_in_one_line(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# kafka-txn-exporter\n\nKafka's transaction coordinator gives operators...\n" * 20)
    good = segment(tmp_path, encode_batch(0, [(encode_key("a"), None, 5)]))
    assert main(["decode", str(readme), str(good)]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"txn-exporter decode: {readme}: not a __transaction_state segment")
    assert [json.loads(line)["transactional_id"] for line in captured.out.splitlines()] == ["a"]


def test_a_damaged_segment_is_still_decoded_not_called_a_non_segment(tmp_path, capsys):
    raw = bytearray(encode_batch(0, [(encode_key("a"), None, 5)]) + encode_batch(1, [(encode_key("b"), None, 6)]))
    raw[30] ^= 1  # the first batch's CRC fails; the second still decodes
    path = segment(tmp_path, bytes(raw))
    assert main(["decode", str(path)]) == 1
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert lines[0]["position"] == 0 and lines[1]["transactional_id"] == "b" and captured.err == ""


def _log_dir(tmp_path, records_per_partition=1):
    for partition in (10, 2):
        d = tmp_path / f"__transaction_state-{partition}"
        d.mkdir()
        segment(
            d,
            *(
                encode_batch(i, [(encode_key(f"p{partition}-{i}"), encode_value(ONGOING), 5)])
                for i in range(records_per_partition)
            ),
        )
    return tmp_path


def test_several_files_name_the_partition_and_file_of_every_line(tmp_path, capsys):
    log_dir = _log_dir(tmp_path, 2)
    assert main(["decode", str(log_dir)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    files = {p: str(log_dir / f"__transaction_state-{p}" / "00000000000000000000.log") for p in (2, 10)}
    assert [(r["partition"], r["offset"], r["file"]) for r in lines] == [
        (2, 0, files[2]),
        (2, 1, files[2]),
        (10, 0, files[10]),
        (10, 1, files[10]),
    ]
    # The record's own fields come first, as with one file; the names end the line.
    assert list(lines[0]) == ["offset", "timestamp_ms", "transactional_id", "value", "partition", "file"]
    # One file: the lines stay exactly as they were.
    assert main(["decode", files[2]]) == 0
    assert list(json.loads(capsys.readouterr().out.splitlines()[0])) == [
        "offset",
        "timestamp_ms",
        "transactional_id",
        "value",
    ]
    # Two files outside a partition directory: partition null; errors are named too.
    whole = encode_batch(0, [(encode_key("c"), None, 5)])
    other = segment(tmp_path, whole + b"\x00" * 70, name="copy.log")
    assert main(["decode", files[2], str(other)]) == 1
    error = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (error["position"], error["partition"], error["file"]) == (len(whole), None, str(other))


def test_a_reader_that_goes_away_stops_decode_quietly(tmp_path):
    log_dir = _log_dir(tmp_path, 3000)  # about 2 MB of lines: more than a pipe holds
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "decode", str(log_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert json.loads(proc.stdout.readline())["offset"] == 0  # as `| head -1` does
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141  # 128 + SIGPIPE, as the shell reports a Unix tool's
    assert stderr == ""


def _refused(path):
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "decode", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result
    assert result.stdout == "" and result.stderr.count("\n") == 1
    return result.stderr


def test_non_regular_files_are_refused_with_exit_2_and_one_line(tmp_path):
    import os
    import socket

    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)  # reading it would block until a writer came
    assert _refused(fifo) == f"txn-exporter decode: {fifo}: not a regular file (a FIFO), so not a segment\n"
    assert "(a character device)" in _refused("/dev/zero")  # reading it would never end
    sock_path = tmp_path / "s.log"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        assert "(a socket)" in _refused(sock_path)


class _Discard:
    def write(self, text):
        return len(text)


def _peak_bytes(path) -> int:
    import gc
    import tracemalloc

    from exporter.commands.decode import decode_file

    gc.collect()
    tracemalloc.start()
    try:
        decode_file(path, _Discard())
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_stays_flat_in_the_file_size(tmp_path):
    """A segment is read in pieces, not whole: decoding 16 MiB peaks where decoding 1 MiB does."""
    one = encode_batch(0, [(encode_key("payments-service-0000001"), encode_value(ONGOING), 5)])
    small = segment(tmp_path, one * ((1 << 20) // len(one)), name="small.log")
    large = segment(tmp_path, one * ((16 << 20) // len(one)), name="large.log")
    small_peak, large_peak = _peak_bytes(small), _peak_bytes(large)
    assert large_peak < small_peak + (2 << 20), (small_peak, large_peak)


def _peak_rss_kib(path) -> int:
    """The decode's peak resident memory (VmHWM), read by its own process: a child's ru_maxrss
    would start from the parent's (pytest's) high-water mark, taken at fork."""
    script = (
        "import sys\n"
        "from exporter.cli import main\n"
        "status = main(['decode', sys.argv[1]])\n"
        "hwm = open('/proc/self/status').read().split('VmHWM:')[1].split()[0]\n"
        "print(status, hwm, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    status, hwm = result.stderr.split()
    assert status == "0"
    return int(hwm)


def test_resident_memory_stays_flat_in_the_file_size(tmp_path):
    """Resident memory does not grow with the segment: 64 MiB of segment peak within a few MiB of
    4 MiB (reading it whole, or keeping a mapping's pages, costs the 60 MiB between them)."""
    one = encode_batch(0, [(encode_key("payments-service-0000001"), encode_value(ONGOING), 5)])
    small = segment(tmp_path, one * ((4 << 20) // len(one)), name="small.log")
    large = segment(tmp_path, one * ((64 << 20) // len(one)), name="large.log")
    small_rss, large_rss = _peak_rss_kib(small), _peak_rss_kib(large)
    assert large_rss < small_rss + 24 * 1024, (small_rss, large_rss)


class _Collect:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text
        return len(text)


def _expected_line(offset, ts, tid, v):
    """The contract's line, by json.dumps (ensure_ascii=False: decode writes UTF-8 as is)."""
    value = (
        None
        if v is None
        # The value's fields in the codec's table order (today's, literally: test_record_and_tombstone_lines).
        else {f.name: v.state.name if f.name == "state" else getattr(v, f.name) for f in VALUE_FIELDS}
    )
    if v is not None and v.unknown_tagged_fields:
        value["unknown_tagged_fields"] = [{"tag": tag, "bytes": raw.hex()} for tag, raw in v.unknown_tagged_fields]
    line = {"offset": offset, "timestamp_ms": ts, "transactional_id": tid, "value": value}
    return json.dumps(line, ensure_ascii=False) + "\n"


# Names that need escaping or are not ASCII, and plain ones; few enough that arrays repeat (the
# decode command formats each distinct array once while it is in its memo).
_names = st.sampled_from(["orders", 'q"x', "back\\slash", "tab\tnew\nline\x00", "ünïcødé", "𝄞-clef", "", "a" * 130])
_partitions = st.none() | st.dictionaries(_names, st.lists(st.integers(0, 2**31 - 1), max_size=4), max_size=4)
_int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _values(draw):
    version = draw(st.sampled_from([0, 1]))
    tagged = version == 1
    last_update = draw(_int64)
    return TransactionLogValue(
        version=version,
        producer_id=draw(_int64),
        producer_epoch=draw(st.integers(-(2**15), 2**15 - 1)),
        transaction_timeout_ms=draw(st.integers(-(2**31), 2**31 - 1)),
        state=draw(st.sampled_from(list(TransactionState))),
        partitions=draw(_partitions),
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=draw(st.just(last_update) | _int64),  # start: the same when ONGOING
        # Each tagged field absent (its default) or not: the shapes coordinators write, and others.
        previous_producer_id=draw(st.just(-1) | _int64) if tagged else -1,
        next_producer_id=draw(st.just(-1) | _int64) if tagged else -1,
        client_transaction_version=draw(st.sampled_from([0, 2, -5])) if tagged else 0,
        next_producer_epoch=draw(st.sampled_from([-1, 7])) if tagged else -1,
        # Any tagged field added to the codec's table since: at its default or not.
        **{f.name: draw(st.sampled_from([f.default, 7])) if tagged else f.default for f in TAGGED_FIELDS[4:]},
        # A newer Kafka's tagged fields (KAFKA-20357's last producer epoch after the codec's, say), or none.
        unknown_tagged_fields=draw(
            st.sampled_from([(), ((NEXT_TAG, b"\x7f\xfe"),), ((NEXT_TAG, b""), (NEXT_TAG + 296, b"\x00\xff"))])
        )
        if tagged
        else (),
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.none() | _values(), min_size=1, max_size=4),
    # The record's timestamp: its value's last update time (None) as usual, or another.
    st.lists(
        st.tuples(st.text(max_size=12), st.integers(0, 3), st.none() | st.integers(0, 2**41)), min_size=1, max_size=30
    ),
)
def test_lines_are_json_dumps_of_the_records(tmp_path_factory, values, picks):
    """Every line is the contract's JSON (escaping and UTF-8 included), through the codec's fast
    paths, the general one, and the memo of partitions arrays (values repeat across records)."""
    from exporter.commands.decode import decode_file, format_record

    records = []
    for tid, k, ts in picks:
        value = values[k % len(values)]
        records.append((tid, value, ts if ts is not None else 0 if value is None else value.last_update_timestamp_ms))
    path = tmp_path_factory.mktemp("seg") / "00000000000000000000.log"
    path.write_bytes(
        b"".join(
            encode_batch(i, [(encode_key(tid), None if v is None else encode_value(v), ts)])
            for i, (tid, v, ts) in enumerate(records)
        )
    )
    out = _Collect()
    assert decode_file(path, out) is False
    expected = [_expected_line(i, ts, tid, v) for i, (tid, v, ts) in enumerate(records)]
    assert out.text.split("\n") == [line[:-1] for line in expected] + [""]  # (not splitlines: \x85 is a line end)
    # format_record, for a record already decoded, writes the same line.
    assert [format_record(TransactionLogRecord(i, ts, tid, v)) for i, (tid, v, ts) in enumerate(records)] == expected


def test_format_record_refuses_a_record_decoded_without_its_partitions():
    from exporter.commands.decode import format_record

    value = TransactionLogValue(
        version=1,
        producer_id=42,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"orders": [0]},
        last_update_timestamp_ms=1010,
        start_timestamp_ms=1000,
    )
    record = decode_record(encode_key("t"), encode_value(value), 7, 1010, partitions=False)
    with pytest.raises(TypeError, match="PARTITIONS_SKIPPED"):
        format_record(record)


def test_a_topic_name_that_is_not_utf8_is_an_error_line_wherever_the_array_is_read(tmp_path, capsys):
    """The memo of partitions arrays decodes each array it has not seen, invalid UTF-8 included:
    the record is an invalid_utf8 line, the same array seen again is one again, the others decode."""
    good = TransactionLogValue(
        version=1,
        producer_id=42,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"orders": [0, 2], "xx": [1]},
        last_update_timestamp_ms=1010,
        start_timestamp_ms=1000,
        previous_producer_id=42,
    )
    raw = encode_value(good)
    bad = raw.replace(b"xx", b"\xff\xfe")
    path = segment(
        tmp_path, *(encode_batch(i, [(encode_key("t"), value, 5)]) for i, value in enumerate((raw, bad, raw, bad)))
    )
    assert main(["decode", str(path)]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["value"]["partitions"] for line in lines[::2]] == [{"orders": [0, 2], "xx": [1]}] * 2
    assert [(line["offset"], line["error"].split(":")[0]) for line in lines[1::2]] == [
        (1, "invalid_utf8"),
        (3, "invalid_utf8"),
    ]


def test_a_partitions_count_written_on_two_bytes_decodes_as_on_one(tmp_path, capsys):
    """A varint may be written longer than it needs (Kafka's reader takes it): a null or empty
    array so written goes through the codec's general path and its memo, not the fast paths."""
    for partitions, count in ((None, b"\x80\x00"), ({}, b"\x81\x00")):
        value = TransactionLogValue(
            version=1,
            producer_id=42,
            producer_epoch=3,
            transaction_timeout_ms=60000,
            state=TransactionState.EMPTY,
            partitions=partitions,
            last_update_timestamp_ms=1010,
            start_timestamp_ms=1000,
        )
        raw = encode_value(value)
        assert raw[17] == count[0] & 0x7F
        path = segment(
            tmp_path, encode_batch(0, [(encode_key("t"), raw[:17] + count + raw[18:], 5)]), name=f"{count.hex()}.log"
        )
        assert main(["decode", str(path)]) == 0
        assert capsys.readouterr().out == _expected_line(0, 5, "t", value)


def test_the_next_kafkas_tagged_fields_are_shown_named_or_by_tag_and_bytes(tmp_path, capsys):
    """Kafka's trunk writes NextProducerEpoch (tag 3): a named field. A tag this codec does not name
    (KAFKA-20357's last producer epoch, after the highest tag it names) is shown with its bytes, in hex."""
    trunk = TransactionLogValue(
        version=1,
        producer_id=42,
        producer_epoch=0,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"orders": [0]},
        last_update_timestamp_ms=1010,
        start_timestamp_ms=1000,
        previous_producer_id=41,
        next_producer_id=42,
        client_transaction_version=2,
        next_producer_epoch=0,
        unknown_tagged_fields=((NEXT_TAG, b"\x7f\xfe"),),
    )
    path = segment(tmp_path, encode_batch(0, [(encode_key("t"), encode_value(trunk), 1010)]))
    assert main(["decode", str(path)]) == 0
    (line,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    value = line["value"]
    assert (value["next_producer_epoch"], value["unknown_tagged_fields"]) == (0, [{"tag": NEXT_TAG, "bytes": "7ffe"}])
    assert list(value)[-2:] == [TAGGED_FIELDS[-1].name, "unknown_tagged_fields"]


def test_a_value_version_above_1_is_an_error_line_and_the_rest_decodes(tmp_path, capsys):
    raw = encode_value(ONGOING)
    path = segment(
        tmp_path,
        encode_batch(0, [(encode_key("a"), b"\x00\x02" + raw[2:], 5)]),
        encode_batch(1, [(encode_key("b"), raw, 1011)]),
    )
    assert main(["decode", str(path)]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"offset": 0, "error": "unknown_value_version: value version 2"}
    assert lines[1]["value"]["producer_id"] == 42


def _decode_process(*paths):
    """`txn-exporter decode PATH...` in a process of its own (a SIGBUS must not take pytest down)."""
    script = "import sys\nfrom exporter.cli import main\nsys.exit(main(['decode', *sys.argv[1:]]))\n"
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, paths)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_a_live_log_dir_whose_segments_are_truncated_or_deleted_meanwhile_is_decoded_without_a_crash(tmp_path):
    """The broker truncates one segment (a follower's truncation, a cleaned segment swapped in) and
    deletes another while decode reads the log dir: each is one error line on stderr, every other
    segment is decoded, and the process ends by itself (exit 1), never killed by SIGBUS."""
    one = encode_batch(0, [(encode_key("payments-service-0000001"), encode_value(ONGOING), 5)])
    files = []
    for partition, megabytes in ((0, 24), (1, 1), (2, 1)):
        directory = tmp_path / f"__transaction_state-{partition}"
        directory.mkdir()
        files.append(segment(directory, one * ((megabytes << 20) // len(one))))
    truncated, deleted, _ = files
    process = _decode_process(tmp_path)
    try:
        # The first line is out: the decoder is inside the first segment, blocked on the pipe (not read).
        assert json.loads(process.stdout.readline())["partition"] == 0
        cut = 3 * (1 << 20) + 1000  # past what was read yet, inside a batch
        with open(truncated, "r+b") as f:
            f.truncate(cut)
        deleted.unlink()
        out, err = process.stdout.read(), process.stderr.read()  # (not communicate: readline buffered some)
        process.wait(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 1, (process.returncode, err[-2000:])
    lines = [json.loads(line) for line in out.splitlines()]
    by_partition = {p: [line for line in lines if line["partition"] == p] for p in (0, 1, 2)}
    assert len(by_partition[2]) == (1 << 20) // len(one) and not by_partition[1]
    assert 0 < len(by_partition[0]) + 1 <= cut // len(one)  # what was there when it was read, no more
    assert all("value" in line for line in lines)  # no error line in the output itself
    errors = err.decode().splitlines()
    assert errors[0].startswith(f"txn-exporter decode: {truncated}: truncated to {cut} bytes while being read ")
    assert errors[1] == f"txn-exporter decode: cannot read {deleted}: No such file or directory"
    assert len(errors) == 2


def test_read_segment_stops_with_segment_shrank_after_the_records_it_read_and_reads_a_deleted_file_whole(tmp_path):
    from exporter.sources.segment_files import SegmentShrank, read_segment

    one = encode_batch(0, [(encode_key("payments-service-0000001"), encode_value(ONGOING), 5)])
    count = (4 << 20) // len(one)
    path = segment(tmp_path, one * count)
    items = read_segment(path)
    read = [next(items) for _ in range(10)]  # the file is open, its first piece read
    with open(path, "r+b") as f:
        f.truncate(len(one) * (count // 2))
    with pytest.raises(SegmentShrank, match=rf"^{path}: truncated to {len(one) * (count // 2)} bytes while being read"):
        read += list(items)
    assert 10 <= len(read) <= count // 2 and all(r.offset == 0 for r in read)
    items = read_segment(path)
    first = next(items)
    path.unlink()  # Linux keeps an open file's bytes: it is read whole
    assert 1 + sum(1 for _ in items) == count // 2 and first.transactional_id == "payments-service-0000001"
