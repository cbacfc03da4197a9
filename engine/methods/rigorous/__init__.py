"""Rigorous Bench's IntegratedScore: the method (``method``), rubric bundles and their
allowed values (``rubrics``) and the SemanticDrift / TrustworthyBoost formulas
(``drift``)."""
