"""Running the notebooks: the papermill runner, run summaries, the README report and torchrun jobs."""
