#!/usr/bin/env bash
# On a machine with a real NVIDIA GPU: musterd's discovery (NVML through dlopen) must agree with
# nvidia-smi on every GPU's UUID, name, PCI bus id, memory, MIG instances and NVLink matrix.
# Skips (exit 77, "SKIP": ctest reports it as skipped) where there is no GPU.
#   usage: tests/gpu/discovery_vs_nvidia_smi.sh [PATH_TO_MUSTERD]
set -euo pipefail
musterd=${1:-$(dirname "$0")/../../build/release/bin/musterd}
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU or driver here"
  exit 77
fi
probe=$("$musterd" --probe --name gpu-check)
fail=0
check() {  # what, expected, got
  if [ "$2" != "$3" ]; then
    echo "MISMATCH $1: nvidia-smi says '$2', musterd says '$3'"
    fail=1
  else
    echo "ok $1: $3"
  fi
}
field() {  # line, key -> value (quoted or not)
  sed -n "s/.* $2=\"\([^\"]*\)\".*/\1/p; t; s/.* $2=\([^ ]*\).*/\1/p" <<<"$1" | head -1
}
count=$(nvidia-smi --query-gpu=count --format=csv,noheader | head -1)
check "GPU count" "$count" "$(grep -c '^gpu[0-9]*:' <<<"$probe")"
while IFS=, read -r index uuid name bus mem; do
  index=$(echo $index); uuid=$(echo $uuid); bus=$(echo $bus); mem=$(echo $mem)
  name=$(sed 's/^ *//; s/ *$//' <<<"$name")
  line=$(grep "^gpu$index: " <<<"$probe")
  check "gpu$index uuid" "$uuid" "$(field "$line" uuid)"
  check "gpu$index model" "$name" "$(field "$line" model)"
  check "gpu$index pci" "${bus,,}" "$(field "$line" pci | tr A-F a-f)"
  check "gpu$index memory_mb" "$mem" "$(field "$line" memory_mb)"
  check "gpu$index health" "ok" "$(field "$line" health)"
done < <(nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total --format=csv,noheader,nounits)
# MIG instances: nvidia-smi -L lists them under their GPU.
smi_migs=$(nvidia-smi -L | grep -c 'MIG-' || true)
check "MIG instances" "$smi_migs" "$(grep -c ' mig[0-9]*: uuid=MIG-' <<<"$probe" || true)"
for uuid in $(nvidia-smi -L | sed -n 's/.*(UUID: \(MIG-[^)]*\)).*/\1/p'); do
  grep -q "uuid=$uuid " <<<"$probe" || { echo "MISMATCH: $uuid not found by musterd"; fail=1; }
done
# NVLink: every NV# cell of `nvidia-smi topo -m` is a direct link of that many lanes (or, through
# NVSwitches, all-to-all).
nvidia-smi topo -m | sed 's/\x1b\[[0-9;]*m//g' | awk -F'\t' '/^GPU[0-9]+\t/ {
  for (j = 2; j <= NF; ++j) if ($j ~ /^NV[0-9]+$/) print $1, "GPU" (j - 2), $j }' |
while read -r a b cell; do
  i=${a#GPU}; j=${b#GPU}
  got=$(grep "^gpu$i links:" <<<"$probe" | grep -o " gpu$j=[A-Za-z]*[0-9]*" | cut -d= -f2)
  case "$got" in
    "$cell"|NVSwitch*) echo "ok link gpu$i-gpu$j: $cell ($got)" ;;
    *) echo "MISMATCH link gpu$i-gpu$j: nvidia-smi $cell, musterd $got"; exit 1 ;;
  esac
done || fail=1
echo "$probe" | sed -n '/^# The configuration/,$p'
[ $fail = 0 ] && echo "PASS: musterd discovery matches nvidia-smi" || { echo "FAIL"; exit 1; }
