"""Stage 3's negative sets, one module each (`SET = NegativeSet(...)`: name, label, sampler, how it is ranked, whether
it is drawn per positive, cached, in the default selection); `registry` collects them, and protocols, metrics, the
audit, tables, findings and notebooks read the sets from there.

Adding a set is one module here plus its test: `SET = NegativeSet("name", "label", sampler, summary=...)`, where
sampler(NegativeContext) -> Draw (lib.linkpred.negative_sets.base). It is registered but left out of the default
selection (NegativeSet.default), so published runs and the notebooks' checked outputs keep their numbers; select it
with the protocol setting `negative_sets`.
"""
