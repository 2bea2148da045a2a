#!/usr/bin/env bash
# The training examples and the estimator (issue 29, points 4 and 5), quickly,
# on tiny configurations: examples/gpt2_train.py and examples/resnet50_train.py
# train two steps on the CPU and print their parameter counts, as computed here
# from the shapes; examples/estimate_memory.py prints its JSON, with PyTorch's
# MemTracker peak (fake CPU tensors in a plain python, fake CUDA tensors under
# `sublet nullgpu`) and the model-states count, which must be P * (4 + 4 + 4k)
# for the P computed here; then both examples, tiny, on the null device when
# its build emulates cuBLAS and cuDNN.  $1 is the CLI.
set -u
source "$(dirname "$0")/env.sh"
ex=$repo/examples

# gpt2, 2 layers of 64, a 32-token context, batch 2: vocab*E + 1024*E (positions)
# + L * (12E^2 + 13E) (attention 4E^2+4E, MLP 8E^2+5E, two LayerNorms 4E) + 2E (ln_f)
E=64 L=2 V=50257
gpt2_p=$((V * E + 1024 * E + L * (12 * E * E + 13 * E) + 2 * E))
tiny="--layers $L --embd $E --seq 32 --batch 2"
# resnet50: torchvision's count, whatever the image size
resnet_p=25557032

run() {  # run NAME CMD...: the command must exit 0; its output in $tmp/NAME
  local name=$1
  shift
  "$@" >"$tmp/$name" 2>"$tmp/$name.err" || { fail "$name exited $?: $(tail -3 "$tmp/$name.err")"; return 1; }
}

if run gpt2 "$py" "$ex/gpt2_train.py" --device cpu $tiny; then
  cat "$tmp/gpt2"
  grep -q "^gpt2: $("$py" -c "print(f'{$gpt2_p:,}')") parameters" "$tmp/gpt2" || fail "gpt2: not $gpt2_p parameters"
  grep -Eq "^gpt2: last loss [0-9]+\.[0-9]+$" "$tmp/gpt2" || fail "gpt2: no finite last loss"
fi
if run resnet "$py" "$ex/resnet50_train.py" --device cpu --image 32 --batch 2; then
  cat "$tmp/resnet"
  grep -q "^resnet50: 25,557,032 parameters, 53,173 buffer elements" "$tmp/resnet" || fail "resnet50: not $resnet_p parameters"
  grep -Eq "^resnet50: last loss [0-9]+\.[0-9]+$" "$tmp/resnet" || fail "resnet50: no finite last loss"
fi
run resnet_amp "$py" "$ex/resnet50_train.py" --device cpu --image 32 --batch 2 --steps 1 --amp --channels-last --optimizer adamw &&
  { grep -q "AdamW, amp bf16, channels_last True" "$tmp/resnet_amp" || fail "resnet50 --amp --channels-last --optimizer adamw: $(cat "$tmp/resnet_amp")"; }

# check_json FILE P BYTES_PER_PARAM DEVICE: the estimator's JSON, its model
# states P * BYTES_PER_PARAM, its MemTracker peak on DEVICE ("cpu" or "cuda")
check_json() {
  "$py" - "$@" <<'EOF' || fail "estimate_memory.py's JSON ($1): see above"
import json, sys
path, p, bpp, dev = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = json.load(open(path))
bad = []
def want(cond, what):
    if not cond:
        bad.append(what)
want(d["parameters"] == p, f"parameters {d['parameters']} != {p}")
b = d["model_states"]
want(b["parameters"] == p, "model_states.parameters")
want(b["bytes_per_parameter"] == bpp, f"bytes_per_parameter {b['bytes_per_parameter']} != {bpp}")
want(b["bytes"] == p * bpp, f"model_states.bytes {b['bytes']} != {p} * {bpp}")
want(b["weights_bytes"] + b["gradients_bytes"] + b["optimizer_bytes"] == b["bytes"], "the parts do not add up")
for k in ("formula", "optimizer", "buffers_bytes"):
    want(k in b, f"model_states.{k} missing")
a = d["mem_tracker"]
want(a.get("available") is True, "MemTracker not available")
want("error" not in a, f"MemTracker failed: {a.get('error')}")
want(a.get("fake_device") == dev, f"fake_device {a.get('fake_device')} != {dev}")
peak = a.get("peak_bytes", 0)
# the peak holds the weights, the optimizer's states and at least one step's activations
want(peak > p * (bpp - 4), f"MemTracker peak {peak} not above weights + optimizer states {p * (bpp - 4)}")
key = a.get("peak_device") or ""
want(key.startswith(dev), f"peak_device {key!r}")
if dev == "cuda":
    want(peak % 512 == 0, f"CUDA peak {peak} not in 512-byte allocations")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"{d['model']}: MemTracker peak {peak} on fake {dev}, model states {b['bytes']} = {p} * {bpp}")
EOF
}

cpu_dev=$("$py" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
run est_gpt2 "$py" "$ex/estimate_memory.py" gpt2 $tiny && check_json "$tmp/est_gpt2" $gpt2_p 16 "$cpu_dev"
run est_resnet "$py" "$ex/estimate_memory.py" resnet50 --image 32 --batch 2 &&
  check_json "$tmp/est_resnet" $resnet_p 12 "$cpu_dev"
run est_resnet_adamw "$py" "$ex/estimate_memory.py" resnet50 --image 32 --batch 2 --steps 1 --optimizer adamw --amp --channels-last &&
  check_json "$tmp/est_resnet_adamw" $resnet_p 16 "$cpu_dev"
# on the null device the fake tensors are CUDA tensors (nothing is computed either way)
run est_gpt2_null "$cli" nullgpu -- "$py" "$ex/estimate_memory.py" gpt2 $tiny &&
  check_json "$tmp/est_gpt2_null" $gpt2_p 16 cuda
# the examples themselves on the null device, tiny, where its build emulates
# cuBLAS and cuDNN (a build without says CUBLAS_/CUDNN_STATUS_NOT_INITIALIZED:
# noted, not failed); GPT-2's attention is PyTorch's choice, cuDNN's on an H100
for m in "gpt2_train.py $tiny" "resnet50_train.py --image 32 --batch 2 --amp --channels-last"; do
  name=${m%%.py*}
  # shellcheck disable=SC2086
  "$cli" nullgpu -- "$py" "$ex"/$m --steps 2 >"$tmp/null_$name" 2>&1
  rc=$?
  if [ $rc != 0 ] && grep -Eq "CU(BLAS|DNN)_STATUS_NOT_INITIALIZED" "$tmp/null_$name"; then
    echo "note: $name on the null device: this build does not emulate $(grep -Eo "CU(BLAS|DNN)" "$tmp/null_$name" | head -1)"
  elif [ $rc != 0 ]; then
    fail "$name on the null device exited $rc: $(tail -3 "$tmp/null_$name")"
  else
    grep -E "max_memory_allocated [1-9][0-9]* max_memory_reserved [1-9]" "$tmp/null_$name" ||
      fail "$name on the null device: no peaks: $(tail -3 "$tmp/null_$name")"
    ! grep "is not emulated" "$tmp/null_$name" || fail "$name on the null device made calls it does not emulate (above)"
  fi
done

"$py" "$ex/estimate_memory.py" >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || fail "estimate_memory.py without a model exited $rc, not 2"

[ $fails = 0 ] && echo "examples_cpu_check: all passed"
exit $((fails > 0))
