#!/bin/sh
# PID 1 of a lab node until it execs systemd. Runs inside the node's own network, mount, PID,
# UTS, IPC and cgroup namespaces (made by the caller), so every mount below is private to the
# node and vanishes with it.
#   node-init.sh ROOT LOWER UPPER WORK REPO HOSTNAME CONTAINERS [HOSTDIR=NODEDIR ...]
# Each HOSTDIR=NODEDIR pair is bind-mounted read-only into the node.
set -eu
root=$1 lower=$2 upper=$3 work=$4 repo=$5 name=$6 containers=$7
shift 7

mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$upper,workdir=$work" "$root"

for pair in "$@"; do
  src=${pair%%=*} dst=${pair#*=}
  mkdir -p "$root$dst"
  mount --bind "$src" "$root$dst"
  mount -o remount,bind,ro "$root$dst"
done

mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
# sysctl writes outside /proc/sys/net would land in the host's kernel: make the rest read-only.
mount --bind "$root/proc/sys" "$root/proc/sys"
mount --bind "$root/proc/sys/net" "$root/proc/sys/net"
mount -o remount,bind,ro "$root/proc/sys"
for f in sysrq-trigger irq bus fs; do
  [ -e "$root/proc/$f" ] && mount --bind -o ro "$root/proc/$f" "$root/proc/$f" 2>/dev/null || true
done
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"

# The node's own device files: the host's /dev is never bind-mounted in (a node's getty once
# chmod'ed the host's /dev/null).
mount -t tmpfs -o nosuid,mode=755,size=4m tmpfs "$root/dev"
for spec in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
  set -- $spec
  mknod -m 666 "$root/dev/$1" c "$2" "$3"
done
mkdir -p "$root/dev/pts" "$root/dev/shm" "$root/dev/mqueue"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs "$root/run"

mkdir -p "$root/srv/rdmaprov-repo"
mount --bind -o ro "$repo" "$root/srv/rdmaprov-repo"
mount -o remount,bind,ro "$root/srv/rdmaprov-repo"

# Container storage cannot be an overlay on an overlay: give it the host's own filesystem.
mkdir -p "$root/var/lib/containers"
mount --bind "$containers" "$root/var/lib/containers"

hostname "$name"

cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot

# Capabilities that act on the whole host are not a node's to have.
exec /usr/bin/env -i container=rdmaprov-lab PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
  /usr/bin/setpriv --bounding-set -sys_time,-sys_module,-sys_rawio,-syslog,-mknod,-bpf,-sys_boot \
  /lib/systemd/systemd --log-target=journal-or-kmsg
