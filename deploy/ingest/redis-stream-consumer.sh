#!/usr/bin/env bash
# Read toolgate's audit Redis Stream as a consumer group and print each event
# (one JSON object per line) on stdout. Needs only bash and redis-cli.
#
# toolgate's redis_stream sink writes one entry per event:
#   XADD <key> MAXLEN ~ <maxlen> * json <line>
# (key "toolgate:audit" unless audit.sinks[].stream says otherwise).
#
# Usage: redis-stream-consumer.sh [-u URL] [-k KEY] [-g GROUP] [-c CONSUMER]
#                                 [-n COUNT] [-b BLOCK_MS] [-1]
#   -u  redis-cli -u URL          (default redis://127.0.0.1:6379/0)
#   -k  stream key                (default toolgate:audit)
#   -g  consumer group            (default toolgate-ingest; created at the
#                                  start of the stream if missing, so a new
#                                  group reads everything still retained)
#   -c  consumer name in the group (default: host name and pid)
#   -n  entries per read          (default 100)
#   -b  block this long for new entries, ms (default 5000)
#   -1  exit once no entry arrives within BLOCK_MS instead of waiting forever
#
# Delivery is at least once: a batch is acknowledged (XACK) only after it was
# printed, and on start the consumer first re-reads the entries it was given
# but never acknowledged (a crash between printing and XACK), so a line may
# be printed twice, never lost. `toolgate audit verify` on the collected
# output names such duplicates by `seq`. Run several consumers with different
# -c names in one group to share the stream; give each reader its own -g to
# have every reader see every event.
set -euo pipefail

url=redis://127.0.0.1:6379/0
key=toolgate:audit
group=toolgate-ingest
consumer="$(hostname)-$$"
count=100
block_ms=5000
once=0

usage() {
    sed -n '/^# Usage:/,/^#   -1/s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

while getopts 'u:k:g:c:n:b:1h' opt; do
    case "$opt" in
    u) url=$OPTARG ;;
    k) key=$OPTARG ;;
    g) group=$OPTARG ;;
    c) consumer=$OPTARG ;;
    n) count=$OPTARG ;;
    b) block_ms=$OPTARG ;;
    1) once=1 ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
(($# == 0)) || usage

rcli() {
    redis-cli --no-auth-warning -u "$url" --raw "$@"
}

# Create the group (and the stream, if toolgate has not written yet) at id 0:
# a group created at "$" would skip everything already in the stream.
# An existing group is kept with its position.
if ! out=$(rcli XGROUP CREATE "$key" "$group" 0 MKSTREAM 2>&1); then
    echo "redis-stream-consumer: XGROUP CREATE $key $group: $out" >&2
    exit 1
fi
case "$out" in
OK | BUSYGROUP*) ;;
*)
    echo "redis-stream-consumer: XGROUP CREATE $key $group: $out" >&2
    exit 1
    ;;
esac

# Read one batch starting at <$1> ("0": this consumer's pending entries;
# ">": entries never delivered to the group), print it, acknowledge it.
# Sets <got> to the number of entries read.
read_batch() {
    local start=$1 out
    local -a lines ids=()
    local block=()
    [[ $start == ">" ]] && block=(BLOCK "$block_ms")
    out=$(rcli XREADGROUP GROUP "$group" "$consumer" COUNT "$count" "${block[@]}" \
        STREAMS "$key" "$start")
    got=0
    # --raw prints the reply flattened, one element per line: the stream
    # key, then per entry its id, the field name and the value. Audit lines
    # are single-line JSON, so this is unambiguous; a nil reply (timeout)
    # prints one empty line.
    [[ -n $out ]] || return 0
    mapfile -t lines <<<"$out"
    [[ ${lines[0]} == "$key" ]] || {
        echo "redis-stream-consumer: unexpected reply: ${lines[0]}" >&2
        exit 1
    }
    local i=1
    while ((i < ${#lines[@]})); do
        if [[ -z ${lines[i + 1]-} ]]; then
            # A pending entry that MAXLEN trimmed away before it was
            # acknowledged: Redis returns its id with no fields. Its event
            # is gone from the stream; say so and acknowledge it.
            echo "redis-stream-consumer: entry ${lines[i]} was trimmed before it was" \
                "acknowledged; its event is lost to this group" >&2
            ids+=("${lines[i]}")
            i=$((i + 2))
            continue
        fi
        if [[ ${lines[i + 1]} != json ]]; then
            echo "redis-stream-consumer: entry ${lines[i]}: field '${lines[i + 1]}'," \
                "expected 'json' (not a toolgate audit stream?)" >&2
            exit 1
        fi
        printf '%s\n' "${lines[i + 2]}"
        ids+=("${lines[i]}")
        i=$((i + 3))
    done
    got=${#ids[@]}
    ((got > 0)) || return 0
    # Acknowledge only what was printed; a failed write to stdout has
    # already stopped the script (set -e), leaving the batch pending.
    rcli XACK "$key" "$group" "${ids[@]}" >/dev/null
}

# Entries delivered to this consumer name earlier but never acknowledged.
got=$count
while ((got == count)); do
    read_batch 0
done

while true; do
    read_batch ">"
    if ((got == 0 && once)); then
        exit 0
    fi
done
