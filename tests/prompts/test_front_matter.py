"""A template's settings are checked with their ranges, as one error naming file:line;
a fence with trailing blanks is still a fence."""
from __future__ import annotations

import pytest

from drscore import prompts
from drscore.cli import main
from support.data import ROOT

BODY = "## system\nBe brief.\n\n## user\nRate ${text}\n"


def _tpl(front: str) -> str:
    return f"---\n{front}---\n{BODY}"


@pytest.mark.parametrize("line, says", [
    ("max_tokens: -1", "max_tokens must be from 1 to 1,000,000, got '-1'"),
    ("max_tokens: 1e23", "max_tokens must be a whole number from 1 to 1,000,000, got '1e23'"),
    ("max_tokens: 12.5", "max_tokens must be a whole number"),
    ("expected_output_tokens: 0", "expected_output_tokens must be from 1"),
    ("temperature: nan", "temperature must be from 0 to 2, got 'nan'"),
    ("temperature: 7", "temperature must be from 0 to 2"),
    ("max_token: 50", "unknown setting 'max_token'"),
    ("max_tokens 50", "expected 'key: value'"),
])
def test_bad_setting_names_file_and_line(line, says):
    with pytest.raises(ValueError) as err:
        prompts.parse("t", _tpl(f"temperature: 0.0\n{line}\n"), source="my/t.md")
    assert str(err.value).startswith("my/t.md:3: ") and says in str(err.value)


def test_fence_with_trailing_space_is_a_fence():
    tpl = prompts.parse("t", "--- \nmax_tokens: 77\nexpected_output_tokens: 5\n---  \n" + BODY)
    assert (tpl.max_tokens, tpl.expected_output_tokens) == (77, 5)
    assert tpl.sections[0] == ("system", "Be brief.")


def test_unclosed_front_matter_is_an_error():
    with pytest.raises(ValueError, match=r"prompt 't':1: front matter opened with '---' is never closed"):
        prompts.parse("t", "---\nmax_tokens: 5\n" + BODY)


def test_builtin_templates_still_parse():
    for name in prompts.names():
        tpl = prompts.load(name)
        assert 1 <= tpl.expected_output_tokens and 1 <= tpl.max_tokens <= 1_000_000


def test_override_with_negative_max_tokens_stops_the_run(tmp_path, capsys):
    override = tmp_path / "my-prompts"
    override.mkdir()
    text = prompts.source_of("quality").replace("max_tokens: 1000", "max_tokens: -1")
    (override / "quality.md").write_text(text)
    code = main(["run", "--methods", "quality", "--tasks", str(ROOT / "examples" / "tasks.jsonl"),
                 "--reports", str(ROOT / "examples" / "reports.claude-first-half.jsonl"),
                 "--prompts", str(override), "--out", str(tmp_path / "run")])
    assert code == 1
    assert f"{override / 'quality.md'}:2: max_tokens must be from 1 to 1,000,000, got '-1'" in capsys.readouterr().err
