"""Pictures: pyvis link-graph views (graph) and the notebooks' figures (figures)."""
