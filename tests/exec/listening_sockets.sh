#!/usr/bin/env bash
# Runs a command (a training launch) and, while it runs, samples every listening TCP
# socket that a process whose command line contains MARKER holds.  Prints each one once
# as "LISTEN <hex address:port> <tcp|tcp6>" (the kernel's /proc/net format: 0100007F is
# 127.0.0.1, 00000000 is every interface), then "EXIT <status>" of the command.
#   listening_sockets.sh MARKER COMMAND...
marker="$1"
shift
"$@" > /dev/null 2>&1 &
cmd=$!
seen=""
while kill -0 "$cmd" 2> /dev/null; do
  inodes=" "
  for p in $(pgrep -f -- "$marker"); do
    for fd in /proc/"$p"/fd/*; do
      l=$(readlink "$fd" 2> /dev/null) || continue
      case "$l" in socket:*) inodes+="${l//[^0-9]/} " ;; esac
    done
  done
  for table in tcp tcp6; do
    while read -r _ local _ state _ _ _ _ _ inode _; do
      [ "$state" = 0A ] || continue
      case "$inodes" in *" $inode "*) ;; *) continue ;; esac
      line="LISTEN $local $table"
      case "$seen" in *"$line"*) ;; *) seen+="$line"$'\n'; echo "$line" ;; esac
    done < <(tail -n +2 /proc/net/"$table")
  done
  sleep 0.05
done
wait "$cmd"
echo "EXIT $?"
