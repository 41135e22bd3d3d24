from exporter.metrics.catalogue import CATALOGUE
from generators.docs import BEGIN, END, render, table


def test_every_catalogue_metric_has_a_row_and_an_example():
    rows = table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [spec.name for spec in CATALOGUE]
    assert all(row.rstrip("|").strip().endswith("`") for row in rows)


def test_render_replaces_only_the_block():
    text = f"intro\n{BEGIN}\nSTALE-ROW\n{END}\noutro\n"
    out = render(text)
    assert out.startswith("intro\n") and out.endswith(f"{END}\noutro\n") and "STALE-ROW" not in out
