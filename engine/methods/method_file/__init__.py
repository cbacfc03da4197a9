"""Methods declared in a TOML file, without Python: ``spec`` reads and checks the file,
``verdict`` builds the judge's answer type from it, ``scoring`` turns an answer into the
row's score, and ``method`` is the :class:`~drscore.engine.runtime.method.Method` a file
becomes (docs/custom-methods.md)."""
