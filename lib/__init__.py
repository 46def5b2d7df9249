"""wikigat: Wikipedia link graphs, a transformer-like GAT for edge prediction, and MiniLM distillation.

Each stage has one module: crawl (01), embed/dataset (02), model/train (03), aauc (04), distill (05),
kd/augment/probing (06).
"""
from lib.paths import ROOT, OUTPUTS  # noqa: F401

__version__ = "0.1.0"
