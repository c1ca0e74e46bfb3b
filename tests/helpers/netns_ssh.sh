#!/bin/sh
# Stands in for ssh in tests/distributed/test_multihost.cpp: `netns_ssh.sh HOST COMMAND...` runs
# COMMAND
# with /bin/sh in the network namespace that RINGLET_TEST_NETNS maps HOST to
# ("10.77.0.2=ns_b ..."), as `ssh HOST COMMAND` runs it in HOST's login shell.
host=$1
shift
for pair in $RINGLET_TEST_NETNS; do
  case $pair in
    "$host="*) exec ip netns exec "${pair#*=}" /bin/sh -c "$*" ;;
  esac
done
echo "netns_ssh: no network namespace for host '$host'" >&2
exit 255
