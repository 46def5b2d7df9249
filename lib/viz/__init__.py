"""Pictures: pyvis link-graph views."""
