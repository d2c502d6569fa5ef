"""Next edits: the user's recent edits to a document (history), what one edit changed token by token
(change), and the same change proposed where it applies next (propagate).

May import: checks, system, and celeris_complete.errors and .config.
"""
