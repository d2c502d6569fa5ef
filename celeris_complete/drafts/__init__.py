"""Continuations the model did not write: lines found in the document and the workspace (search),
import statements (imports) and snippets from other files (snippets).

May import: checks, system, and celeris_complete.errors and .config.
"""
