#!/bin/sh
# ssh for OpenMPI's rsh launcher (plm_rsh_agent) between the "hosts" of tests/support/netns.py:
#   netns_rsh.sh [ssh options] HOST COMMAND...
# runs COMMAND in HOST's network namespace ($TRIDENT_NETNS_PREFIX$HOST), under HOST's
# hostname (a UTS namespace of its own), with an environment as bare as ssh's: nothing of the
# caller's environment passes but PATH and HOME, so what reaches a remote rank is only what
# mpirun forwards (OMPI_* and -x variables), as on real hosts. The sanitizers' settings
# (ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS) pass too, as a machine's own environment would
# give them: the sanitizer run of the suite sets them for every rank. Like ssh, it hands the words of
# COMMAND to a shell (mpirun sends "PATH=...; export PATH; ... orted ..."). A host named in
# $TRIDENT_NETNS_DOWN/ is gone (netns.Hosts.down): it answers as ssh does, with 255.
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    -o | -p | -l | -i | -F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "netns_rsh.sh: usage: netns_rsh.sh [ssh options] HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
ns="${TRIDENT_NETNS_PREFIX:?netns_rsh.sh: TRIDENT_NETNS_PREFIX is not set (tests/support/netns.py sets it)}$host"
if [ -e "${TRIDENT_NETNS_DOWN:-/nonexistent}/$host" ]; then
  echo "ssh: connect to host $host port 22: No route to host (netns_rsh.sh: $host is down)" >&2
  exit 255
fi
if ! ip netns list | grep -q "^$ns\( \|$\)"; then
  echo "netns_rsh.sh: no host '$host' (network namespace $ns does not exist)" >&2
  exit 255
fi
exec ip netns exec "$ns" unshare --uts sh -c \
  'hostname "$1"; exec env -i PATH="$PATH" HOME="${HOME:-/root}" ${ASAN_OPTIONS+"ASAN_OPTIONS=$ASAN_OPTIONS"} \
     ${UBSAN_OPTIONS+"UBSAN_OPTIONS=$UBSAN_OPTIONS"} ${LSAN_OPTIONS+"LSAN_OPTIONS=$LSAN_OPTIONS"} sh -c "$2"' \
  netns_rsh "$host" "$*"
