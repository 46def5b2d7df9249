"""Stage 2 (notebook 02): node-title embeddings in a deduplicated store, and the graph datasets built from them."""
