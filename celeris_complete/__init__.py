"""celeris-complete: local code completion with a masked-diffusion language model.

The packages by job, each importing only those below it:

    cli                     the command line (imports everything, each command lazily)
    serve, bench            the HTTP server; benchmarks      (and the language server, celeris_lsp)
    engine                  the completion pipeline
    backends, drafts        where the model runs; continuations the model did not write
    training                corpus, data, training, validation, adaptation (beside engine: models out)
    model, checks           the network, tokenizer, context and decoding; an answer's text judged
    system                  the machine and the operating system
    config, errors          settings and the one error type: anyone may import them

tests/test_layout.py checks the rule, the absence of import circles and the size of modules.
"""

__version__ = "0.1.0"
