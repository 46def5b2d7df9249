"""Shared by every stage: project paths and atomic writes, parameters, run records, devices, graph files, the training
loop."""
