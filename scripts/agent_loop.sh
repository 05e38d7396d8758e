#!/usr/bin/env bash
# The live agent loop, from a shell: for every turn the agent asks bm for context, answers,
# and hands both turns back with `bm ingest` (every third turn with --extract).  Repeated turns
# ("yes", "thanks") must all be kept; in the middle the user asks to forget a turn, and its words
# must never come back: not in the next prompts, not in beads, recall or export, not in the
# store's raw files.  Prints one line per turn and a summary; exits 1 if anything falls short.
#
#   scripts/agent_loop.sh            # a throwaway store (BM_HOME is a temp dir)
#   BM_HOME=~/bm-try scripts/agent_loop.sh --keep
set -euo pipefail
keep=0; [ "${1:-}" = "--keep" ] && keep=1
command -v bm >/dev/null || { echo "Error: bm is not on PATH (hint: pip install -e . in a venv)" >&2; exit 1; }
if [ -z "${BM_HOME:-}" ] || [ "$keep" = 0 ]; then
  BM_HOME=$(mktemp -d); export BM_HOME
  [ "$keep" = 1 ] || trap 'rm -rf "$BM_HOME"' EXIT
fi
U=dana A=concierge SECRET="quokka-8812"
fail=0
say() { printf '%s\n' "$*"; }
bad() { printf 'FAIL: %s\n' "$*"; fail=1; }
ms() { date +%s%3N; }
turn_jsonl() {  # the user's turn and the agent's reply as two JSONL messages
  python3 -c 'import json, sys; print(json.dumps({"role": "user", "content": sys.argv[1]}));
print(json.dumps({"role": "assistant", "content": sys.argv[2]}))' "$1" "$2"
}
count() {  # count() FILTER: how many beads of the thread match (python: no jq needed)
  bm beads tail -n 100 -u "$U" --json | python3 -c "import json, sys; print(sum(1 for b in json.load(sys.stdin) if $1))"
}

turns=(
  "Hi, I'm Dana. I'm vegetarian and I live in Lisbon."
  "yes"
  "Can you find me a restaurant for Friday?"
  "yes"
  "My locker code at the gym is $SECRET, remember it"
  "thanks"
  "Please forget my locker code."
  "What do you know about my diet?"
  "yes"
  "thanks"
)
replies=(
  "Nice to meet you, Dana! Noted that you are vegetarian."
  "Great."
  "I found Ao 26 Vegan Food Project in Chiado, a vegetarian place."
  "Booked it for Friday at 8 pm."
  "I will keep it."
  "You are welcome."
  "Done: I forgot it."
  "You are vegetarian."
  "Great."
  "You are welcome."
)
total=0
for i in "${!turns[@]}"; do
  user_turn=${turns[$i]} reply=${replies[$i]}
  t0=$(ms)
  prompt=$(bm context "$user_turn" --budget 800 -u "$U" -a "$A")
  if [ "$i" -gt 6 ] && grep -q "$SECRET" <<<"$prompt"; then bad "turn $i: the forgotten code is back in the prompt"; fi
  extract=(); [ $((i % 3)) = 0 ] && extract=(--extract)
  turn_jsonl "$user_turn" "$reply" | bm ingest - -u "$U" "${extract[@]}" >/dev/null
  if [ "$user_turn" = "Please forget my locker code." ]; then
    bm forget --match "$SECRET" -u "$U" --yes >/dev/null
  fi
  t1=$(ms); total=$((total + t1 - t0))
  say "turn $((i + 1)): $((t1 - t0)) ms  ${user_turn:0:50}"
done

stored=$(count True)
expected=$(( ${#turns[@]} * 2 - 1 ))   # every turn and reply, minus the one forgotten turn
[ "$stored" = "$expected" ] || bad "$stored turns stored, expected $expected (a turn was lost or duplicated)"
yes_count=$(count 'b["content"] == "yes"')
[ "$yes_count" = 3 ] || bad "the repeated turn \"yes\" was stored $yes_count times, expected 3"
for what in "context x -u $U" "recall locker -u $U --json" "beads tail -n 100 -u $U --json" "export"; do
  # shellcheck disable=SC2086
  if bm $what | grep -q "$SECRET"; then bad "bm ${what%% *}: the forgotten code is still shown"; fi
done
if grep -rqa "$SECRET" "$BM_HOME"; then bad "the forgotten code is still in the store's files (grep -ra $BM_HOME)"; fi
say "$(( ${#turns[@]} )) turns in $total ms ($(( total / ${#turns[@]} )) ms a turn: context + ingest + reply); $stored turns stored"
[ "$fail" = 0 ] && say "ok: no turn lost, the forgotten turn is gone everywhere" || exit 1
