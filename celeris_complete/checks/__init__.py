"""An answer's text, judged and mended: post-processing (postprocess), the compiler's check of Python
around the cursor (syntax) and the check of the names an answer uses (names).

May import: the standard library and each other only (a leaf: backends, drafts and the engine use it).
"""
