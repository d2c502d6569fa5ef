"""The machine and the operating system: CPU and GPU features (hardware), resident and available
memory (memory), following a parent process (parent_watch).

May import: the standard library, torch, and celeris_complete.errors and .config only.
"""
