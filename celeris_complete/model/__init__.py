"""The network and what it reads and writes: the masked-diffusion transformer (network), its tokenizer,
a model directory on disk (directory), the model's context window and its cache (context,
context_cache), the refinement loop (diffusion) and the verification of a draft (verify).

May import: system, and celeris_complete.errors and .config.
"""
