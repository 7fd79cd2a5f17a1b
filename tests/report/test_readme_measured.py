"""The README's measured figures (run time, disk, test time, Table 2's numbers) are quoted from the
outputs copied into docs/measured/, never typed in: every number inside the README's
`measured` blocks must occur in one of those files."""

from __future__ import annotations

import re

from conftest import ROOT

BLOCK = re.compile(r"<!-- measured:begin -->(.*?)<!-- measured:end -->", re.S)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
LINK = re.compile(r"\]\([^)]*\)")  # link targets name files (table2-default.md), not figures


def numbers(text: str) -> list[str]:
    return [n.rstrip(",") for n in NUMBER.findall(LINK.sub("]", text))]


def test_numbers_are_found_only_where_they_are_written():
    assert numbers("30.9 min, 1,671 MB, +8.8 [1.0, 16.5] ([x](docs/a2.md))") == ["30.9", "1,671", "8.8", "1.0", "16.5"]


def test_readme_measured_blocks_quote_docs_measured():
    readme = (ROOT / "README.md").read_text()
    blocks = BLOCK.findall(readme)
    assert blocks, "README has no <!-- measured:begin --> ... <!-- measured:end --> block"
    sources = set()
    for path in sorted((ROOT / "docs" / "measured").glob("*.md")):
        sources.update(numbers(path.read_text()))
    missing = sorted({n for block in blocks for n in numbers(block)} - sources)
    assert not missing, (f"README quotes figures found in no docs/measured/*.md file: {missing}; copy the "
                         "pipeline's or the benchmark's output there first (docs/measured/pipeline-time.md, "
                         "table2-default.md, ci-time.md)")
