"""Decoding: the masked-diffusion denoising loop and its schedules (sampler). Pure tensors in and out: no tokenizer, no grammar, no I/O."""
