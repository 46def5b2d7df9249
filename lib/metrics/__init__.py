"""The ground floor of the link-prediction stages: pure metrics (A-AUC in `aauc`, AUC / AP / ranking in `link`, model
selection in `selection`) that the training, evaluation and analysis packages all use and that import none of them."""
