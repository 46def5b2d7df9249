"""Stage 1 (notebook 01): breadth-first Wikipedia link graphs from root titles and the sources they come from."""
