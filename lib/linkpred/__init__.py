"""Stage 3 (notebooks 03, 03b): GatModel link prediction, decoders, heuristics, protocols, negatives, training
and evaluation."""
