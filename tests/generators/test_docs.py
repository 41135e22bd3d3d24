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


def test_the_metric_table_is_on_one_page_and_the_others_link_there():
    """docs/metrics.md holds the generated table; no other page carries a copy (the README links there)."""
    from generators.docs import PAGE
    from generators.output import ROOT

    assert PAGE == ROOT / "docs" / "metrics.md" and BEGIN in PAGE.read_text()
    pages = [ROOT / "README.md", ROOT / "deploy" / "README.md", *(ROOT / "docs").glob("*.md")]
    assert [page for page in pages if BEGIN in page.read_text()] == [PAGE]
    assert "docs/metrics.md#the-metric-table" in (ROOT / "README.md").read_text()
