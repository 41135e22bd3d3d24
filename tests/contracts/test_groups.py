"""A group's `__consumer_offsets` partition: Java's String.hashCode over UTF-16 code units and Kafka's
Utils.abs (MIN_VALUE gives 0), against values computed with Kafka's own classes (kafka-clients
4.4.0: `Utils.abs(id.hashCode()) % n`, run with java on the broker's jars)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.contracts.groups import java_string_hash, kafka_abs, offsets_partition

# (group id, String.hashCode, partition of 50, partition of 3), printed by Kafka's own classes.
KAFKA = [
    ("g", 103, 3, 1),
    ("ctp-group", -538691247, 47, 0),
    ("ctp-plain-group", -707640818, 18, 2),
    ("", 0, 0, 0),
    ("polygenelubricants", -(2**31), 0, 0),  # hashCode MIN_VALUE: Utils.abs gives 0, Python's abs 2^31
    ("GydZG_", -(2**31), 0, 0),
    ("DESIGNING WORKHOUSES", -(2**31), 0, 0),
    ("groupé", -1237460406, 6, 0),
    ("grp-\U0001f600-x", -2126143882, 32, 1),  # outside the BMP: two UTF-16 code units
    ("consumer-group-42", 277006467, 17, 0),
    ("zz\u00ff\u4e2d", 3779662, 12, 1),
]


@pytest.mark.parametrize(("group", "hash_code", "of_50", "of_3"), KAFKA)
def test_the_partition_is_kafkas(group, hash_code, of_50, of_3):
    assert java_string_hash(group) == hash_code
    assert offsets_partition(group, 50) == of_50
    assert offsets_partition(group, 3) == of_3
    assert offsets_partition(group, 1) == 0


def test_utils_abs_maps_min_value_to_zero():
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5 and kafka_abs(7) == 7
    # Python's own abs would put such a group on partition 48 of 50, not 0.
    assert abs(-(2**31)) % 50 == 48 and offsets_partition("polygenelubricants", 50) == 0


def test_a_topic_has_partitions():
    with pytest.raises(ValueError):
        offsets_partition("g", 0)


@given(st.text(), st.integers(min_value=1, max_value=1000))
def test_a_partition_is_in_range_and_the_hash_a_java_int(group, partitions):
    h = java_string_hash(group)
    assert -(2**31) <= h < 2**31
    assert 0 <= offsets_partition(group, partitions) < partitions
