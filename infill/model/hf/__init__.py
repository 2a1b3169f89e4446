"""Open diffusion LMs (Dream, Dream-Coder, DreamOn, DiffuCoder, Open-dCoder, LLaDA) from local Hugging
Face checkpoints, loaded into transformers' stock Qwen2 / Llama classes behind our seam.

families.py: each family's conventions; tokenizer.py: the checkpoint's tokenizer behind our
Tokenizer protocol; loader.py: the registry's loaders (transformers is imported only when one
runs); model.py: the DiffusionModel adapter (exact and approximate context reuse).
"""
