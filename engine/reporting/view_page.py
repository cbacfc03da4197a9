"""The page `drscore view` serves: a markup template, a script and a style, kept as real
files in ``view_static/`` (shipped as package data) so editors, linters and a JS test
runner read them:

- ``view.html``: the markup, with ``{{title}}`` filled in (escaped) when served;
- ``view.mjs``: the page's script (an ES module), and ``viewlib.mjs``, its pure part (the
  view's state in the URL, messages and their marks, a row's details as tables), which
  ``tests/engine/reporting/js`` checks with node's test runner;
- ``view.css``.

The script only talks to its own server (``/api/...``) and writes every value with
``textContent``, never as HTML, so text from reports, judges or pages cannot run. The
server's Content-Security-Policy (``script-src 'self'``, ``connect-src 'self'``, nothing
else) backs that up: no inline script, no external request, no CDN.
"""
from __future__ import annotations

import functools
import html
from importlib import resources

# name -> content type; nothing else under /static/ is served
ASSETS = {"view.mjs": "application/javascript", "viewlib.mjs": "application/javascript", "view.css": "text/css"}


@functools.cache
def _read(name: str) -> str:
    return resources.files(__package__).joinpath("view_static", name).read_text(encoding="utf-8")


def asset(name: str) -> tuple[str, str] | None:
    """``(text, content type)`` of a file the page loads, or None for any other name."""
    kind = ASSETS.get(name)
    return None if kind is None else (_read(name), kind)


def page(title: str) -> str:
    """The page's markup; the script and style are served beside it (CSP: 'self')."""
    return _read("view.html").replace("{{title}}", html.escape(title))
