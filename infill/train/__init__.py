"""Training the default model: the corpus (corpus), the masked-diffusion objective (objective), the loop and export (loop), and its model card (model_card). Imports no engine."""
