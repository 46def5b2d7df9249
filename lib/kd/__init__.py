"""Stage 6 (notebook 06): task-specific knowledge distillation, augmentation and probing."""
