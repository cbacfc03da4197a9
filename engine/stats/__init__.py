"""Statistics over scores: seeded bootstrap intervals over tasks (``bootstrap``) and
agreement between a judge and human scores (``agreement``: PAR, OPC, ICC, FAP/FAS,
correlations). Pure numpy/scipy; imports the runtime's records at most."""
