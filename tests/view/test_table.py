from exporter.commands.hanging import COLUMNS
from exporter.view.table import aligned


def test_columns_fit_the_widest_value():
    assert aligned(("A", "BB"), [["xyz", "1"], ["x", "22"]]) == ["A    BB", "xyz  1", "x    22"]


def test_no_row_is_the_header_alone():
    # `txn-exporter hanging` prints its table even when the scan found nothing late.
    assert aligned(tuple(c.upper() for c in COLUMNS), []) == ["  ".join(c.upper() for c in COLUMNS)]
