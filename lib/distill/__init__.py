"""Stage 5 (notebook 05): MiniLM self-attention distillation of the sentence encoder, and its students as
node embedders."""
