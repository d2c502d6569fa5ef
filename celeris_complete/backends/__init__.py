"""Where the model runs: the backend protocol (base), this project's model with traced graphs or ONNX
Runtime (ours, traced, onnx), transformers models (hf, hf_model) and remote servers (remote).

May import: model, checks, system, and celeris_complete.errors and .config.
"""
