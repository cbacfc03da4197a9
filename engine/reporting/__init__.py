"""What people read: the self-contained HTML report (``html``) and its matplotlib
charts (``charts``). May import anything in the engine; nothing in the engine imports
it."""
