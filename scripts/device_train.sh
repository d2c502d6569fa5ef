#!/bin/sh
# The project's GPU run, for the lent GPU machine (the `device` tool's `run`), with the packed corpus:
#   .venv/bin/python scripts/pack_corpus.py RUN_DIR --max-mb 45   # here first: corpus-pack/ (31 MB)
#   sh scripts/device_tree.sh out    # results/ out of what travels (the tool takes 64 MiB in all)
#   run(command="sh scripts/device_train.sh", carry=["corpus-pack"], timeout_s=600)
#   sh scripts/device_tree.sh back
# 1. About a minute: the engine's GPU paths with the shipped model (scripts/gpu_check.py: PyTorch CUDA
#    fp32/fp16/bf16 and ONNX Runtime's CUDA provider if installed; agreement with the CPU, selftest's
#    latency), into $OUT/gpu_check.json and $OUT/gpu_check.log.
# 2. Training with `celeris-complete train --preset gpu` (d_model 384, 8 layers; contexts of 512 and
#    1,024 tokens, CONTEXT_LENS to change them; sized so that the result should still answer inside
#    the CPU keystroke budget: check with `bench engine` here before shipping it) for MINUTES
#    (default 7) on the training corpus of `train --packages` as packed into corpus-pack/ (the GPU
#    machine reaches no package registry; without the pack: the machine's own standard library).
#    TRAIN_ARGS adds options to that command (e.g. "--n-layers 6" for a model that keeps the CPU latency
#    targets with room to spare).
#    With more than one GPU it runs under torchrun, one process per GPU (DDP over NCCL).
#    The model directory comes back under $OUT as tar parts of at most 15 MiB (the device tool
#    returns files of at most 16 MiB, 64 MiB in all; the weights travel as fp16), with the training
#    log. Here, join and unpack them:
#      cat /work/.device/.../model.tar.part-* | tar x -C models/   (then compare with `bench quality`)
#    The multilingual corpus (issue 45): tokenize it with the shipped tokenizer extended for the other
#    languages, then pack it as above; this script then grows the shipped model to the pack's tokenizer
#    and trains that (the shipped model's shape, 6 layers, not the preset's; TRAIN_ARGS without
#    --init-from or a shape):
#      .venv/bin/python scripts/extend_vocab.py models/default /tmp/ext --merges 2048 --languages all
#      .venv/bin/celeris-complete train -o RUN_DIR --packages --languages all --init-from /tmp/ext --steps 1000 --stretch-steps 1
#      .venv/bin/python scripts/pack_corpus.py RUN_DIR --max-mb 45
# The machine's python3 already has torch (CUDA), tokenizers, safetensors, numpy, typer and onnxruntime.
# A smoke test on a CPU (gpu_check on CPU stand-ins):
#   OUT=/tmp/o PYTHON=.venv/bin/python REQUIRE_CUDA=0 MINUTES=0.2 sh scripts/device_train.sh
set -eu
: "${OUT:?run this through the device tool: it sets OUT}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
"$PY" -c "import torch; print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))"
if [ "${REQUIRE_CUDA:-1}" = 1 ]; then "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA GPU'"; fi
# The GPU paths first: a failure there is a finding, not a reason to skip the training (CHECK=0 skips
# them, for a second run in the same session when the first already checked them).
check=""
if [ "${REQUIRE_CUDA:-1}" != 1 ]; then check="--cpu"; export PLACES=4; fi
if [ "${CHECK:-1}" = 1 ]; then timeout 150 "$PY" scripts/gpu_check.py $check "$OUT" 2>&1 | tee "$OUT/gpu_check.log" || true; fi
lens=""
for n in ${CONTEXT_LENS:-512 1024}; do lens="$lens --context-len $n"; done
rm -rf /tmp/gpu-model
if [ -f corpus-pack/train.bin.xz ]; then
  mkdir -p /tmp/gpu-model/.work
  cp corpus-pack/tokenizer.json corpus-pack/corpus_manifest.json /tmp/gpu-model/.work/
  xz -dc corpus-pack/train.bin.xz > /tmp/gpu-model/.work/train.bin
  xz -dc corpus-pack/val.bin.xz > /tmp/gpu-model/.work/val.bin
  echo "corpus: $(cat corpus-pack/pack.json)"
fi
# A pack tokenized with the shipped tokenizer extended (the multilingual corpus: scripts/extend_vocab.py)
# trains the shipped model grown to that tokenizer: its shape, every shipped weight kept. TRAIN_ARGS may
# then name no starting model or shape of its own. Any other pack trains as before.
if [ -f corpus-pack/tokenizer.json ] && ! cmp -s corpus-pack/tokenizer.json models/default/tokenizer.json \
  && "$PY" -c "import sys; from celeris_complete.model.tokenizer import CodeTokenizer as T; from celeris_complete.training.vocab import is_extension; sys.exit(0 if is_extension(T.load('models/default/tokenizer.json'), T.load('corpus-pack/tokenizer.json')) else 1)"; then
  case " ${TRAIN_ARGS:-} " in
    *" --init-from"*|*" --d-model"*|*" --n-layers"*|*" --n-heads"*)
      echo "the pack's tokenizer extends the shipped one: the shipped model grown to it is the start; TRAIN_ARGS may not name another start or shape" >&2
      exit 2 ;;
  esac
  "$PY" scripts/extend_vocab.py models/default /tmp/init-model --tokenizer corpus-pack/tokenizer.json
  TRAIN_ARGS="--init-from /tmp/init-model ${TRAIN_ARGS:-}"
fi
gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())")
launch="$PY"
if [ "$gpus" -gt 1 ]; then launch="$PY -m torch.distributed.run --standalone --nproc_per_node $gpus"; fi
# shellcheck disable=SC2086
$launch -m celeris_complete.cli train -o /tmp/gpu-model --preset gpu --minutes "${MINUTES:-7}" $lens ${TRAIN_ARGS:-} 2>&1 | tee "$OUT/train.log"
# (Its validation figures are in the log: train's own final evaluation, on the pack's val.bin.)
test -f /tmp/gpu-model/model.safetensors || { echo "training wrote no model" >&2; exit 1; }
rm -rf /tmp/gpu-model/.work
# fp16 weights for the trip (the device tool returns at most 64 MiB in all); loading casts them back.
"$PY" - <<'PY'
from safetensors.torch import load_file, save_file
path = "/tmp/gpu-model/model.safetensors"
save_file({k: v.half().contiguous() for k, v in load_file(path).items()}, path)
PY
tar cf - -C /tmp gpu-model | split -b 15M - "$OUT/model.tar.part-"
ls -l "$OUT"
