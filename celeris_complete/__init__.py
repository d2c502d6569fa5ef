"""celeris-complete: local code completion with a masked-diffusion language model."""

__version__ = "0.1.0"
