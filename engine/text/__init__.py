"""Text tools shared by several methods: splitting reports into units (``segment``),
statement-URL pairs from citations (``citations``), the passages of a long page most
relevant to a statement (``passages``) and local similarity screening of unit pairs
(``similarity``). Pure functions over strings; they may import the runtime's records and
token estimates, nothing higher."""
