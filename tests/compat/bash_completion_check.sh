#!/usr/bin/env bash
# The shipped bash completion completes muster's commands, their sub-commands and the long
# options a command's --help lists (from the muster in BIN_DIR).
#   usage: bash_completion_check.sh COMPLETION_FILE BIN_DIR
set -uo pipefail
file=${1:?usage: $0 COMPLETION_FILE BIN_DIR}
PATH=$(cd "${2:?usage: $0 COMPLETION_FILE BIN_DIR}" && pwd):$PATH
# shellcheck disable=SC1090
. "$file"
bad=0
expect() {  # expect "WORDS..." "WANTED" : completing the last word offers exactly WANTED
  local want=$2
  read -r -a COMP_WORDS <<<"$1"
  [[ $1 == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _muster
  local got="${COMPREPLY[*]}"
  if [ "$got" != "$want" ]; then
    echo "completing '$1': got '$got', want '$want'"
    bad=1
  fi
}
expect "muster rec" "reconfigure"
expect "muster import" "import-slurm-conf"
expect "muster node d" "drain"
expect "muster node reb" "reboot"
expect "muster control cancel" "cancel_reboot"
expect "muster partition re" "reset"
expect "muster control reco" "reconfigure"
expect "muster submit --parsa" "--parsable"
expect "muster import-slurm-conf --fo" "--force"
[ $bad = 0 ] && echo "bash completion: ok"
exit $bad
