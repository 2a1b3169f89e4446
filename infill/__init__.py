"""infill: code infilling with a masked-diffusion language model.

The package is split one concept per module (see the project's design notes):
``protocol`` (wire types), ``model`` (the transformer), ``sampler`` (denoising),
``engine`` (requests in, results out), ``cli`` (the command line).
"""

__version__ = "0.1.0"
