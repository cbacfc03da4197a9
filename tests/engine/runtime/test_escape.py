"""The output-escaping rules: each format's dangerous characters, by hand."""
from __future__ import annotations

from drscore.engine.runtime.escape import csv_cell, markdown_cell, terminal


def test_terminal_shows_control_characters_as_escapes():
    # OSC 0 (set window title) ended by BEL, then an SGR colour, a carriage return and a newline
    assert terminal("a\x1b]0;pwned\x07\x1b[31mb\rc\nd") == "a\\x1b]0;pwned\\x07\\x1b[31mb\\x0dc\\x0ad"
    assert terminal("x\x7fy\x9bz") == "x\\x7fy\\x9bz"  # DEL and the 8-bit CSI
    assert terminal("abc\u202edcba") == "abc\\u202edcba"  # right-to-left override
    assert terminal("plan $20 — 日本語 ok") == "plan $20 — 日本語 ok"  # printable text is kept


def test_markdown_cell_escapes_html_and_table_syntax():
    assert markdown_cell('<img src=x onerror="alert(1)">') == "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
    assert markdown_cell("a|b\nc") == "a\\|b c"
    assert markdown_cell("R&D") == "R&amp;D"


def test_csv_cell_prefixes_formula_starts_only():
    for text in ('=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(text) == "'" + text
    assert csv_cell("agent = 1") == "agent = 1"  # '=' not first: not a formula
    assert csv_cell(-0.5) == -0.5 and csv_cell(3) == 3  # numbers stay numbers
