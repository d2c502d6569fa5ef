"""Benchmarks that print numbers: selftest, quality (HumanEval-Infilling), the engine alone, the
language server (lsp, soak), repositories not in the corpus (repo), adaptation (adapt), the server
under load (serve, locust), decoding dials (dial, tune).

May import: engine, training, backends, model, system and below; the language server as a process.
"""
