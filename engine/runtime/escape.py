"""Output-escaping rules: a user-supplied string (agent name, task id, note, URL) is data
wherever it is shown, never markup, formula or terminal command.

One rule per output format:

- :func:`terminal` — control characters (C0, DEL, C1) and the bidirectional overrides
  are shown as ``\\x1b``-style escapes, so a name cannot set the window title, the colours
  or rewrite a line;
- :func:`markdown_cell` — HTML special characters escaped (Markdown renderers pass raw
  HTML through), ``|`` escaped and line breaks flattened so a table cell stays one cell;
- :func:`csv_cell` — text that a spreadsheet would read as a formula (it starts with
  ``= + - @``, tab or carriage return: the OWASP rule) gets a leading ``'``.

Charts draw their labels with mathtext and TeX off (``engine/reporting/charts.py``).

HTML pages use :func:`html.escape` directly. The module lives in the runtime (which
every other part may import) and depends on nothing.
"""
from __future__ import annotations

import html
import re
from typing import Any

# C0 controls, DEL, C1 controls, and the Unicode bidi embedding/override/isolate marks
# (which reorder what is shown after them: "Trojan Source").
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal(text: object) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\n``
    becomes ``\\x0a``): one field, one line, no terminal commands."""
    return _CONTROL.sub(_escape_char, str(text))


def markdown_cell(text: object) -> str:
    """``text`` safe inside a Markdown table cell or paragraph: HTML escaped (``<`` ``>``
    ``&`` and quotes), ``|`` escaped, line breaks flattened, other controls escaped."""
    flat = str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return terminal(html.escape(flat, quote=True)).replace("|", "\\|")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell that no spreadsheet evaluates: strings starting with a
    formula character get a leading ``'``; numbers and other values are left alone."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


__all__ = ["csv_cell", "markdown_cell", "terminal"]
