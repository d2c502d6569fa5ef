import sys, time, statistics, pathlib
from celeris_complete.config import load_settings
from celeris_complete.engine import Engine
eng = Engine(load_settings({'threads': 1}))
t = pathlib.Path('/work/main/celeris_complete/cli.py').read_text()
lines = t.split('\n')
ph = {}
import random
rng = random.Random(0)
for _ in range(40):
    n = rng.randrange(100, len(lines) - 10)
    line = lines[n]
    if len(line.strip()) < 10: continue
    off = sum(len(l) + 1 for l in lines[:n])
    ind = len(line) - len(line.lstrip())
    for k in range(ind + 2, min(len(line), ind + 14), 2):
        prefix = t[:off + k]; suffix = t[off + len(line):]
        d = eng.complete(prefix, suffix, language='cli.py')
        for key in ('draft', 'syntax', 'total', 'refine'):
            ph.setdefault(key, []).append(d.timings_ms[key])
print({k: (round(statistics.median(v), 3), round(statistics.mean(v), 3)) for k, v in ph.items()})
