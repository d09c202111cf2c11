"""Each verb has its page, and the page documents every option its --help lists: a verb or
option added without its documentation fails here until the page has it."""

from __future__ import annotations

import re

import pytest

from ibwire.cli.main import DOCS_PAGE, VERBS, parser
from tests.docs.examples import ROOT


def _options_section(text: str) -> str:
    found = re.search(r"^## Options\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return found.group(1) if found else ""


def _option_strings(verb: str) -> list[str]:
    sub = parser(verb)._subparsers._group_actions[0].choices[verb]  # type: ignore[union-attr]
    out = []
    for action in sub._actions:
        if "-h" in action.option_strings:
            continue
        out += action.option_strings or [action.metavar or action.dest.upper()]
    return out


@pytest.mark.parametrize("verb", list(VERBS))
def test_verb_page_documents_every_option(verb):
    page = ROOT / DOCS_PAGE.format(verb=verb)
    assert page.is_file(), f"ibwire {verb} has no page {page.relative_to(ROOT)}"
    options = _options_section(page.read_text())
    assert options, f"{page.name}: no '## Options' section"
    missing = [o for o in _option_strings(verb)
               if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", options)]
    assert not missing, f"{page.name} does not document {missing} (ibwire {verb} --help has them)"


@pytest.mark.parametrize("verb", list(VERBS))
def test_verb_page_has_synopsis_examples_and_exit_status(verb):
    text = (ROOT / DOCS_PAGE.format(verb=verb)).read_text()
    for section in ("## Synopsis", "## Examples", "## Exit status"):
        assert section in text, f"{verb}.md lacks {section}"


@pytest.mark.parametrize("verb", list(VERBS))
def test_help_ends_with_its_page(verb, capsys):
    with pytest.raises(SystemExit):
        parser(verb).parse_args([verb, "--help"])
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last == "docs: " + DOCS_PAGE.format(verb=verb)


def test_verbs_index_lists_every_verb():
    index = (ROOT / "docs" / "verbs" / "index.md").read_text()
    assert not [v for v in VERBS if f"[`{v}`]({v}.md)" not in index]


def test_option_check_can_fail():
    """The check itself: an option the page lacks is found missing."""
    text = "## Options\n\n| `--json` | ... |\n"
    assert re.search(r"(?<![\w-])--json(?![\w-])", _options_section(text))
    assert not re.search(r"(?<![\w-])--js(?![\w-])", _options_section(text))
