"""Benchmarks that print numbers: selftest, quality (HumanEval-Infilling), the engine alone, the
language server (lsp, soak), repositories not in the corpus (repo), adaptation (adapt), the server
under load (serve, locust), decoding dials (dial, tune), two runs compared (compare); and the parts
alone: the answer checks (checks), drafts without the model (drafts), memory and idle CPU (footprint),
training throughput (train_speed), model shapes' latency (shapes).

May import: engine, training, backends, model, system and below; the language server as a process.
"""
