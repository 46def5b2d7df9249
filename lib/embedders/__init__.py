"""Stage 5b (notebook 05b): node embedders trained on transfer texts and judged on link sources of unseen titles."""
