"""Making models: the corpus and its pinned packages (corpus, packages), tokenized data (data), the
training loop (train) within a memory budget (memory_budget), over several processes (distributed),
validation, a deeper copy of a model (grow) and adaptation to one repository (adapt).

May import: model, system, and celeris_complete.errors and .config (adapt also the language server's
workspace walk).
"""
