"""Stage 4 (notebook 04): the agnostic AUC (A-AUC) and the studies built on it."""
