"""wikigat: Wikipedia link graphs, a transformer-like GAT for edge prediction, and MiniLM distillation.

One package per stage, each imported from the module that defines a name (the packages re-export nothing):
common (paths, params, run records, devices, graph files), crawl (01), embed (02), linkpred (03, 03b), aauc (04),
distill (05), kd (06), viz (pyvis pictures), run (runner, summary, README report, torchrun jobs).
"""

__version__ = "0.1.0"
