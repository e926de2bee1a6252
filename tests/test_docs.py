"""The documentation: README is a front page, every link in it and in docs/ resolves (files and headings),
and the command reference in docs/configuration.md is the parser's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streaming.cli.reference import markdown

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```")


def _prose(page: Path) -> list[str]:
    """The page's lines outside fenced code blocks."""
    lines, inside = [], False
    for line in page.read_text().splitlines():
        if FENCE.match(line.strip()):
            inside = not inside
        elif not inside:
            lines.append(line)
    return lines


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in _prose(page) if line.startswith("#")}


def test_readme_is_a_front_page_of_at_most_150_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves_to_a_file_and_heading(page: Path) -> None:
    for line in _prose(page):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name}: {target} names no file"
            if anchor:
                assert anchor in _anchors(file), f"{page.name}: {target} names no heading of {file.name}"


def test_the_command_reference_is_the_parsers_own() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    block = re.search(r"<!-- command reference: python -m streaming.cli.reference -->\n(.*?)\n"
                      r"<!-- end of command reference -->", text, re.S)
    assert block and block[1] == markdown(), "run python -m streaming.cli.reference and paste it into docs/configuration.md"
