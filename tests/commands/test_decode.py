"""`txn-exporter decode`: its JSON lines are a public contract, as are its exit status and errors."""

import json
import subprocess
import sys

from exporter.cli import main
from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value
from exporter.codec.record_batch import encode_batch

ONGOING = TransactionLogValue(1, 42, 3, 60000, TransactionState.ONGOING, {"orders": [0, 2], 'q"x': [1]}, 1010, 1000,
                              client_transaction_version=2)


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
                "version": 1, "producer_id": 42, "producer_epoch": 3, "transaction_timeout_ms": 60000,
                "state": "ONGOING", "partitions": {"orders": [0, 2], 'q"x': [1]},
                "last_update_timestamp_ms": 1010, "start_timestamp_ms": 1000,
                "previous_producer_id": -1, "next_producer_id": -1, "client_transaction_version": 2,
                "next_producer_epoch": -1,
            },
        },
        {"offset": 8, "timestamp_ms": 1012, "transactional_id": "tx-2", "value": None},
    ]
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
        capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"txn-exporter decode: cannot read {tmp_path / 'nope.log'}: No such file or directory"
    assert json.loads(result.stdout)["transactional_id"] == "a"


def test_a_log_dir_decodes_its_transaction_state_partitions_in_order(tmp_path, capsys):
    for partition in (10, 2):
        d = tmp_path / f"__transaction_state-{partition}"
        d.mkdir()
        segment(d, encode_batch(partition, [(encode_key(f"p{partition}"), None, 5)]))
    (tmp_path / "orders-0").mkdir()
    assert main(["decode", str(tmp_path)]) == 0
    assert [json.loads(line)["transactional_id"] for line in capsys.readouterr().out.splitlines()] == ["p2", "p10"]
