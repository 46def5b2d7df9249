"""Stage 3's evaluation protocols and graph models by name, without torch (the configs, the runner and the run summary
read them before any work); lib.linkpred.protocols builds the protocols, lib.linkpred.config the models."""

MODEL_KINDS = ("gat_model", "plain_gat", "mlp")
PROTOCOLS = ("seed", "within_graph", "leak_free", "pair_split", "new_nodes")
GRAPH_PROTOCOLS = ("seed", "within_graph")  # leave the training graphs as they are


def check_protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise ValueError(f"protocol {name!r} does not exist; use one of {PROTOCOLS}")
    return name
