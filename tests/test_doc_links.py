"""The README's and docs/'s links into Markdown pages lead somewhere: each relative link to a .md file
names a file that exists and, with a #fragment, a heading of that file, as GitHub makes its anchors
(lowercase, punctuation dropped, each space a hyphen, a repeated heading numbered -1, -2...). A page
whose headings change breaks its readers' links silently otherwise. And docs/benchmarks.md stays a
results page, short enough to read: its history is in git."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^ {0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title"): the text may hold brackets of its own (a code span, an image).
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
ATX = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*?(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The page's lines outside fenced and indented code blocks, numbered from 1."""
    lines, fenced, previous_blank = [], False, True
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and not (previous_blank and line.startswith("    ")):
            lines.append((number, line))
        previous_blank = not line.strip() or (previous_blank and line.startswith("    "))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (a link's or image's text only, no formatting marks),
    lowercased, every character but letters, digits, `_`, `-` and spaces dropped, spaces made `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: Counter[str] = Counter()
    lines = prose_lines(page.read_text())
    texts = dict(lines)
    for number, line in lines:
        heading = ATX.match(line)
        text = heading.group(1) if heading else None
        if text is None and SETEXT.match(line) and texts.get(number - 1, "").strip():
            text = texts[number - 1].strip()
        if text is not None:
            base = slug(text)
            found.add(f"{base}-{seen[base]}" if seen[base] else base)
            seen[base] += 1
        found.update(HTML_ANCHOR.findall(line))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """The page's relative links to a Markdown page or to one of its own headings."""
    found = []
    for number, line in prose_lines(text):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//"):
                continue
            path = target.partition("#")[0]
            if path.endswith(".md") or not path:
                found.append((number, target))
    return found


def test_slugs_follow_github():
    assert slug("The sidecar in its deployment shape") == "the-sidecar-in-its-deployment-shape"
    assert slug("The broker's log: `--broker-log`") == "the-brokers-log---broker-log"
    assert slug("Throughput: decode + model + metrics") == "throughput-decode--model--metrics"
    assert slug("Exemplars: which transaction was slow?") == "exemplars-which-transaction-was-slow"
    assert slug("`txn-exporter decode`") == "txn-exporter-decode"


def test_links_are_found_outside_code():
    page = "See [a](a.md#x), [`b`](b.md), [c](https://e.org/c.md), [g](#here).\n\n```\n[d](d.md)\n```\n\n    [e](e.md)\n`[f](f.md)`\n"
    assert links(page) == [(1, "a.md#x"), (1, "b.md"), (1, "#here")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_into_a_markdown_page_resolves(page: Path):
    broken = []
    for number, target in links(page.read_text()):
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.is_file():
            broken.append(f"{page.relative_to(ROOT)}:{number}: {target}: no such file")
        elif fragment and fragment.lower() not in anchors(linked):
            broken.append(f"{page.relative_to(ROOT)}:{number}: {target}: no such heading in {linked.name}")
    assert not broken, "\n".join(broken)


CODE_LINK = re.compile(r"\b(docs/[\w-]+\.md)#([\w-]+)")
CODE_DIRS = ("exporter", "bench", "queries", "dashboards", "alerts", "deploy", "mixin", "generators", "workshop")


def test_every_link_from_the_code_into_a_docs_page_resolves():
    """A comment's `docs/PAGE.md#anchor` (the figure behind a reason, on docs/benchmarks.md) names a heading."""
    broken = [
        f"{path.relative_to(ROOT)}:{number}: {page}#{fragment}"
        for folder in CODE_DIRS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for page, fragment in CODE_LINK.findall(line)
        if not (ROOT / page).is_file() or fragment not in anchors(ROOT / page)
    ]
    assert not broken, "\n".join(broken)


def test_the_benchmarks_page_is_a_results_page_under_600_lines():
    """About 20 lines a benchmark: room for the ones to come, none for a run-by-run history."""
    lines = (ROOT / "docs" / "benchmarks.md").read_text().splitlines()
    assert len(lines) < 600, f"docs/benchmarks.md has {len(lines)} lines: today's figures only, history is in git"


def test_the_benchmarks_page_names_every_bench_file_and_no_date():
    """Each benchmark has its section (the other files of bench/ are named as its parts), and a figure
    is the latest one, not a dated entry of a run's history."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    files = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__")
    unnamed = [name for name in files if f"{name}.py" not in text and f"bench.{name}" not in text]
    assert not unnamed, f"docs/benchmarks.md does not name bench/{{{','.join(unnamed)}}}.py"
    dates = re.findall(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b", text)
    assert not dates, f"docs/benchmarks.md gives dates {dates}: the latest figures only, history is in git"
