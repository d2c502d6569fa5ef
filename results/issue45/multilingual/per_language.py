"""Held-out masked-slot accuracy per language: each language's held-out corpus files (the corpus's own
split), tokenized with the model's tokenizer, then validate_model_dir on them (accuracy only).

    .venv/bin/python results/issue45/multilingual/per_language.py MODEL_DIR [MODEL_DIR...]
"""
import json
import sys
from pathlib import Path

from celeris_complete.model.tokenizer import CodeTokenizer
from celeris_complete.training.corpus import validation_split
from celeris_complete.training.data import pretokenize
from celeris_complete.training.sources import SUFFIXES, language_files
from celeris_complete.training.validation import validate_model_dir

out = Path("/tmp/per-language-val")  # the tokenized held-out files, per tokenizer size
out.mkdir(exist_ok=True)
for model in sys.argv[1:]:
    tok = CodeTokenizer.load(Path(model) / "tokenizer.json")
    row = {}
    for language in ("python", *SUFFIXES):
        path = out / f"{language}-{tok.vocab_size}.bin"
        if not path.exists():
            files = language_files(language)
            held = validation_split(files)
            pretokenize([f for f in files if f.sha256 in held], tok, path)
        f = validate_model_dir(Path(model), batches=8, tokens_file=path, decode=False, context_len=512)
        row[language] = f["content_acc"]
    print(model, json.dumps(row))
